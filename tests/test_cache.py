"""The sqlite result cache shared by several processes (no model needed)."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from offline_scorer import ResultCache


def _write_many(path: str, worker: int) -> None:
    cache = ResultCache(path)
    for chunk in range(20):
        cache.put_many([(f"{worker}-{chunk}-{i}", "json", "{}") for i in range(10)])


def test_two_processes_writing_at_once_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    ResultCache(path)
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_write_many, args=(str(path), n)) for n in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
        assert worker.exitcode == 0
    cache = ResultCache(path)
    assert len(cache) == 2 * 20 * 10
    assert cache.get_many(["0-19-9", "1-0-0", "absent"]) == {"0-19-9": "{}", "1-0-0": "{}"}
