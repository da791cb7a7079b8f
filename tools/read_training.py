"""The judge's own label reads of the training examples, computed once and stored.

    .venv/bin/python -m tools.read_training --card qwen2.5-coder-1.5b-instruct
    .venv/bin/python -m tools.read_training --card ... --limit 20     # a first look

For a card whose verdict model takes the judge's read (``tools/fit.toml``), every training
example needs the label log-probabilities the scorers will read at run time: the same
shipped prompt, the same labels, the same judge, the same backend. They take a forward pass
each (about 1.5 s with the 1.5B card in bfloat16 on 2 AVX-512 cores), so they are read
once, here, and stored one JSON line per example in ``tools/reads/<card>.jsonl`` (float32
reads) or ``tools/reads/<card>.<dtype>.jsonl``: the example's id (a hash of its texts), the
kind of read, the labels and their log-probabilities. A refit then takes seconds.

Which examples: those of ``tools/verdict_training.py``, sampled per (source, label) by
the order of their ids (a hash, so the sample is fixed and unrelated to the file order),
at most ``--per-stratum`` of each, read rank by rank (every stratum's first example,
then every stratum's second, ...) so that a stopped run holds a balanced sample. Two kinds
of read, each the whole item as the scorer shows it:

* ``context`` (relevancy, ``context.jinja``): the question, the whole answer, then the
  statement under judgment;
* ``match`` (similarity, ``match.jinja``): the question, the whole reference and the whole
  answer, asked as one yes/no question (does the answer say what the reference says?);
  the training examples' references are one unit, so none is named.

The run appends as it goes and skips ids already stored, so it can be stopped and resumed;
it is deterministic (same card, same dtype, same examples: same values, rounded to 4
decimals; each read is computed alone, whatever the others). The card, its dtype and its
fingerprint are the file's first line. ``--worker i/n`` splits the reads between n
processes (one core each: two torch processes sharing cores slow each other down), each
writing a shard; ``--merge`` folds the shards into one file sorted by (scorer, kind, id).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from offline_scorer import TransformersJudge
from offline_scorer.toolkit import render_prompt
from tools.verdict_training import (
    TRAIN,
    cqa_relevancy_examples,
    relevancy_examples,
    similarity_examples,
    sts_similarity_examples,
)

ROOT = Path(__file__).resolve().parent.parent
READS = ROOT / "tools" / "reads"
RELEVANCY_LABELS = ["yes", "unsure", "no"]
SIMILARITY_LABELS = ["exact", "semantic", "partial", "missing"]
MATCH_LABELS = ["yes", "no"]
# Each kind of read: its template (prompts/answer-<scorer>/en/<template>.jinja), the scorers
# it applies to.
KINDS = {
    "context": ("context", ("relevancy",)),
    "match": ("match", ("similarity",)),
}


def read_labels(kind: str, scorer: str) -> list[str]:
    """The labels one kind of read scores."""
    return MATCH_LABELS if kind == "match" else RELEVANCY_LABELS


PER_STRATUM = 150
BATCH = 16


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def read_variables(kind: str, scorer: str, example: dict[str, Any]) -> dict[str, str]:
    """The prompt's variables for one example and one kind of read, as the scorer renders
    them at run time (``scorers/_judge_reads.py``)."""
    if kind == "match":
        # Alternative references joined with " / "; a one-unit reference names no unit.
        reference = example["reference"] or " / ".join(example["aliases"])
        return {
            "question": example.get("question") or "",
            "reference": reference,
            "output": example["answer"] or "",
            "unit": "",
        }
    # The whole answer in view, the statement named after it.
    return {
        "input": example["question"] or "",
        "output": example["answer"] or example["statement"] or "",
        "statement": example["statement"] or "",
    }


SHIPPED_KIND = {"relevancy": "context", "similarity": "match"}
"""The kind of read each scorer's card models take."""


def shipped_read(scorer: str, example: dict[str, Any]) -> tuple[Any, list[str]]:
    """The prompt and labels of the read a card's model takes of one example."""
    kind = SHIPPED_KIND[scorer]
    variables = read_variables(kind, scorer, example)
    return render_prompt(f"answer-{scorer}", "en", KINDS[kind][0], variables), read_labels(
        kind, scorer
    )


