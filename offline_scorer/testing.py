"""Helpers for users' own test suites (pytest or unittest).

Example:
    >>> from offline_scorer.testing import assert_score
    >>> assert_score(scorer, input="Capital of France?", output="Paris.", minimum=0.7)  # doctest: +SKIP
"""

from __future__ import annotations

import json
from typing import Any

from offline_scorer.pipeline._results import ScoreResult
from offline_scorer.pipeline._scorer import Scorer


def assert_score(
    scorer: Scorer,
    *,
    input: Any = None,
    output: Any = None,
    ground_truth: Any = None,
    minimum: float | None = None,
    maximum: float | None = None,
) -> ScoreResult:
    """Score one run and fail with a readable message when the score is out of bounds.

    Args:
        scorer: the scorer to run.
        input: the question.
        output: the answer under test.
        ground_truth: the reference answer, for similarity scorers.
        minimum: the lowest acceptable score.
        maximum: the highest acceptable score.

    Returns:
        The result, for further checks.

    Raises:
        AssertionError: the run failed, was not scorable, or the score is out of bounds;
            the message shows the score, the reason and the step results.
    """
    result = scorer.run_batch([{"input": input, "output": output, "ground_truth": ground_truth}])[0]
    problem = None
    if result.status != "scored" or result.score is None:
        problem = f"no score ({result.status}): {result.error or result.not_scorable_reason}"
    elif minimum is not None and result.score < minimum:
        problem = f"score {result.score} is below the minimum {minimum}"
    elif maximum is not None and result.score > maximum:
        problem = f"score {result.score} is above the maximum {maximum}"
    if problem is not None:
        raise AssertionError(_describe(scorer, result, problem))
    return result


def _describe(scorer: Scorer, result: ScoreResult, problem: str) -> str:
    lines = [
        f"{scorer.id}: {problem}",
        f"  reason: {result.reason}",
        f"  output: {result.output!r}",
    ]
    for name in ("preprocess_step_result", "analyze_step_result"):
        value = getattr(result, name)
        if value is not None:
            lines.append(f"  {name}: {json.dumps(value, ensure_ascii=False)[:1500]}")
    return "\n".join(lines)
