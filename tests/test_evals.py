"""run_evals with function scorers (no model): targets, errors, thresholds, verdicts."""

from __future__ import annotations

import pytest

from offline_scorer import (
    ConfigurationError,
    ScorerRunError,
    create_scorer,
    run_evals,
)


def length_scorer(scale: float = 1):  # type: ignore[no-untyped-def]
    scorer = create_scorer(
        id="length", generate_score=lambda ctx: min(1.0, len(ctx.output_text) / 10)
    )
    return scorer


DATA = [{"input": "q1", "output": "12345"}, {"input": "q2", "output": "1234567890"}]


def test_means_counts_and_callback() -> None:
    seen = []
    result = run_evals(
        DATA,
        [length_scorer()],
        on_item_complete=lambda item, out, res: seen.append(out),
        progress=False,
    )
    assert result.scores == {"length": 0.75}
    assert result.summary.total_items == 2 and result.summary.scorers["length"].scored == 2
    assert seen == ["12345", "1234567890"]
    assert result.summary.verdict is None


def test_target_produces_outputs_and_a_raising_target_fails_only_its_item() -> None:
    def target(question: str) -> str:
        if question == "boom":
            raise RuntimeError("target broke")
        return question * 5

    data = [{"input": "ab"}, {"input": "boom"}, {"input": "c"}]
    result = run_evals(data, [length_scorer()], target=target, progress=False)
    statuses = [item.results["length"].status for item in result.items]
    assert statuses == ["scored", "failed", "scored"]
    assert "target broke" in result.items[1].target_error
    assert result.summary.scorers["length"].failed == 1
    assert result.scores["length"] == pytest.approx((1.0 + 0.5) / 2)
    with pytest.raises(ScorerRunError, match="target broke"):
        run_evals(data, [length_scorer()], target=target, fail_fast=True, progress=False)


def test_thresholds_give_a_verdict() -> None:
    passed = run_evals(DATA, [length_scorer()], thresholds={"length": 0.7}, progress=False)
    assert passed.summary.verdict == "passed" and passed.passed
    failed = run_evals(DATA, [length_scorer()], thresholds={"length": (0.8, None)}, progress=False)
    assert failed.summary.verdict == "failed" and not failed.passed


@pytest.mark.parametrize(
    ("thresholds", "message"),
    [
        ({"length": 1.5}, "outside 0..1"),
        ({"other": 0.5}, "not among"),
        ({"length": (0.9, 0.1)}, "above"),
    ],
)
def test_bad_thresholds(thresholds: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        run_evals(DATA, [length_scorer()], thresholds=thresholds, progress=False)  # type: ignore[arg-type]


def test_no_scorers_and_no_target() -> None:
    with pytest.raises(ConfigurationError, match="at least one scorer"):
        run_evals(DATA, [], progress=False)
    with pytest.raises(ConfigurationError, match="need a target"):
        run_evals([{"input": "q"}], [length_scorer()], progress=False)


def test_failed_scorer_run_is_recorded_not_defaulted() -> None:
    def score(ctx):  # type: ignore[no-untyped-def]
        raise ValueError("cannot score")

    result = run_evals(DATA, [create_scorer(id="bad", generate_score=score)], progress=False)
    assert result.scores == {"bad": None}
    assert result.summary.scorers["bad"].failed == 2
    assert all(item.results["bad"].score is None for item in result.items)
