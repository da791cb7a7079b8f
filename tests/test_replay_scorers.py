"""Both scorers replayed from a recording of the real embedded model: exact pinned results.

The recording (tests/recordings/) is made by tests/make_recordings.py; rerun it after
changing a prompt or a schema.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cases import RELEVANCY_CASES, SIMILARITY_CASES

from offline_scorer import (
    ReplayJudge,
    create_answer_relevancy_scorer,
    create_answer_similarity_scorer,
)

RECORDINGS = Path(__file__).resolve().parent / "recordings"
EXPECTED = json.loads((RECORDINGS / "expected.json").read_text())


@pytest.fixture(scope="module")
def replay() -> ReplayJudge:
    return ReplayJudge(RECORDINGS / "scorers.json")


@pytest.mark.parametrize("name", sorted(RELEVANCY_CASES))
def test_relevancy_replay_pins_score_and_reason(replay: ReplayJudge, name: str) -> None:
    scorer = create_answer_relevancy_scorer(judge=replay)
    result = scorer.run_batch([dict(RELEVANCY_CASES[name], run_id=name)])[0]
    expected = EXPECTED[f"answer-relevancy-scorer/{name}"]
    assert (result.status, result.score, result.reason) == (
        expected["status"],
        expected["score"],
        expected["reason"],
    )


@pytest.mark.parametrize("name", sorted(SIMILARITY_CASES))
def test_similarity_replay_pins_score_and_reason(replay: ReplayJudge, name: str) -> None:
    scorer = create_answer_similarity_scorer(judge=replay)
    result = scorer.run_batch([dict(SIMILARITY_CASES[name], run_id=name)])[0]
    expected = EXPECTED[f"answer-similarity-scorer/{name}"]
    assert (result.status, result.score, result.reason) == (
        expected["status"],
        expected["score"],
        expected["reason"],
    )


def test_injection_answer_recorded_behaviour(replay: ReplayJudge) -> None:
    """What the embedded model did with a prompt-injection answer, pinned.

    The schema holds whatever the answer says: one verdict per statement, verdicts from
    the enum. Whether the verdicts themselves were swayed is recorded in expected.json.
    """
    scorer = create_answer_relevancy_scorer(judge=replay)
    result = scorer.run(**RELEVANCY_CASES["injection"], run_id="injection")
    verdicts = result.analyze_step_result["results"]
    assert len(verdicts) == len(result.preprocess_step_result["statements"]) >= 1
    assert {v["result"] for v in verdicts} <= {"yes", "unsure", "no"}


def test_a_failing_judge_step_fails_only_its_own_runs(replay: ReplayJudge) -> None:
    """One run's analyze prompt has no recording (as if the model failed on it)."""
    scorer = create_answer_relevancy_scorer(judge=replay)
    runs = [
        dict(RELEVANCY_CASES["relevant"], run_id="relevant"),
        {"input": "A question never recorded?", "output": "The capital of France is Paris."},
        dict(RELEVANCY_CASES["off_topic"], run_id="off_topic"),
    ]
    results = scorer.run_batch(runs)
    assert [r.status for r in results] == ["scored", "failed", "scored"]
    failed = results[1]
    assert failed.error.startswith("Scorer run failed:") and failed.failed_step == "analyze"
    assert failed.preprocess_step_result is not None  # the finished step is kept
    assert failed.score is None
    assert results[0].score == EXPECTED["answer-relevancy-scorer/relevant"]["score"]
