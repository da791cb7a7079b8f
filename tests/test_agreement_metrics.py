"""The pure parts of benchmarks/agreement.py against hand-computed values (no model).

The statistics come from scipy and scikit-learn; these tests pin what the tables rely on:
ties (average ranks, tau-b, half a win), "n/a" (None) where a figure is undefined, and
agreement with pair-counting definitions written here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks import agreement


def pair_signs(values: Sequence[float]) -> list[int]:
    """For every pair i < j, the sign of values[i] - values[j]."""
    n = len(values)
    return [
        (values[i] > values[j]) - (values[i] < values[j]) for i in range(n) for j in range(i + 1, n)
    ]


def counted_tau_b(xs: Sequence[float], ys: Sequence[float]) -> float:
    """(concordant - discordant) / sqrt(pairs untied in x * pairs untied in y)."""
    sx, sy = pair_signs(xs), pair_signs(ys)
    untied = sum(s != 0 for s in sx) * sum(s != 0 for s in sy)
    return sum(a * b for a, b in zip(sx, sy)) / math.sqrt(untied)


def counted_spearman(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Pearson of average ranks, each rank counted as values below + (equal values + 1) / 2."""

    def ranks(values: Sequence[float]) -> list[float]:
        return [sum(w < v for w in values) + (sum(w == v for w in values) + 1) / 2 for v in values]

    rx, ry = ranks(xs), ranks(ys)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    return cov / math.sqrt(sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry))


def counted_auc(labels: Sequence[float], scores: Sequence[float]) -> float:
    """Share of (positive, negative) pairs where the positive scores higher, ties half."""
    top = max(labels)
    pos = [s for s, label in zip(scores, labels) if label == top]
    neg = [s for s, label in zip(scores, labels) if label != top]
    wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


tied_values = st.lists(st.integers(0, 4), min_size=2, max_size=25)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_correlations_match_pair_counting_on_tied_data(data: st.DataObject) -> None:
    xs = data.draw(tied_values)
    ys = data.draw(st.lists(st.integers(0, 4), min_size=len(xs), max_size=len(xs)))
    if len(set(xs)) < 2 or len(set(ys)) < 2:
        assert agreement.spearman(xs, ys) is None and agreement.kendall_tau_b(xs, ys) is None
        return
    assert agreement.spearman(xs, ys) == pytest.approx(counted_spearman(xs, ys), abs=1e-12)
    assert agreement.kendall_tau_b(xs, ys) == pytest.approx(counted_tau_b(xs, ys), abs=1e-12)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_roc_auc_matches_pair_counting_on_tied_scores(data: st.DataObject) -> None:
    scores = data.draw(st.lists(st.integers(0, 3), min_size=2, max_size=25))
    labels = data.draw(
        st.lists(st.sampled_from([1.0, 2.0]), min_size=len(scores), max_size=len(scores))
    )
    if len(set(labels)) < 2:
        assert agreement.roc_auc(labels, scores) is None
        return
    assert agreement.roc_auc(labels, scores) == pytest.approx(
        counted_auc(labels, scores), abs=1e-12
    )


def test_correlations_need_sides_of_the_same_length() -> None:
    with pytest.raises(ValueError, match="same length"):
        agreement.spearman([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="same length"):
        agreement.kendall_tau_b([1, 2], [1, 2, 3])


def test_spearman_with_ties() -> None:
    # ranks x = 1, 2.5, 2.5, 4 and y = 1, 3, 2, 4: covariance 4.5, variances 4.5 and 5.
    assert agreement.spearman([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(3 / math.sqrt(10))


def test_spearman_perfect_reversed_and_undefined() -> None:
    assert agreement.spearman([1, 2, 3], [5, 7, 9]) == pytest.approx(1.0)
    assert agreement.spearman([1, 2, 3], [9, 7, 5]) == pytest.approx(-1.0)
    assert agreement.spearman([1, 2, 3], [4, 4, 4]) is None
    assert agreement.spearman([1], [1]) is None


def test_kendall_tau_b_with_ties() -> None:
    # Pairs: 5 concordant, 0 discordant, one tied in x only: 5 / sqrt(5 * 6).
    assert agreement.kendall_tau_b([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(5 / math.sqrt(30))
    # x = 1,1,2 and y = 1,2,2: pair (0,2) concordant, the others tied on one side each.
    assert agreement.kendall_tau_b([1, 1, 2], [1, 2, 2]) == pytest.approx(1 / 2)
    assert agreement.kendall_tau_b([1, 2, 3], [3, 1, 2]) == pytest.approx(-1 / 3)
    assert agreement.kendall_tau_b([1, 2, 3], [0, 0, 0]) is None


def test_roc_auc_counts_ties_as_half() -> None:
    # Positives 0.5, 0.9 against negatives 0.1, 0.5: 1 + 0.5 + 1 + 1 of 4 pairs.
    assert agreement.roc_auc([0, 0, 1, 1], [0.1, 0.5, 0.5, 0.9]) == pytest.approx(0.875)
    assert agreement.roc_auc([0, 1], [0.3, 0.3]) == pytest.approx(0.5)
    assert agreement.roc_auc([1, 0, 1], [0.0, 1.0, 0.2]) == pytest.approx(0.0)


def test_roc_auc_needs_binary_labels() -> None:
    assert agreement.roc_auc([1, 2, 3], [0.1, 0.2, 0.3]) is None
    assert agreement.roc_auc([1, 1], [0.1, 0.2]) is None
    assert agreement.is_binary([0.0, 1.0, 1.0]) and not agreement.is_binary([1, 2, 3])


def test_token_f1_and_exact_match() -> None:
    # "the" and "a" are dropped: [cat, sat] against [cat, sat, down].
    assert agreement.token_f1("The cat sat", "a cat sat down") == pytest.approx(0.8)
    assert agreement.token_f1("dog", "cat") == 0.0
    assert agreement.token_f1("", "") == 1.0
    assert agreement.exact_match("The Cat.", "cat") == 1.0
    assert agreement.exact_match("cats", "cat") == 0.0


def test_question_overlap_ignores_stop_words() -> None:
    # Content words of the question: capital, france; only "france" is in the answer.
    assert agreement.question_overlap("What is the capital of France?", "France: Paris.") == 0.5
    assert agreement.question_overlap("Who is it?", "Anything") == 0.0


def test_sample_rows_is_stratified_reproducible_and_nested() -> None:
    rows = [{"id": f"r{i}", "human_label": "a" if i < 30 else "b"} for i in range(40)]
    small = agreement.sample_rows(rows, 6, seed=1)
    large = agreement.sample_rows(rows, 30, seed=1)
    assert [r["human_label"] for r in small] == ["a", "b"] * 3
    assert large[:6] == small
    assert agreement.sample_rows(rows, 30, seed=1) == large
    # Label b runs out after 10 rows; label a takes the remaining turns.
    assert sum(r["human_label"] == "b" for r in large) == 10
    assert len(agreement.sample_rows(rows, 100, seed=1)) == 40


def test_a_scorer_below_a_baseline_is_marked_as_losing() -> None:
    def method(name: str, rho: float | None) -> object:
        return agreement.Agreement(name, rho, None, None)

    assert agreement.losing_to([method("scorer", 0.2), method("f1", 0.5), method("em", 0.1)]) == [
        "f1"
    ]
    # A constant scorer has no correlation: it counts as 0, so a negative baseline does not win.
    assert agreement.losing_to([method("scorer", None), method("overlap", -0.5)]) == []
    assert agreement.losing_to([method("scorer", None), method("overlap", 0.3)]) == ["overlap"]
