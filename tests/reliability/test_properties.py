"""Property-based tests (hypothesis) of every pure part: no model needed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from offline_scorer import DataError, relevancy_score, round_half_up, similarity_score
from offline_scorer._text import extract_text, ground_truth_text
from offline_scorer.evals._data import load_dataset

VERDICTS = st.sampled_from(["yes", "unsure", "no", "YES ", " maybe", ""])
MATCHES = st.sampled_from(["exact", "semantic", "partial", "missing"])
WEIGHT = st.floats(0, 1, allow_nan=False)
NONNEG = st.floats(0, 5, allow_nan=False)
SCALE = st.floats(0.01, 100, allow_nan=False)

JSON_LEAF = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
JSONISH = st.recursive(
    JSON_LEAF,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
MESSAGE = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "system", "tool"]), "content": JSONISH}
)
SHAPES = JSONISH | st.lists(MESSAGE, max_size=5) | st.binary(max_size=10)


@given(SHAPES, st.sampled_from(["input", "output"]))
def test_text_extraction_returns_text_or_raises_only_type_error(value: Any, side: str) -> None:
    try:
        text = extract_text(value, side=side)  # type: ignore[arg-type]
    except TypeError:
        return
    assert isinstance(text, str)


@given(JSONISH)
def test_ground_truth_is_missing_or_text(value: Any) -> None:
    try:
        text = ground_truth_text(value)
    except TypeError:
        return
    assert text is None or (isinstance(text, str) and text.strip())


@given(st.lists(VERDICTS, max_size=30), WEIGHT, SCALE)
def test_relevancy_score_stays_within_scale(
    verdicts: list[str], weight: float, scale: float
) -> None:
    score = relevancy_score(verdicts, uncertainty_weight=weight, scale=scale)
    assert 0 <= score <= round_half_up(scale)


@given(st.lists(VERDICTS, max_size=30), WEIGHT, SCALE)
def test_adding_a_yes_never_lowers_relevancy(
    verdicts: list[str], weight: float, scale: float
) -> None:
    before = relevancy_score(verdicts, uncertainty_weight=weight, scale=scale)
    after = relevancy_score([*verdicts, "yes"], uncertainty_weight=weight, scale=scale)
    assert after >= before


@given(
    st.lists(MATCHES, max_size=20),
    st.integers(0, 5),
    st.integers(0, 10),
    NONNEG,
    NONNEG,
    NONNEG,
    NONNEG,
    NONNEG,
    SCALE,
)
def test_similarity_score_range_and_contradiction_monotony(
    matches: list[str],
    contradictions: int,
    extra: int,
    threshold: float,
    bonus: float,
    missing: float,
    contradiction: float,
    extra_penalty: float,
    scale: float,
) -> None:
    options = {
        "semantic_threshold": threshold,
        "exact_match_bonus": bonus,
        "missing_penalty": missing,
        "contradiction_penalty": contradiction,
        "extra_info_penalty": extra_penalty,
        "scale": scale,
    }
    score = similarity_score(matches, contradictions=contradictions, extra_units=extra, **options)
    assert 0 <= score <= round_half_up(scale)
    more = similarity_score(
        matches, contradictions=contradictions + 1, extra_units=extra, **options
    )
    assert more <= score


@given(st.integers(0, 2_000).map(lambda k: k / 1000))
def test_round_half_up_equals_decimal_half_up_on_three_decimals(value: float) -> None:
    from decimal import ROUND_HALF_UP, Decimal

    # The epsilon makes binary values stored just below a half (0.625, 1.005) round up
    # the way a person reading the decimal text expects. It is one machine epsilon, as in
    # the reference, so it only reaches that far for values of about 0..2 (135.545 still
    # rounds to 135.54, as it does in the reference).
    expected = float(Decimal(repr(value)).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))
    assert round_half_up(value) == expected


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=150)
@given(st.binary(max_size=400), st.sampled_from([".jsonl", ".json", ".csv"]))
def test_data_files_of_arbitrary_bytes_give_rows_or_a_clear_error(
    tmp_path: Path, content: bytes, suffix: str
) -> None:
    path = tmp_path / f"data{suffix}"
    path.write_bytes(content)
    try:
        dataset = load_dataset(path, skip_invalid=True)
    except DataError as error:
        assert str(error)
        return
    assert len(dataset.items) >= 1
