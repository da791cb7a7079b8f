"""Record a real run, then replay it without the model; and the result cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_judge_real import ITEMS, Food, prompt

from offline_scorer import (
    CachedJudge,
    RecordingJudge,
    ReplayJudge,
    ReplayMissError,
    TransformersJudge,
)
from offline_scorer.judges import values

pytestmark = pytest.mark.slow


def test_record_then_replay_identical_without_model(
    judge: TransformersJudge, tmp_path: Path
) -> None:
    path = tmp_path / "recording.json"
    recorder = RecordingJudge(judge, path)
    prompts = [prompt(item) for item in ITEMS[:3]]
    recorded = values(recorder.generate_json(prompts, Food))
    texts = values(recorder.generate_text(prompts[:2]))
    data = json.loads(path.read_text())
    assert len(data["entries"]) == 5
    replay = ReplayJudge(path)
    assert replay.fingerprint == judge.fingerprint
    assert values(replay.generate_json(prompts, Food)) == recorded
    assert values(replay.generate_text(prompts[:2])) == texts
    assert not hasattr(replay, "load")  # a replay judge has no model to load


def test_replay_miss_shows_the_prompt(judge: TransformersJudge, tmp_path: Path) -> None:
    path = tmp_path / "recording.json"
    values(RecordingJudge(judge, path).generate_json([prompt("banana")], Food))
    with pytest.raises(ReplayMissError) as caught:
        values(ReplayJudge(path).generate_json([prompt("a changed prompt")], Food))
    assert "a changed prompt" in str(caught.value)


def test_cache_serves_second_run_without_the_model(
    judge: TransformersJudge, tmp_path: Path
) -> None:
    cached = CachedJudge(judge, tmp_path / "cache.sqlite")
    prompts = [prompt(item) for item in ITEMS[:2]]
    first = values(cached.generate_json(prompts, Food))
    calls_before = judge.usage_totals.calls
    again = values(CachedJudge(judge, tmp_path / "cache.sqlite").generate_json(prompts, Food))
    assert again == first
    assert judge.usage_totals.calls == calls_before  # the model was not asked again
    assert cached.misses == 2
