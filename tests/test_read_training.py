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


def test_whole_item_reads_follow_the_stored_pair_reads() -> None:
    chosen = {
        "relevancy": [
            {"id": key, "rank": rank, "source": "a"} for rank, key in enumerate(["x", "y", "z"])
        ]
    }
    done = {("relevancy", "pair", "x"), ("relevancy", "pair", "z"), ("relevancy", "whole", "z")}
    todo = list(read_training._todo(chosen, ["whole"], done))
    # y has no pair read (a whole read alone would be unusable), z's whole read is stored.
    assert [(kind, e["id"]) for _, kind, e in todo] == [("whole", "x")]
    both = list(read_training._todo(chosen, ["pair", "whole"], done))
    assert [(kind, e["id"]) for _, kind, e in both] == [
        ("pair", "y"),
        ("whole", "x"),
        ("whole", "y"),
    ]


def test_same_examples_keeps_those_another_card_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(read_training, "READS", tmp_path)
    header = {"card": "other", "dtype": "float32"}
    stored = [
        {"scorer": "similarity", "kind": "pair", "id": "x", "labels": ["yes"], "logprobs": [0.0]},
        {"scorer": "similarity", "kind": "match", "id": "y", "labels": ["yes"], "logprobs": [0]},
        {"scorer": "relevancy", "kind": "pair", "id": "y", "labels": ["yes"], "logprobs": [0.0]},
    ]
    reads_path("other").write_text("\n".join(json.dumps(r) for r in [header, *stored]) + "\n")
    chosen = {
        "similarity": [{"id": "x"}, {"id": "y"}, {"id": "z"}],
        "relevancy": [{"id": "x"}, {"id": "y"}],
    }
    # A match read alone does not count: the pair read defines the examples a fit uses.
    assert read_training.same_examples(chosen, "other") == {
        "similarity": [{"id": "x"}],
        "relevancy": [{"id": "y"}],
    }
    with pytest.raises(SystemExit, match="no reads stored"):
        read_training.same_examples(chosen, "missing")


def test_match_reads_are_similarity_only_and_show_the_reference_as_the_scorer_does() -> None:
    example = {"id": "x", "rank": 0, "source": "a"}
    unread = {"id": "y", "rank": 1, "source": "a"}
    chosen = {"relevancy": [example], "similarity": [example, unread]}
    done = {("relevancy", "pair", "x"), ("similarity", "pair", "x")}
    todo = list(read_training._todo(chosen, ["match"], done))
    # Unlike a whole-item read, a match read needs no pair read (y has none): a model of
    # the evidence and the match read learns from it alone (fit_card_verdicts.MATCH_BASED).
    assert [(scorer, kind, e["id"]) for scorer, kind, e in todo] == [
        ("similarity", "match", "x"),
        ("similarity", "match", "y"),
    ]
    assert read_training.read_labels("match", "similarity") == ["yes", "no"]
    aliases = {"reference": "", "aliases": ["Paris", "City of Light"], "answer": "Paris."}
    # Alternative references joined as at run time (scorers._judge_reads.whole_reference),
    # the question shown when the example has one.
    assert read_training.read_variables("match", "similarity", aliases) == {
        "question": "",
        "reference": "Paris / City of Light",
        "output": "Paris.",
    }
    asked = {**aliases, "question": "Capital of France?"}
    assert read_training.read_variables("match", "similarity", asked)["question"] == (
        "Capital of France?"
    )


LONGEST_ANSWER_READ = {"qwen2.5-coder-1.5b-instruct": 81.0, "qwen2.5-coder-0.5b-instruct": 85.0}


