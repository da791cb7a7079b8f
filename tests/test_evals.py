"""run_evals with function scorers (no model): targets, errors, thresholds, verdicts.

Also the pieces a local run shares with a Ray run (``evals/_core.py``): the threshold
parser, the row checks, cache counts, and the progress bar.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest
from cases import RELEVANCY_CASES

from offline_scorer import (
    CachedJudge,
    ConfigurationError,
    DataError,
    DataItem,
    Dataset,
    ReplayJudge,
    ScorerRunError,
    Threshold,
    create_scorer,
    get_scorer,
    run_evals,
)
from offline_scorer.evals._core import dataset_facts, parse_thresholds

RECORDING = Path(__file__).resolve().parent / "recordings" / "scorers.json"


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
    with pytest.raises(
        ConfigurationError, match=r"Rows without an output \(lines \[1\]\).*target="
    ):
        run_evals([{"input": "q"}], [length_scorer()], progress=False)


def test_failed_scorer_run_is_recorded_not_defaulted() -> None:
    def score(ctx):  # type: ignore[no-untyped-def]
        raise ValueError("cannot score")

    result = run_evals(DATA, [create_scorer(id="bad", generate_score=score)], progress=False)
    assert result.scores == {"bad": None}
    assert result.summary.scorers["bad"].failed == 2
    assert all(item.results["bad"].score is None for item in result.items)


def test_threshold_texts_and_specs_parse_to_the_same_bounds() -> None:
    scorers = [length_scorer()]
    texts = parse_thresholds(["length=0.2..0.9", "length=0.5"], scorers)
    assert texts == {"length": Threshold(minimum=0.5)}  # a later text wins
    assert parse_thresholds(["length=..0.9"], scorers) == parse_thresholds(
        {"length": {"maximum": 0.9}}, scorers
    )
    assert parse_thresholds("length=0.2..0.9", scorers) == parse_thresholds(
        {"length": (0.2, 0.9)}, scorers
    )


@pytest.mark.parametrize(
    ("texts", "message"),
    [
        (["length"], "SCORER=MIN or SCORER=MIN..MAX"),
        (["=0.5"], "SCORER=MIN"),
        (["length=high"], "bounds must be numbers"),
        (["length=0.9..0.1"], "minimum is above maximum"),
        (["length=nan"], "outside 0..1"),
        (["other=0.5"], "not among"),
    ],
)
def test_bad_threshold_texts(texts: list[str], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        parse_thresholds(texts, [length_scorer()])


def test_a_built_in_scorer_takes_its_short_or_full_id_as_threshold_key() -> None:
    scorer = get_scorer("answer-relevancy", judge=ReplayJudge(RECORDING))
    for key in ("answer-relevancy", "answer-relevancy-scorer"):
        assert parse_thresholds({key: 0.5}, [scorer]) == {
            "answer-relevancy-scorer": Threshold(minimum=0.5)
        }


def test_a_scorer_that_needs_a_ground_truth_refuses_data_without_one() -> None:
    needs_truth = create_scorer(
        id="overlap", generate_score=lambda ctx: 1.0, needs_ground_truth=True
    )
    with pytest.raises(DataError, match="overlap needs a ground truth.*'ground_truth'"):
        run_evals(DATA, [needs_truth], progress=False)
    with_truth = [{**DATA[0], "ground_truth": "12345"}, DATA[1]]
    assert run_evals(with_truth, [needs_truth], progress=False).scores == {"overlap": 1.0}


def test_a_dataset_built_by_hand_is_checked_from_its_items() -> None:
    items = [DataItem(index=0, item_id="a", line=1, input="q", ground_truth="g")]
    facts = dataset_facts(Dataset(items))
    assert (list(facts.without_output), facts.with_ground_truth) == ([1], 1)
    with pytest.raises(ConfigurationError, match="Rows without an output"):
        run_evals(Dataset(items), [length_scorer()], progress=False)
    assert run_evals(Dataset(items), [length_scorer()], target=str.upper, progress=False).scores


def test_cache_hits_and_misses_are_counted_per_run(tmp_path: Path) -> None:
    """One CachedJudge in two runs: the second run's counts are its own, not the sum."""
    judge = CachedJudge(ReplayJudge(RECORDING), tmp_path / "cache.sqlite")
    scorer = get_scorer("answer-relevancy", judge=judge)
    data = [RELEVANCY_CASES[name] for name in ("relevant", "partly_relevant", "off_topic")]
    first = run_evals(data, [scorer], progress=False)
    second = run_evals(data, [scorer], progress=False)
    asked = first.summary.cache_misses
    assert asked and first.summary.cache_hits == 0
    assert (second.summary.cache_hits, second.summary.cache_misses) == (asked, 0)
    assert second.scores == first.scores


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_shows_on_a_terminal_only(monkeypatch: pytest.MonkeyPatch) -> None:
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    run_evals(DATA, [length_scorer()], batch_size=1)
    assert "2/2" in terminal.getvalue()
    quiet = _Terminal()
    monkeypatch.setattr(sys, "stderr", quiet)
    run_evals(DATA, [length_scorer()], progress=False)
    assert quiet.getvalue() == ""
    pipe = io.StringIO()  # a log file or a pipe: not a terminal
    monkeypatch.setattr(sys, "stderr", pipe)
    run_evals(DATA, [length_scorer()])
    assert pipe.getvalue() == ""
