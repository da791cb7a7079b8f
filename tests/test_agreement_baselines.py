"""benchmarks/agreement.py: the MiniLM baseline, the targets, the factory options (no LLM)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import agreement


def _methods(scorer: tuple, *baselines: tuple) -> list:
    """Agreement lines: (spearman, roc_auc) for the scorer, (name, spearman, roc_auc) after."""
    lines = [agreement.Agreement("scorer", scorer[0], None, scorer[1])]
    lines += [agreement.Agreement(name, rho, None, auc) for name, rho, auc in baselines]
    return lines


def test_every_baseline_but_minilm_is_lexical() -> None:
    assert set(agreement.LEXICAL) == {
        "token F1 vs reference",
        "exact match vs reference",
        "question word overlap",
    }
    for names in agreement.BASELINES.values():
        assert agreement.MINILM in names


def test_lexical_losses_count_spearman_and_roc_auc() -> None:
    methods = _methods(
        (0.5, 0.80),
        ("token F1 vs reference", 0.6, 0.70),
        ("exact match vs reference", 0.4, 0.85),
        ("question word overlap", 0.5, 0.80),  # a tie is no loss
        (agreement.MINILM, 0.9, 0.82),  # never a lexical loss
    )
    assert agreement.losing_to(methods) == ["token F1 vs reference", "exact match vs reference"]
    assert not agreement.below_minilm(methods)


def test_undefined_figures() -> None:
    # Constant scorer: its Spearman counts as 0; graded labels: no AUC comparison.
    methods = _methods(
        (None, None), ("token F1 vs reference", 0.1, None), (agreement.MINILM, 0.5, None)
    )
    assert agreement.losing_to(methods) == ["token F1 vs reference"]
    assert not agreement.below_minilm(methods)


def test_minilm_margin_is_on_roc_auc_only() -> None:
    # Exactly 0.03 below (float noise aside) is allowed, more is not; Spearman is not a loss.
    within = _methods((0.1, 0.79), (agreement.MINILM, 0.9, 0.82))
    beyond = _methods((0.9, 0.78), (agreement.MINILM, 0.1, 0.8125))
    assert not agreement.below_minilm(within) and agreement.losing_to(within) == []
    assert agreement.below_minilm(beyond)


def test_verdict_text() -> None:
    block = agreement.Block("d", agreement.SIMILARITY, 4, 4, 0, 0, 1.0, True)
    block.methods = _methods(
        (None, 0.5), ("token F1 vs reference", 0.2, 0.6), (agreement.MINILM, 0.3, 0.9)
    )
    block.loses_to = agreement.losing_to(block.methods)
    block.below_minilm = agreement.below_minilm(block.methods)
    assert agreement.verdict_of(block) == (
        "constant score: no signal; **loses to token F1 vs reference**; "
        "**more than 0.03 AUC below MiniLM cosine**"
    )
    block.methods = _methods(
        (0.5, 0.88), ("token F1 vs reference", 0.2, 0.6), (agreement.MINILM, 0.9, 0.9)
    )
    block.loses_to, block.below_minilm = [], False
    assert agreement.verdict_of(block) == "meets the targets"


def test_blank_texts_have_cosine_zero_without_loading_a_model() -> None:
    assert agreement.minilm_cosine(None, "an answer") == 0.0
    assert agreement.minilm_cosine("a question", "  ") == 0.0
    assert agreement.minilm_cosine("", "") == 0.0


def test_factory_options_are_passed_only_when_given() -> None:
    assert agreement.factory_options(agreement.parse_args([])) == {}
    args = agreement.parse_args(["--verdicts", "read", "--extraction", "split"])
    assert agreement.factory_options(args) == {"verdicts": "read", "extraction": "split"}
    assert (
        agreement.options_text({"verdicts": "read"}) == "verdicts=read (others: factory defaults)"
    )
    assert agreement.options_text({"verdicts": None}) == "factory defaults"
    with pytest.raises(SystemExit):
        agreement.parse_args(["--scoring", "soft"])


def _result(**changes: object) -> dict:
    result = {key: None for key in agreement.MERGE_KEYS}
    result["baselines"] = {k: list(v) for k, v in agreement.BASELINES.items()}
    result.update(changes)
    return result


def test_merge_reads_blocks_back_and_checks_options(tmp_path: Path) -> None:
    block = agreement.Block("sts2016_answer_answer", agreement.SIMILARITY, 4, 4, 0, 0, 2.0, True)
    block.methods = _methods(
        (0.5, 0.7),
        ("token F1 vs reference", 0.2, 0.6),
        ("exact match vs reference", None, 0.5),
        (agreement.MINILM, 0.6, 0.75),
    )
    path = tmp_path / "agreement.json"
    path.write_text(
        json.dumps({**_result(verdicts="read"), "blocks": [agreement.asdict(block)], "runs": []})
    )
    blocks, _ = agreement.read_earlier(path, _result(verdicts="read"))
    assert blocks[0].below_minilm and blocks[0].loses_to == []
    table = agreement.markdown_table(agreement.merge_blocks(blocks, []))
    assert "baseline: MiniLM cosine | +0.60" in table
    assert "**more than 0.03 AUC below MiniLM cosine**" in table
    with pytest.raises(SystemExit, match="verdicts"):
        agreement.read_earlier(path, _result())
    with pytest.raises(SystemExit, match="baselines"):
        agreement.read_earlier(path, _result(verdicts="read", baselines={}))


@pytest.mark.slow
def test_minilm_cosine_with_the_real_embedder() -> None:
    same = agreement.minilm_cosine("The cat sat on the mat.", "The cat sat on the mat.")
    near = agreement.minilm_cosine("The cat sat on the mat.", "A cat was sitting on a mat.")
    far = agreement.minilm_cosine("The cat sat on the mat.", "Quarterly revenue rose 4%.")
    assert same == pytest.approx(1.0, abs=1e-3)
    assert far < near < same
