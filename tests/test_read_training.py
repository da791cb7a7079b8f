"""The stored judge reads of the training examples: sampling and merging (no model)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools import read_training
from tools.read_training import example_id, load_reads, merge, reads_path, sample


def examples(count: int, source: str, label: str) -> list[dict]:
    return [
        {"source": source, "label": label, "question": f"q{n}", "statement": f"{source}{label}{n}"}
        for n in range(count)
    ]


def test_the_sample_is_rank_major_so_any_prefix_is_balanced() -> None:
    pool = examples(5, "a", "yes") + examples(2, "a", "no") + examples(4, "b", "yes")
    pool = [{**e, "id": example_id("relevancy", {**e, "answer": ""})} for e in pool]
    chosen = sample(pool, per_stratum=3)
    assert len(chosen) == 3 + 2 + 3
    ranks = [e["rank"] for e in chosen]
    assert ranks == sorted(ranks)  # every stratum's first, then every stratum's second, ...
    first = chosen[:3]
    assert {(e["source"], e["label"]) for e in first} == {("a", "yes"), ("a", "no"), ("b", "yes")}
    assert sample(list(reversed(pool)), per_stratum=3) == chosen  # order of the pool: none


def test_shards_merge_into_one_sorted_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(read_training, "READS", tmp_path)
    header = {"card": "c", "dtype": "float32", "fingerprint": "c@sha256:0"}

    def row(scorer: str, key: str, value: float) -> str:
        labels = ["yes", "unsure", "no"]
        item = {"scorer": scorer, "kind": "pair", "id": key, "labels": labels}
        return json.dumps({**item, "logprobs": [value, -2.0, -3.0]})

    reads_path("c").write_text(json.dumps(header) + "\n" + row("relevancy", "b", -0.1) + "\n")
    reads_path("c", 0).write_text(json.dumps(header) + "\n" + row("relevancy", "c", -0.2) + "\n")
    reads_path("c", 1).write_text(json.dumps(header) + "\n" + row("relevancy", "a", -0.3) + "\n")
    assert len(load_reads(reads_path("c"))) == 3  # the shards count before the merge
    assert merge("c") == 3
    lines = reads_path("c").read_text().splitlines()
    assert json.loads(lines[0]) == header
    assert [json.loads(line)["id"] for line in lines[1:]] == ["a", "b", "c"]
    assert not list(tmp_path.glob("*.shard-*"))
    assert load_reads(reads_path("c"))[("relevancy", "pair", "a")]["yes"] == -0.3


def test_shards_read_with_another_dtype_do_not_merge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(read_training, "READS", tmp_path)
    reads_path("c").write_text(json.dumps({"card": "c", "dtype": "float32"}) + "\n")
    reads_path("c", 0).write_text(json.dumps({"card": "c", "dtype": "bfloat16"}) + "\n")
    with pytest.raises(SystemExit, match="read differently"):
        merge("c")


def test_match_reads_are_similarity_only_and_show_the_reference_as_the_scorer_does() -> None:
    example = {"id": "x", "rank": 0, "source": "a"}
    unread = {"id": "y", "rank": 1, "source": "a"}
    chosen = {"relevancy": [example], "similarity": [example, unread]}
    done = {("similarity", "match", "y")}
    todo = list(read_training._todo(chosen, ["match", "context"], done))
    # Each kind reads its own scorer's examples; what is stored is not read again.
    assert [(scorer, kind, e["id"]) for scorer, kind, e in todo] == [
        ("similarity", "match", "x"),
        ("relevancy", "context", "x"),
    ]
    assert read_training.read_labels("match", "similarity") == ["yes", "no"]
    aliases = {"reference": "", "aliases": ["Paris", "City of Light"], "answer": "Paris."}
    # Alternative references joined as at run time (scorers._judge_reads.whole_reference),
    # the question shown when the example has one.
    assert read_training.read_variables("match", "similarity", aliases) == {
        "question": "",
        "reference": "Paris / City of Light",
        "output": "Paris.",
        "unit": "",
    }
    asked = {**aliases, "question": "Capital of France?"}
    assert read_training.read_variables("match", "similarity", asked)["question"] == (
        "Capital of France?"
    )
    # A relevancy read shows the whole answer and names the statement.
    statement = {"question": "Q?", "statement": "Paris.", "answer": "Paris. It is big."}
    assert read_training.read_variables("context", "relevancy", statement) == {
        "input": "Q?",
        "output": "Paris. It is big.",
        "statement": "Paris.",
    }
