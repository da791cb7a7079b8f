"""offline_scorer.testing.assert_score with function scorers and a scripted judge (no model)."""

from __future__ import annotations

import pytest

from offline_scorer import PromptStep, create_scorer
from offline_scorer.testing import FakeJudge, assert_score


def scorer():  # type: ignore[no-untyped-def]
    return create_scorer(
        id="length",
        preprocess=lambda ctx: {"words": ctx.output_text.split()},
        generate_score=lambda ctx: min(1.0, len(ctx.preprocess_result["words"]) / 4),
    )


def test_passes_and_returns_the_result() -> None:
    result = assert_score(scorer(), input="q", output="one two three four", minimum=0.9)
    assert result.score == 1.0


def test_failure_message_shows_score_and_step_results() -> None:
    with pytest.raises(AssertionError) as caught:
        assert_score(scorer(), input="q", output="one", minimum=0.5)
    message = str(caught.value)
    assert "score 0.25 is below the minimum 0.5" in message
    assert '"words": ["one"]' in message


def test_maximum_and_failed_runs() -> None:
    with pytest.raises(AssertionError, match="above the maximum"):
        assert_score(scorer(), output="a b c d", maximum=0.5)
    broken = create_scorer(id="broken", generate_score=lambda ctx: 1 / 0)
    with pytest.raises(AssertionError, match="no score"):
        assert_score(broken, output="x", minimum=0)


def test_failure_message_shows_step_results_that_are_not_json() -> None:
    """A label step's result (a LabelScores) is shown too, not a TypeError."""
    judge = FakeJudge(labels={"yes": -2.3, "no": -0.1})
    scorer = create_scorer(
        id="verdict",
        judge=judge,
        analyze=PromptStep(lambda ctx: [{"role": "user", "content": "?"}], labels=("yes", "no")),
        generate_score=lambda ctx: ctx.analyze_result.probabilities["yes"],
    )
    with pytest.raises(AssertionError, match=r"below the minimum 0.5(.|\n)*LabelScores\("):
        assert_score(scorer, output="x", minimum=0.5)
