"""Verdict models that read the judge: the judge's label reads join the evidence.

The real embedded model stands in for a card's judge: a card named ``reads-test`` (the
embedded card's weights, a verdict file whose features include ``read_*``) is written to a
temporary models folder and the session's loaded model is presented under that name, so the scorers run the whole path - one label read per verdict
through transformers, the evidence, the fitted regression - with nothing mocked.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from offline_scorer import (
    TransformersJudge,
    create_answer_relevancy_scorer,
    create_answer_similarity_scorer,
)
from offline_scorer.judges import _cards
from offline_scorer.judges.embeddings import shared_embedder
from offline_scorer.scorers import _verdicts
from offline_scorer.scorers._judge_reads import (
    MATCH_LABELS,
    for_item,
    item_features,
    whole_features,
    whole_reference,
)
from offline_scorer.scorers._split import aliases_of
from offline_scorer.scorers._verdicts import SIMILARITY_LABELS
from offline_scorer.toolkit import (
    read_features,
    relevancy_evidence,
    render_prompt,
    similarity_evidence,
)

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
CARD = "reads-test"


def logistic(classes: list[str], features: list[str], weights: list[list[float]]) -> dict:
    return {
        "kind": "logistic",
        "classes": classes,
        "features": features,
        "means": [0.0] * len(features),
        "scales": [1.0] * len(features),
        "weights": weights,
        "intercepts": [0.0] * len(classes),
        "l2": 1.0,
    }


VERDICTS = {
    "format": "offline-scorer-verdicts/1",
    "judge": CARD,
    "embedder": "all-minilm-l6-v2",
    "scoring": {"relevancy": "expected", "similarity": "expected"},
    "relevancy": logistic(
        ["no", "unsure", "yes"],
        ["cos", "read_yes", "read_no"],
        [[0.0, 0.0, 0.0], [1.0, 0.5, -0.5], [2.0, 1.5, -1.0]],
    ),
    "similarity": logistic(
        ["missing", "partial", "semantic", "exact"],
        ["cos", "read_exact", "read_missing"],
        [[0.0, 0.0, 0.0], [1.0, 0.2, -0.2], [2.0, 0.6, -0.6], [3.0, 1.0, -1.0]],
    ),
    "training": {},
    "slice_check": {},
}


@pytest.fixture
def reads_card(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    return write_card(tmp_path, monkeypatch, VERDICTS)


def write_card(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, verdicts: dict) -> str:
    """A card named ``reads-test`` with this verdict file, in a temporary models folder."""
    models = tmp_path / "models"
    shutil.copytree(ROOT / "models", models)
    text = json.dumps(verdicts)
    (models / f"{CARD}.verdicts.json").write_text(text)
    card = (models / "smollm2-135m-instruct.toml").read_text()
    card = card.replace('name = "smollm2-135m-instruct"', f'name = "{CARD}"')
    head, _, tail = card.partition("[verdicts]")
    tail = tail[tail.index("\n[") :] if "\n[" in tail else ""
    digest = hashlib.sha256(text.encode()).hexdigest()
    card = f'{head}[verdicts]\nfile = "{CARD}.verdicts.json"\nsha256 = "{digest}"\n{tail}'
    (models / f"{CARD}.toml").write_text(card)
    monkeypatch.setattr(_cards, "data_folder", lambda name: models)
    monkeypatch.setattr(_verdicts, "data_folder", lambda name: models)
    return CARD


def on_card(judge: TransformersJudge, card: str) -> TransformersJudge:
    """The session's loaded embedded model, presented as ``card`` (no second load)."""
    return TransformersJudge(replace(judge.load(), model_id=card))


