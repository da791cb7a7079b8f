"""The pure parts of benchmarks/agreement.py against hand-computed values (no model)."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "agreement.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("agreement_benchmark", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # dataclasses look their module up in sys.modules while the class body is built.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


agreement = _load()


def test_average_ranks_share_the_mean_rank_of_ties() -> None:
    assert agreement.average_ranks([10, 20, 20, 5]) == [2.0, 3.5, 3.5, 1.0]
    assert agreement.average_ranks([1, 1, 1]) == [2.0, 2.0, 2.0]


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
