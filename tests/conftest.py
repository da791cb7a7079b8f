"""Shared fixtures: offline mode, an isolated cache folder, one loaded model per session."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture(scope="session")
def session_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache folder for the whole session: the embedded model is converted once."""
    return tmp_path_factory.mktemp("offline-scorer-cache")


@pytest.fixture(autouse=True)
def isolated_cache(session_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Never touch the user's cache folder; force the Hugging Face offline switches."""
    monkeypatch.setenv("OFFLINE_SCORER_CACHE", str(session_cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    yield session_cache


@pytest.fixture(scope="session")
def judge(session_cache: Path):  # type: ignore[no-untyped-def]
    """The real embedded model behind a TransformersJudge, loaded once per session."""
    os.environ["OFFLINE_SCORER_CACHE"] = str(session_cache)
    from offline_scorer import TransformersJudge

    real = TransformersJudge()
    real.load()
    return real


@pytest.fixture(scope="session")
def generated_relevancy(judge) -> tuple[dict[str, Any], list[Any]]:  # type: ignore[no-untyped-def]
    """Every case of ``cases.RELEVANCY_CASES`` scored once, in one ``run_batch``, by the
    relevancy scorer with generated verdicts (the reference's procedure), and the judge
    calls that batch made.

    Scored once per session because two files need exactly this work: test_scorers_real
    checks the results, and test_cli compares a resumed command-line run with them (an
    uninterrupted run of the same rows).
    """
    from cases import RELEVANCY_CASES

    from offline_scorer import create_answer_relevancy_scorer

    scorer = create_answer_relevancy_scorer(judge=judge, verdicts="generate", extraction="model")
    runs = [dict(case, run_id=name) for name, case in RELEVANCY_CASES.items()]
    last_before = judge.call_log[-1].number if judge.call_log else 0
    results = {result.run_id: result for result in scorer.run_batch(runs)}
    calls = [call for call in judge.call_log if call.number > last_before]
    return results, calls