def test_relevancy_reads_each_statement_and_combines_it_with_the_evidence(
    reads_card: str, judge: TransformersJudge
) -> None:
    judge = on_card(judge, reads_card)
    scorer = create_answer_relevancy_scorer(judge=judge, scale=1)
    question = "How many legs does a spider have?"
    answer = "A spider has eight legs. Stock markets fell sharply on Monday."
    result = scorer.run(input=question, output=answer)
    statements = result.preprocess_step_result["statements"]
    assert len(statements) == 2
    labels_calls = [call for call in judge.call_log if call.kind == "labels"]
    assert [len(call.items) for call in labels_calls] == [2]  # one read per statement
    # The verdicts are the fitted model applied to the evidence plus the judge's own read.
    prompts = [
        render_prompt("answer-relevancy", "en", "verdict", {"input": question, "statement": s})
        for s in statements
    ]
    reads = [a.value for a in judge.score_labels(prompts, ["yes", "unsure", "no"])]
    evidence = relevancy_evidence(shared_embedder("all-minilm-l6-v2"), question, statements, answer)
    model = _verdicts.LogisticModel.model_validate(VERDICTS["relevancy"])
    for verdict, features, read in zip(
        result.analyze_step_result["results"], evidence, reads, strict=True
    ):
        expected = model.probabilities({**features, **read_features(read.labels, read.logprobs)})
        assert verdict["probabilities"] == {k: expected[k] for k in ("yes", "unsure", "no")}
    assert 0.0 <= result.score <= 1.0


def test_similarity_reads_every_reference_unit_against_every_answer_unit(
    reads_card: str, judge: TransformersJudge
) -> None:
    judge = on_card(judge, reads_card)
    scorer = create_answer_similarity_scorer(judge=judge, scale=1)
    result = scorer.run(
        input="Capital and river?",
        output="Paris is the capital of France. The Seine flows through it.",
        ground_truth="The capital of France is Paris.",
    )
    units = result.preprocess_step_result
    count = len(units["ground_truth_units"]) * len(units["output_units"])
    assert count == 2
    labels_calls = [call for call in judge.call_log if call.kind == "labels"]
    assert [len(call.items) for call in labels_calls] == [count]
    (match,) = result.analyze_step_result["matches"]
    assert set(match["probabilities"]) == {"exact", "semantic", "partial", "missing"}
    assert sum(match["probabilities"].values()) == pytest.approx(1.0, abs=1e-3)


def test_read_features_are_log_probabilities_renormalised_over_the_labels() -> None:
    features = read_features(["yes", "unsure", "no"], [-0.5, -1.5, -40.0])
    assert features["read_no"] == -12.0  # floored
    total = sum(2.718281828459045**v for v in (features["read_yes"], features["read_unsure"]))
    assert total == pytest.approx(1.0, abs=1e-3)


# Whole-item reads: one read of the whole answer per item, shared by its verdicts.
WHOLE_ONLY = {
    **VERDICTS,
    "relevancy": logistic(
        ["no", "unsure", "yes"],
        ["cos", "whole_yes", "whole_no"],
        [[0.0, 0.0, 0.0], [1.0, 0.5, -0.5], [2.0, 1.5, -1.0]],
    ),
    "similarity": logistic(
        ["missing", "partial", "semantic", "exact"],
        ["cos", "read_exact", "whole_exact", "whole_missing"],
        [[0.0, 0.0, 0.0, 0.0], [1.0, 0.1, 0.2, -0.2], [2.0, 0.3, 0.6, -0.6], [3.0, 0.5, 1.0, -1]],
    ),
}


