"""The answer similarity formula (the reference's, exactly) and its expected-value form."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from offline_scorer.scorers._common import round_half_up


def match_points(
    *,
    semantic_threshold: float = 0.8,
    exact_match_bonus: float = 0.2,
    missing_penalty: float = 0.15,
) -> dict[str, float]:
    """What one ground-truth unit's match adds to the formula's sum, per match type."""
    return {
        "exact": 1 + exact_match_bonus,
        "semantic": semantic_threshold,
        "partial": semantic_threshold * 0.5,
        "missing": -missing_penalty,
    }


def similarity_score(
    match_types: Sequence[str | Mapping[str, Any]],
    *,
    contradictions: int | Sequence[Any] = 0,
    extra_units: int | Sequence[Any] = 0,
    semantic_threshold: float = 0.8,
    exact_match_bonus: float = 0.2,
    missing_penalty: float = 0.15,
    contradiction_penalty: float = 1.0,
    extra_info_penalty: float = 0.05,
    scale: float = 1,
) -> float:
    """The answer similarity score, exactly as the reference computes it.

    ::

        points = sum(1 + bonus if exact, threshold if semantic, threshold / 2 if partial,
                     -missing_penalty if missing)
        s = points / (N * (1 + bonus)) - contradictions * contradiction_penalty
            - min(extra_units * extra_info_penalty, 0.2)
        score = round_half_up(clamp(s, 0, 1) * scale)

    Args:
        match_types: one match type (or match dict with ``match_type``) per ground-truth unit.
        contradictions: the number of contradictions, or the list of them.
        extra_units: the number of extra answer units, or the list of them.

    Returns:
        The score; 0 when there are no matches.

    Example:
        >>> similarity_score(["exact", "exact", "missing"])
        0.63
    """
    points_of = match_points(
        semantic_threshold=semantic_threshold,
        exact_match_bonus=exact_match_bonus,
        missing_penalty=missing_penalty,
    )
    kinds = [
        str(m.get("match_type") if isinstance(m, Mapping) else m).strip().lower()
        for m in match_types
    ]
    points = sum(points_of.get(kind, 0.0) for kind in kinds)
    return _combine(
        points,
        len(kinds),
        contradictions,
        extra_units,
        exact_match_bonus,
        contradiction_penalty,
        extra_info_penalty,
        scale,
    )


def expected_similarity_score(
    probabilities: Sequence[Mapping[str, float]],
    *,
    contradictions: int | Sequence[Any] = 0,
    extra_units: int | Sequence[Any] = 0,
    semantic_threshold: float = 0.8,
    exact_match_bonus: float = 0.2,
    missing_penalty: float = 0.15,
    contradiction_penalty: float = 1.0,
    extra_info_penalty: float = 0.05,
    scale: float = 1,
) -> float:
    """The similarity formula with each match's points replaced by their expected value.

    ``probabilities`` holds one ``{match type: probability}`` mapping per reference unit;
    with one-hot probabilities this is exactly :func:`similarity_score`.

    Example:
        >>> expected_similarity_score([{"exact": 0.5, "missing": 0.5}])
        0.44
    """
    points_of = match_points(
        semantic_threshold=semantic_threshold,
        exact_match_bonus=exact_match_bonus,
        missing_penalty=missing_penalty,
    )
    points = sum(
        sum(points_of.get(kind, 0.0) * p for kind, p in match.items()) for match in probabilities
    )
    return _combine(
        points,
        len(probabilities),
        contradictions,
        extra_units,
        exact_match_bonus,
        contradiction_penalty,
        extra_info_penalty,
        scale,
    )


def _combine(
    points: float,
    count: int,
    contradictions: int | Sequence[Any],
    extra_units: int | Sequence[Any],
    exact_match_bonus: float,
    contradiction_penalty: float,
    extra_info_penalty: float,
    scale: float,
) -> float:
    """The formula's second line: normalise, subtract the penalties, clamp, round."""
    if count == 0:
        return 0.0
    n_contradictions = contradictions if isinstance(contradictions, int) else len(contradictions)
    n_extra = extra_units if isinstance(extra_units, int) else len(extra_units)
    value = points / (count * (1 + exact_match_bonus))
    value -= n_contradictions * contradiction_penalty
    value -= min(n_extra * extra_info_penalty, 0.2)
    value = min(max(value, 0.0), 1.0)
    return round_half_up(value * scale)
