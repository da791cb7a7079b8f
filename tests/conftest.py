"""Shared fixtures: offline mode, an isolated cache folder, one loaded model per session."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

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