@pytest.mark.slow
@pytest.mark.parametrize("card", ["qwen2.5-coder-1.5b-instruct", "qwen2.5-coder-0.5b-instruct"])
def test_the_stored_reads_refit_the_shipped_card_verdicts_number_for_number(card: str) -> None:
    """Each Qwen card's verdict file comes from its stored reads and its shipped feature sets
    (tools/fit_card_verdicts.py; all-MiniLM-L6-v2 computes the evidence, no judge runs)."""
    from tools.fit_card_verdicts import (
        MODELS,
        PAIR_FEATURES,
        SENTENCES_COPIED,
        SENTENCES_OWN,
        fitted_models,
        matrices,
        sentence_pair_gate,
        sentence_pair_matrix,
        shipped_sets,
    )
    from tools.fit_verdicts import differences

    shipped = json.loads((MODELS / f"{card}.verdicts.json").read_text(encoding="utf-8"))
    data = matrices(card, read_training.TRAIN)
    pairs = sentence_pair_matrix(card, read_training.TRAIN) if card in SENTENCES_OWN else None
    refit = fitted_models(data, shipped_sets(card), sentences=card in SENTENCES_COPIED, pairs=pairs)
    # Features, classes and structure exactly; coefficients to 1e-3 of their size: the
    # solver stops at its tolerance, and another processor's arithmetic moves the sixth
    # digit (CI's machine did), which moves no verdict.
    wanted = {scorer: shipped[scorer] for scorer in ("relevancy", "similarity")}
    assert differences(wanted, refit, rel=1e-3) == []
    # ...and a coefficient moved by 1% is still caught.
    moved = json.loads(json.dumps(wanted))
    within = moved["similarity"]["model"]
    within = within["otherwise"] if within["kind"] == "gated" else within  # the card's own
    within["weights"][1][0] *= 1.01
    assert len(differences(moved, refit, rel=1e-3)) == 1
    # Similarity: the match read up to the longest reference and answer read, the embedded
    # card's model (no read) past them.
    gated = refit["similarity"]
    assert gated["kind"] == "gated"
    assert gated["when"] == [
        {"feature": "reference_words", "at_most": 39.0},
        # the longest answer each card read (the 0.5B read a few examples more)
        {"feature": "answer_words", "at_most": LONGEST_ANSWER_READ[card]},
    ]
    embedded = json.loads((MODELS / "smollm2-135m-instruct.verdicts.json").read_text("utf-8"))
    own = gated["model"]
    if card in SENTENCES_COPIED:
        # within the limits, sentence pairs go to the embedded card's sentence-pair model
        pairs = embedded["similarity"]["model"]
        assert own["kind"] == "gated"
        assert own["when"] == [
            *pairs["when"],
            *[c for c in embedded["similarity"]["when"] if "feature" in c],
        ]
        assert own["model"] == pairs["model"]
        own = own["otherwise"]
    if card in SENTENCES_OWN:
        # within the limits, sentence pairs go to the card's own model of them: the embedded
        # card's sentence-pair features and the match read, fitted on every such training
        # example with a match read (more than have a pair read)
        assert pairs is not None and len(pairs[1]) == 306
        assert own["kind"] == "gated" and own["when"] == sentence_pair_gate()
        assert own["model"]["features"] == PAIR_FEATURES
        assert "swap_rest" in PAIR_FEATURES and "match_yes" in PAIR_FEATURES
        assert shipped["training"]["examples"]["sentence pairs"] == {
            "exact": 69,
            "missing": 117,
            "partial": 68,
            "semantic": 52,
        }
        own = own["otherwise"]
    assert any(name.startswith("match_") for name in own["features"])
    # the embedded card's model is gated too (whole sentences of a short item): past this
    # gate it judges every verdict with its short-answer model, the one copied
    assert gated["otherwise"] == embedded["similarity"]["otherwise"]
    # Relevancy is the embedded card's model, copied, on both cards (the 0.5B's read of a
    # statement added nothing in grouped CV; the 1.5B's ranked every relevancy dev set below
    # the embedded card's forum-gated model), so it makes no judge call.
    assert refit["relevancy"] == embedded["relevancy"]
    assert shipped["training"]["copied"]["relevancy"].startswith("models/smollm2")
    assert "no read is made" in shipped["training"]["copied"]["relevancy"]


def test_a_card_can_take_the_embedded_cards_model_by_name() -> None:
    from tools.fit_card_verdicts import EMBEDDED_SET, named_set, shipped_sets

    assert named_set("relevancy", EMBEDDED_SET) is None  # copied, not fitted
    assert shipped_sets("qwen2.5-coder-0.5b-instruct")["relevancy"] is None
    assert shipped_sets("qwen2.5-coder-1.5b-instruct")["relevancy"] is None
    assert "match_yes" in (named_set("similarity", "evidence + judge read + match read") or [])
    with pytest.raises(SystemExit, match="the embedded card's model"):
        named_set("relevancy", "no such set")


def test_past_each_qwen_gate_the_embedded_card_uses_the_model_the_card_copied() -> None:
    """The Qwen cards' similarity falls back to the embedded card's model past their item
    limits. The embedded model is gated (whole sentences of a short item go to its sentence
    model), so the one to copy is its short-answer model, and only while the embedded gate's
    item limits lie within the card's: past them it is then the one model the embedded card
    uses (tools.fit_card_verdicts.past_the_gate)."""
    from tools.fit_card_verdicts import MODELS, past_the_gate

    embedded = json.loads((MODELS / "smollm2-135m-instruct.verdicts.json").read_text("utf-8"))
    assert embedded["similarity"]["kind"] == "gated"
    own = {c["feature"]: c for c in embedded["similarity"]["when"] if "feature" in c}
    for card in LONGEST_ANSWER_READ:
        gated = json.loads((MODELS / f"{card}.verdicts.json").read_text("utf-8"))["similarity"]
        assert gated["otherwise"] == embedded["similarity"]["otherwise"]
        for condition in gated["when"]:
            assert own[condition["feature"]]["at_most"] <= condition["at_most"]
        assert past_the_gate(gated["when"]) == gated["otherwise"]
    with pytest.raises(SystemExit, match="does not keep within"):
        past_the_gate(
            [
                {"feature": "reference_words", "at_most": 10.0},
                {"feature": "answer_words", "at_most": 81.0},
            ]
        )