def test_relevancy_whole_item_read_is_one_read_shared_by_every_statement(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, judge: TransformersJudge
) -> None:
    judge = on_card(judge, write_card(tmp_path, monkeypatch, WHOLE_ONLY))
    scorer = create_answer_relevancy_scorer(judge=judge, scale=1)
    question = "How many legs does a spider have?"
    answer = "A spider has eight legs. Stock markets fell sharply on Monday."
    result = scorer.run(input=question, output=answer)
    statements = result.preprocess_step_result["statements"]
    assert len(statements) == 2
    labels_calls = [call for call in judge.call_log if call.kind == "labels"]
    assert [len(call.items) for call in labels_calls] == [1]  # the whole answer, once
    prompt = render_prompt(
        "answer-relevancy", "en", "verdict", {"input": question, "statement": answer}
    )
    (read,) = [a.value for a in judge.score_labels([prompt], ["yes", "unsure", "no"])]
    whole = whole_features(read.labels, read.logprobs)
    assert set(whole) == {"whole_yes", "whole_unsure", "whole_no"}
    evidence = relevancy_evidence(shared_embedder("all-minilm-l6-v2"), question, statements, answer)
    model = _verdicts.LogisticModel.model_validate(WHOLE_ONLY["relevancy"])
    verdicts = result.analyze_step_result["results"]
    for verdict, features in zip(verdicts, evidence, strict=True):
        expected = model.probabilities({**features, **whole})
        assert verdict["probabilities"] == {k: expected[k] for k in ("yes", "unsure", "no")}
    # The statements differ in their evidence, so one shared read still gives two verdicts.
    assert verdicts[0]["probabilities"] != verdicts[1]["probabilities"]


# One similarity item for the whole-item and match read tests.
QUESTION = "Capital and river?"
OUTPUT = "Paris is the capital of France. The Seine flows through it."
REFERENCE = "The capital of France is Paris."


def run_evidence(result: Any, reference: str) -> list[list[dict[str, float]]]:
    """The evidence of every (reference unit, answer unit) pair of a similarity run."""
    units = result.preprocess_step_result
    return similarity_evidence(
        shared_embedder("all-minilm-l6-v2"),
        [aliases_of(unit) or [unit] for unit in units["ground_truth_units"]],
        units["output_units"],
        reference,
        OUTPUT,
    )


def similarity_run(
    judge: TransformersJudge, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, verdicts: dict
) -> tuple[TransformersJudge, Any]:
    """The item scored by a card with these verdict models; the judge (its call log) too."""
    judge = on_card(judge, write_card(tmp_path, monkeypatch, verdicts))
    scorer = create_answer_similarity_scorer(judge=judge, scale=1)
    return judge, scorer.run(input=QUESTION, output=OUTPUT, ground_truth=REFERENCE)


def test_similarity_reads_pairs_and_then_the_whole_reference_against_the_whole_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, judge: TransformersJudge
) -> None:
    judge, result = similarity_run(judge, tmp_path, monkeypatch, WHOLE_ONLY)
    units = result.preprocess_step_result
    count = len(units["ground_truth_units"]) * len(units["output_units"])
    labels_calls = [call for call in judge.call_log if call.kind == "labels"]
    assert [len(call.items) for call in labels_calls] == [count + 1]
    assert whole_reference(REFERENCE) == REFERENCE
    # A list of references is shown in the alias notation.
    assert whole_reference(["Paris ", "", "City of Light"]) == "Paris / City of Light"
    for match in result.analyze_step_result["matches"]:
        assert sum(match["probabilities"].values()) == pytest.approx(1.0, abs=1e-3)


# The match read: the whole reference against the whole answer as one yes/no question.
WITH_MATCH = {
    **VERDICTS,
    "similarity": logistic(
        ["missing", "partial", "semantic", "exact"],
        ["cos", "whole_exact", "match_yes", "match_no"],
        [[0.0, 0.0, 0.0, 0.0], [1.0, 0.2, 0.3, -0.3], [2.0, 0.6, 0.9, -0.9], [3.0, 1.0, 1.5, -1]],
    ),
}