def example_id(scorer: str, example: dict[str, Any]) -> str:
    """A stable id: a hash of the example's texts (the form the stored reads are keyed by)."""
    if scorer == "relevancy":
        question = example["question"] or ""
        shown = {
            "pair": {"input": question, "statement": example["statement"] or ""},
            "whole": {"input": question, "statement": example["answer"] or ""},
        }
    else:
        unit = example["reference"] or "; ".join(example["aliases"])
        shown = {
            "pair": {"ground_truth_unit": unit, "output": example["answer_unit"] or ""},
            "whole": {"ground_truth_unit": unit, "output": example["answer"] or ""},
        }
    text = json.dumps([scorer, shown], sort_keys=True, ensure_ascii=False)
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]


def pool(train: Path = TRAIN) -> dict[str, list[dict[str, Any]]]:
    """Every training example of both scorers, each with its ``id``."""
    examples = {
        "relevancy": relevancy_examples(train) + cqa_relevancy_examples(train),
        "similarity": similarity_examples(train) + sts_similarity_examples(train),
    }
    return {
        scorer: [{**example, "id": example_id(scorer, example)} for example in rows]
        for scorer, rows in examples.items()
    }


def sample(examples: list[dict[str, Any]], per_stratum: int) -> list[dict[str, Any]]:
    """At most ``per_stratum`` examples of each (source, label), first ids first."""
    strata: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for example in sorted(examples, key=lambda e: e["id"]):
        strata[(example["source"], example["label"])].append(example)
    # Rank-major: the first k examples of every stratum come before any stratum's (k+1)th,
    # so a run stopped anywhere has read a balanced sample (and a later, larger run
    # extends it).
    chosen = {
        e["id"]: {**e, "rank": rank}
        for rows in strata.values()
        for rank, e in enumerate(rows[:per_stratum])
    }
    return sorted(chosen.values(), key=lambda e: (e["rank"], e["id"]))


def reads_path(card: str, shard: int | None = None, dtype: str = "float32") -> Path:
    """The card's reads file in one dtype (or one worker's shard of it, merged later):
    ``<card>.jsonl`` for float32, ``<card>.<dtype>.jsonl`` for another."""
    name = card if dtype == "float32" else f"{card}.{dtype}"
    return READS / (f"{name}.jsonl" if shard is None else f"{name}.shard-{shard}.jsonl")


def load_reads(path: Path) -> dict[tuple[str, str, str], dict[str, float]]:
    """(scorer, kind, id) -> {label: log-probability} from a reads file and its shards."""
    found: dict[tuple[str, str, str], dict[str, float]] = {}
    for _, row in _rows([path, *sorted(path.parent.glob(f"{path.stem}.shard-*.jsonl"))]):
        found[(row["scorer"], row["kind"], row["id"])] = dict(
            zip(row["labels"], row["logprobs"], strict=True)
        )
    return found


def _rows(paths: list[Path]) -> Iterator[tuple[Path, dict[str, Any]]]:
    for path in paths:
        if not path.is_file():
            continue
        with path.open(encoding="utf-8") as handle:
            for line in handle:
                row = json.loads(line)
                if "id" in row:
                    yield path, row


