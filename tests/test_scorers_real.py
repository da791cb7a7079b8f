"""Both scorers end to end with the REAL embedded model on our own cases, generated verdicts.

These run the reference's procedure (``verdicts="generate", extraction="model"``: the judge
writes statements, units and verdicts in constrained JSON). The embedded card's default,
read verdicts, is tested in test_verdicts.py. A 135M model is a weak judge: these tests
assert what the pipeline guarantees (every run completes, outputs validate, statements and
verdicts line up, scores stay in range, reasons and prompts are recorded), not the quality
of its judgments. Agreement with people is measured by benchmarks/, not asserted here.
"""

from __future__ import annotations

import pytest
from cases import RELEVANCY_CASES, SIMILARITY_CASES

from offline_scorer import (
    TransformersJudge,
    create_answer_relevancy_scorer,
    create_answer_similarity_scorer,
)

pytestmark = pytest.mark.slow
GENERATED = {"verdicts": "generate", "extraction": "model"}


@pytest.fixture(scope="module")
def relevancy_results(generated_relevancy):  # type: ignore[no-untyped-def]
    """Every relevancy case in one batch, generated verdicts (scored once: conftest)."""
    results, _ = generated_relevancy
    return results


@pytest.fixture(scope="module")
def similarity_results(judge: TransformersJudge):  # type: ignore[no-untyped-def]
    scorer = create_answer_similarity_scorer(judge=judge, **GENERATED)
    runs = [dict(case, run_id=name) for name, case in SIMILARITY_CASES.items()]
    return {result.run_id: result for result in scorer.run_batch(runs)}


def test_relevancy_every_run_completes(relevancy_results) -> None:  # type: ignore[no-untyped-def]
    for name, result in relevancy_results.items():
        assert result.status == "scored", (name, result.error)
        assert 0 <= result.score <= 1
        assert result.reason and result.reason.startswith("The score is")
        statements = result.preprocess_step_result["statements"]
        verdicts = result.analyze_step_result["results"]
        assert len(statements) == len(verdicts)
        assert all(v["result"] in ("yes", "unsure", "no") and v["reason"] for v in verdicts)
        assert result.model_fingerprint and result.model_id == "smollm2-135m-instruct"
        if statements:
            assert result.preprocess_prompt and result.analyze_prompt
            assert result.steps["analyze"].generated_tokens > 0
        assert result.generate_reason_prompt


def test_relevancy_empty_answer_scores_zero_without_extraction(relevancy_results) -> None:  # type: ignore[no-untyped-def]
    empty = relevancy_results["empty"]
    assert empty.score == 0 and empty.preprocess_step_result == {"statements": []}
    assert empty.preprocess_prompt is None  # no model call for an empty answer


def test_chat_message_shapes_are_scored(relevancy_results) -> None:  # type: ignore[no-untyped-def]
    result = relevancy_results["chat_messages"]
    # The last assistant text is what the judge was asked to split; the first user text is
    # the question it judged against.
    assert "William Shakespeare." in result.preprocess_prompt[1]["content"]
    assert "Who wrote Hamlet?" in result.analyze_prompt[1]["content"]


def test_injection_text_cannot_break_the_output_format(relevancy_results) -> None:  # type: ignore[no-untyped-def]
    result = relevancy_results["injection"]
    assert result.status == "scored"
    assert len(result.analyze_step_result["results"]) == len(
        result.preprocess_step_result["statements"]
    )


def test_similarity_every_run_completes(similarity_results) -> None:  # type: ignore[no-untyped-def]
    for name, result in similarity_results.items():
        assert result.status == "scored", (name, result.error)
        assert 0 <= result.score <= 1
        assert result.reason and result.reason.startswith("The score is")
        units = result.preprocess_step_result
        analysis = result.analyze_step_result
        assert len(analysis["matches"]) == len(units["ground_truth_units"]) >= 1
        for match, unit in zip(analysis["matches"], units["ground_truth_units"], strict=True):
            assert match["ground_truth_unit"] == unit
            assert match["output_unit"] is None or match["output_unit"] in units["output_units"]
        assert result.preprocess_prompt and result.analyze_prompt and result.generate_reason_prompt


def test_exact_match_scores_at_least_the_contradiction(similarity_results) -> None:  # type: ignore[no-untyped-def]
    assert similarity_results["exact_match"].score >= similarity_results["contradiction"].score


def test_run_batch_equals_single_runs_with_one_call_per_stage(
    judge: TransformersJudge,
    generated_relevancy,  # type: ignore[no-untyped-def]
) -> None:
    # The batch is the session's one run_batch of all six relevancy cases (conftest), made
    # by this same scorer configuration: the single run below is compared with its row
    # inside a batch of six, padded against longer rows, where batching could change it.
    batch, stage_calls = generated_relevancy
    assert [call.kind for call in stage_calls] == ["json", "json", "text"]
    # One call per stage for the whole batch: every row with an answer is split into
    # statements, every row with statements is judged, every row gets a reason.
    with_answer = [r for r in batch.values() if r.preprocess_prompt is not None]
    with_statements = [r for r in batch.values() if r.preprocess_step_result["statements"]]
    assert [len(call.items) for call in stage_calls] == [
        len(with_answer),
        len(with_statements),
        len(batch),
    ]
    assert len(batch) == 6 and len(with_answer) == len(with_statements) == 5
    # One row alone is enough here: the one with the shortest texts, the most padded in the
    # batch (the CLI resume test also compares three rows scored one at a time with it).
    one = create_answer_relevancy_scorer(judge=judge, **GENERATED).run(
        **RELEVANCY_CASES["chat_messages"]
    )
    many = batch["chat_messages"]
    assert one.score == many.score and one.reason == many.reason
    assert one.analyze_step_result == many.analyze_step_result


def test_french_prompts_and_reason(judge: TransformersJudge) -> None:
    scorer = create_answer_similarity_scorer(judge=judge, language="fr", **GENERATED)
    result = scorer.run(
        input="Quelle est la capitale de la France ?",
        output="Paris est la capitale de la France.",
        ground_truth="La capitale de la France est Paris.",
    )
    assert result.status == "scored"
    assert "Réponse de référence" in result.preprocess_prompt[1]["content"]
    assert result.reason.startswith("Le score est de")
