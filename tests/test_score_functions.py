"""Score maths without a model: the reference numbers of SPEC.md section 3 and more."""

from __future__ import annotations

import pytest

from offline_scorer import relevancy_score, round_half_up, similarity_score


@pytest.mark.parametrize(
    ("value", "expected"),
    [(0.625, 0.63), (0.575, 0.58), (1.005, 1.01), (0.124, 0.12), (0.0, 0.0), (1.0, 1.0)],
)
def test_round_half_up(value: float, expected: float) -> None:
    assert round_half_up(value) == expected


def test_python_round_differs_from_reference_rounding() -> None:
    # The reason round_half_up exists: banker's rounding gives another answer.
    assert round(0.625, 2) == 0.62
    assert round_half_up(0.625) == 0.63


@pytest.mark.parametrize(
    ("matches", "extra", "expected"),
    [
        (["exact"], 0, 1.0),
        (["exact", "semantic", "exact"], 1, 0.84),
        (["semantic", "exact", "missing", "missing", "missing"], 0, 0.26),
        (["exact", "exact", "missing"], 0, 0.63),
        (["semantic", "semantic", "partial", "missing"], 0, 0.39),
        (["exact", "missing", "semantic", "partial", "exact"], 0, 0.58),
        (["partial", "exact"], 0, 0.67),
    ],
)
def test_similarity_reference_numbers(matches: list[str], extra: int, expected: float) -> None:
    assert similarity_score(matches, extra_units=extra) == expected


@pytest.mark.parametrize(
    "matches", [["exact"], ["exact", "exact", "semantic"], ["partial"], ["missing"]]
)
def test_one_contradiction_gives_zero(matches: list[str]) -> None:
    assert similarity_score(matches, contradictions=1) == 0


def test_similarity_custom_options() -> None:
    score = similarity_score(
        ["exact"],
        semantic_threshold=0.7,
        exact_match_bonus=0.3,
        missing_penalty=0.2,
        contradiction_penalty=0.5,
        scale=10,
    )
    assert score == 10


def test_all_semantic_tops_out_at_067() -> None:
    assert similarity_score(["semantic"] * 5) == 0.67


def test_similarity_accepts_match_dicts_and_lists() -> None:
    matches = [{"match_type": "exact"}, {"match_type": " Missing "}]
    assert similarity_score(matches, contradictions=[], extra_units=["x"]) == similarity_score(
        ["exact", "missing"], extra_units=1
    )


def test_extra_penalty_is_capped_at_02() -> None:
    assert similarity_score(["exact"], extra_units=100) == 0.8


def test_no_matches_gives_zero() -> None:
    assert similarity_score([]) == 0


@pytest.mark.parametrize(
    ("verdicts", "expected"),
    [
        (["yes"], 1.0),
        (["no"], 0.0),
        (["unsure"], 0.3),
        (["yes", "unsure", "no"], 0.43),
        (["yes", "no"], 0.5),
        (["yes", "yes", "unsure"], 0.77),
        ([], 0.0),
    ],
)
def test_relevancy_formula(verdicts: list[str], expected: float) -> None:
    assert relevancy_score(verdicts) == expected


def test_relevancy_weight_scale_and_dicts() -> None:
    verdicts = [{"result": "yes"}, {"result": "unsure"}]
    assert relevancy_score(verdicts, uncertainty_weight=0.5, scale=10) == 7.5


def test_relevancy_verdicts_are_trimmed_and_lowercased() -> None:
    assert relevancy_score([" YES ", "Unsure"]) == relevancy_score(["yes", "unsure"])


def test_unknown_verdict_counts_in_n_but_adds_nothing() -> None:
    assert relevancy_score(["yes", "maybe"]) == 0.5