def merge(card: str, dtype: str = "float32") -> int:
    """Fold the shards into the card's file, sorted by (scorer, kind, id): one
    deterministic file whatever the workers' order; returns the number of reads."""
    path = reads_path(card, dtype=dtype)
    shards = sorted(path.parent.glob(f"{path.stem}.shard-*.jsonl"))
    headers = {
        json.dumps(json.loads(p.read_text(encoding="utf-8").splitlines()[0]), sort_keys=True)
        for p in [path, *shards]
        if p.is_file() and p.stat().st_size
    }
    if len(headers) != 1:
        raise SystemExit(f"read_training: the shards were read differently: {sorted(headers)}")
    rows = {(r["scorer"], r["kind"], r["id"]): r for _, r in _rows([path, *shards])}
    lines = [headers.pop()] + [json.dumps(rows[key], sort_keys=True) for key in sorted(rows)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    for shard in shards:
        shard.unlink()
    return len(rows)


def _todo(
    chosen: dict[str, list[dict[str, Any]]], kinds: list[str], done: set[tuple[str, str, str]]
) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for kind in kinds:
        ranked = sorted(
            (
                (example["rank"], scorer, example)
                for scorer, rows in chosen.items()
                for example in rows
            ),
            key=lambda entry: (entry[0], entry[1], entry[2]["id"]),
        )
        for _, scorer, example in ranked:
            if (scorer, kind, example["id"]) in done or scorer not in KINDS[kind][1]:
                continue
            yield scorer, kind, example


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--card", default="qwen2.5-coder-1.5b-instruct")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--train", type=Path, default=TRAIN)
    parser.add_argument("--per-stratum", type=int, default=PER_STRATUM)
    parser.add_argument("--kinds", nargs="+", choices=sorted(KINDS), default=sorted(KINDS))
    parser.add_argument("--limit", type=int, default=None, help="stop after this many reads")
    parser.add_argument(
        "--skip-sources",
        nargs="*",
        default=[],
        help="read no example of these sources (e.g. those the fit leaves out: cqa sts sts_swap)",
    )
    parser.add_argument(
        "--worker",
        default=None,
        help="i/n: read only every n-th example from the i-th (0-based), into a shard of "
        "the file; run n workers at once (one core each), then --merge",
    )
    parser.add_argument("--merge", action="store_true", help="fold the shards into the file")
    args = parser.parse_args(argv)
    if args.merge:
        dtype = "float32" if args.dtype == "auto" else args.dtype
        print(f"{reads_path(args.card, dtype=dtype)}: {merge(args.card, dtype)} reads")
        return 0
    worker, workers = (int(v) for v in args.worker.split("/")) if args.worker else (None, 1)
    judge = TransformersJudge(args.card, dtype=args.dtype, threads=args.threads)
    loaded = judge.load()
    out = reads_path(args.card, worker, loaded.dtype)
    out.parent.mkdir(parents=True, exist_ok=True)
    chosen = {
        scorer: [e for e in sample(rows, args.per_stratum) if e["source"] not in args.skip_sources]
        for scorer, rows in pool(args.train).items()
    }
    done = set(load_reads(reads_path(args.card, dtype=loaded.dtype)))
    todo = list(_todo(chosen, args.kinds, done))
    if worker is not None:
        todo = todo[worker::workers]
    if args.limit is not None:
        todo = todo[: args.limit]
    log(
        f"{sum(len(rows) for rows in chosen.values())} examples sampled "
        f"({', '.join(f'{s} {len(r)}' for s, r in chosen.items())}); {len(done)} reads stored, "
        f"{len(todo)} to do"
    )
    if not out.is_file() or out.stat().st_size == 0:
        header = {"card": args.card, "dtype": loaded.dtype, "fingerprint": loaded.fingerprint}
        out.write_text(json.dumps(header) + "\n", encoding="utf-8")
    started = time.perf_counter()
    tokens = 0
    with out.open("a", encoding="utf-8") as handle:
        for start in range(0, len(todo), BATCH):
            chunk = todo[start : start + BATCH]
            prompts = [
                render_prompt(
                    f"answer-{scorer}", "en", KINDS[kind][0], read_variables(kind, scorer, example)
                )
                for scorer, kind, example in chunk
            ]
            labels = [read_labels(kind, scorer) for scorer, kind, _ in chunk]
            answers = judge.score_labels(prompts, labels)
            for (scorer, kind, example), answer in zip(chunk, answers, strict=True):
                tokens += answer.usage.prompt_tokens
                if not answer.ok:
                    log(f"{scorer} {kind} {example['id']}: {answer.error}")
                    continue
                row = {
                    "scorer": scorer,
                    "kind": kind,
                    "id": example["id"],
                    "labels": list(answer.value.labels),
                    "logprobs": list(answer.value.logprobs),
                }
                handle.write(json.dumps(row) + "\n")
            handle.flush()
            seconds = time.perf_counter() - started
            count = start + len(chunk)
            log(
                f"{count}/{len(todo)} reads, {seconds:.0f} s, {count / seconds:.2f} reads/s, "
                f"{tokens / seconds:.0f} own prompt tokens/s"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
