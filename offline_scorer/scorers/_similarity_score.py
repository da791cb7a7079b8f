"""The answer similarity formula (the reference's, exactly) and its expected-value form."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from offline_scorer.scorers._common import round_half_up


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
    count = len(match_types)
    if count == 0:
        return 0.0
    points = 0.0
    for match in match_types:
        kind = str(match.get("match_type") if isinstance(match, Mapping) else match)
        kind = kind.strip().lower()
        if kind == "exact":
            points += 1 + exact_match_bonus
        elif kind == "semantic":
            points += semantic_threshold
        elif kind == "partial":
            points += semantic_threshold * 0.5
        elif kind == "missing":
            points -= missing_penalty
    n_contradictions = contradictions if isinstance(contradictions, int) else len(contradictions)
    n_extra = extra_units if isinstance(extra_units, int) else len(extra_units)
    value = points / (count * (1 + exact_match_bonus))
    value -= n_contradictions * contradiction_penalty
    value -= min(n_extra * extra_info_penalty, 0.2)
    value = min(max(value, 0.0), 1.0)
    return round_half_up(value * scale)


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
    count = len(probabilities)
    if count == 0:
        return 0.0
    points_of = {
        "exact": 1 + exact_match_bonus,
        "semantic": semantic_threshold,
        "partial": semantic_threshold * 0.5,
        "missing": -missing_penalty,
    }
    points = sum(
        sum(points_of.get(kind, 0.0) * p for kind, p in match.items()) for match in probabilities
    )
    n_contradictions = contradictions if isinstance(contradictions, int) else len(contradictions)
    n_extra = extra_units if isinstance(extra_units, int) else len(extra_units)
    value = points / (count * (1 + exact_match_bonus))
    value -= n_contradictions * contradiction_penalty
    value -= min(n_extra * extra_info_penalty, 0.2)
    value = min(max(value, 0.0), 1.0)
    return round_half_up(value * scale)