def test_similarity_asks_its_yes_or_no_question_after_the_whole_item_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, judge: TransformersJudge
) -> None:
    judge, result = similarity_run(judge, tmp_path, monkeypatch, WITH_MATCH)
    labels_calls = [call for call in judge.call_log if call.kind == "labels"]
    # No pair reads (the model uses none): the whole-item read, then the match read, in the
    # same call, each with its own labels.
    assert [len(call.items) for call in labels_calls] == [2]
    shown = whole_reference(REFERENCE)
    whole_prompt = render_prompt(
        "answer-similarity", "en", "verdict", {"ground_truth_unit": shown, "output": OUTPUT}
    )
    match_prompt = render_prompt(
        "answer-similarity",
        "en",
        "match",
        {"question": QUESTION, "reference": shown, "output": OUTPUT},
    )
    assert QUESTION in match_prompt[1]["content"]  # the question is shown when there is one
    assert match_prompt[-1] == {"role": "assistant", "content": '{"verdict":"'}
    whole_read, match_read = (
        answer.value
        for answer in judge.score_labels(
            [whole_prompt, match_prompt], [SIMILARITY_LABELS, MATCH_LABELS]
        )
    )
    assert match_read.labels == ("yes", "no")
    assert sum(match_read.probabilities.values()) == pytest.approx(1.0, abs=1e-3)
    features = {
        **whole_features(whole_read.labels, whole_read.logprobs),
        **whole_features(match_read.labels, match_read.logprobs, "match_"),
    }
    assert set(features) >= {"match_yes", "match_no", "whole_exact"}
    evidence = run_evidence(result, REFERENCE)
    model = _verdicts.LogisticModel.model_validate(WITH_MATCH["similarity"])
    for match, row in zip(result.analyze_step_result["matches"], evidence, strict=True):
        table = [model.probabilities({**cell, **features}) for cell in row]
        assert match["probabilities"] in [{k: p[k] for k in SIMILARITY_LABELS} for p in table]


# The Qwen cards' gate: the match read up to a reference of a few words, the evidence alone
# (no read at all) past it.
EVIDENCE_ONLY = logistic(
    ["missing", "partial", "semantic", "exact"],
    ["cos"],
    [[0.0], [1.0], [2.0], [3.0]],
)
GATED_ON_REFERENCE = {
    **VERDICTS,
    "similarity": {
        "kind": "gated",
        "when": [{"feature": "reference_words", "at_most": 6.0}],
        "model": WITH_MATCH["similarity"],
        "otherwise": EVIDENCE_ONLY,
    },
}


@pytest.mark.parametrize(
    ("reference", "reads"),
    [
        (REFERENCE, True),  # 6 words: the match read (and the whole-item read its model uses)
        (REFERENCE + " It lies on the Seine.", False),  # 11 words: the evidence alone
    ],
)
def test_a_gate_on_the_references_length_reads_the_judge_only_below_it(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    judge: TransformersJudge,
    reference: str,
    reads: bool,
) -> None:
    judge = on_card(judge, write_card(tmp_path, monkeypatch, GATED_ON_REFERENCE))
    scorer = create_answer_similarity_scorer(judge=judge, scale=1)
    result = scorer.run(input=QUESTION, output=OUTPUT, ground_truth=reference)
    assert result.status == "scored"
    labels_calls = [call for call in judge.call_log if call.kind == "labels"]
    assert [len(call.items) for call in labels_calls] == ([2] if reads else [])
    evidence = run_evidence(result, reference)
    if not reads:
        # past the gate every verdict is the evidence-only model's
        model = _verdicts.LogisticModel.model_validate(EVIDENCE_ONLY)
        for match, row in zip(result.analyze_step_result["matches"], evidence, strict=True):
            table = [model.probabilities(cell) for cell in row]
            assert match["probabilities"] in [{k: p[k] for k in SIMILARITY_LABELS} for p in table]
    gated = _verdicts.GatedModel.model_validate(GATED_ON_REFERENCE["similarity"])
    assert for_item(gated, item_features(reference, OUTPUT)) is (
        gated.model if reads else gated.otherwise
    )
    # a model that is not gated, or gated on a unit's features, judges every item itself
    assert for_item(gated.model, {"reference_words": 99.0}) is gated.model
    by_unit = gated.model_copy(update={"when": [_verdicts.GateCondition(feature="min_tokens")]})
    assert for_item(by_unit, item_features(reference, OUTPUT)) is by_unit