def test_with_sentences_puts_the_embedded_sentence_pair_model_in_front_of_a_cards_own() -> None:
    """tools.fit_card_verdicts.with_sentences: the verdicts the embedded card sends to its
    model of sentence pairs (two sentences of at least three words, neither text over twenty
    words, no list reference) go to that model, anything else, short phrases of five words
    or more and longer sentences included, to the card's own; the result loads as a verdict
    model whose gates route so."""
    from offline_scorer.toolkit import GatedModel
    from tools.fit_card_verdicts import MODELS, with_sentences

    embedded = json.loads((MODELS / "smollm2-135m-instruct.verdicts.json").read_text("utf-8"))
    pairs = embedded["similarity"]["model"]
    assert pairs["kind"] == "gated"
    own = embedded["similarity"]["otherwise"]  # any logistic model over the same labels
    built = with_sentences(own)
    assert built["model"] == pairs["model"]
    assert built["otherwise"] == own
    assert {"feature": "sentence_words", "at_least": 3.0} in built["when"]
    model = GatedModel.model_validate(built)
    item = {"reference_words": 6.0, "answer_words": 6.0, "ref_list": 0.0}
    assert model.holds({**item, "sentence_words": 4.0, "min_tokens": 4.0})
    assert not model.holds({**item, "sentence_words": 0.0, "min_tokens": 7.0})
    assert not model.holds({**item, "sentence_words": 4.0, "reference_words": 30.0})
    assert not model.holds({**item, "sentence_words": 4.0, "answer_words": 30.0})
    assert not model.holds({**item, "sentence_words": 4.0, "ref_list": 1.0})


def test_a_read_stacked_on_the_embedded_model_composes_into_its_gated_form() -> None:
    """tools.fit_card_verdicts.compose_stack: a logistic model of the embedded card's
    relevancy logits and a judge's read, written as one logistic model of the embedded
    model's features and the read behind each of its gates, gives the same probabilities
    as the two models applied one after the other (to the file's rounding)."""
    import numpy as np

    from offline_scorer.toolkit import GatedModel
    from tools.fit_card_verdicts import (
        MODELS,
        REL_READ,
        STACK_INPUTS,
        compose_stack,
        embedded_logits,
    )
    from tools.verdict_training import REL_CLASSES, fit, predict_proba

    embedded = json.loads((MODELS / "smollm2-135m-instruct.verdicts.json").read_text("utf-8"))
    relevancy = embedded["relevancy"]
    assert relevancy["kind"] == "gated"  # the forum gate: two models to compose into
    names = list(GatedModel.model_validate(relevancy).features) + REL_READ
    rng = np.random.default_rng(7)
    X = rng.normal(size=(400, len(names)))
    X[:, names.index("answer_words")] = rng.integers(1, 40, size=400)  # both sides of the gate
    inputs = np.hstack([embedded_logits(relevancy, X, names), X[:, -len(REL_READ) :]])
    y = rng.integers(0, len(REL_CLASSES), size=400)
    stack = fit(inputs, y, STACK_INPUTS, REL_CLASSES, l2=1.0)
    composed = GatedModel.model_validate(compose_stack(relevancy, stack))
    assert composed.when == GatedModel.model_validate(relevancy).when
    for leaf in (composed.model, composed.otherwise):
        assert leaf.features[-len(REL_READ) :] == REL_READ
    expected = predict_proba(stack, inputs)
    got = np.array(
        [
            [composed.probabilities(dict(zip(names, row.tolist())))[c] for c in REL_CLASSES]
            for row in X
        ]
    )
    assert np.abs(got - expected).max() < 1e-3
    # the identity stack (each logit to itself, the read weighed 0) gives back the embedded
    # model's own probabilities
    k = len(REL_CLASSES)
    identity = {
        "means": [0.0] * len(STACK_INPUTS),
        "scales": [1.0] * len(STACK_INPUTS),
        "weights": [[float(i == j) for j in range(k)] + [0.0] * len(REL_READ) for i in range(k)],
        "intercepts": [0.0] * k,
        "l2": 1.0,
    }
    same = GatedModel.model_validate(compose_stack(relevancy, identity))
    original = GatedModel.model_validate(relevancy)
    for row in X[:50]:
        values = dict(zip(names, row.tolist()))
        assert same.probabilities(values) == pytest.approx(original.probabilities(values), abs=2e-4)
