"""A persistent result cache in front of any judge.

Each answer is stored in a sqlite file under a key that hashes the model fingerprint, the
rendered messages, the schema and the decoding settings. Re-running a job costs nothing and
an interrupted job resumes where it stopped. The file uses write-ahead logging and a busy
timeout, so several processes can read and write the same cache at once.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from offline_scorer.judges._keys import request_key
from offline_scorer.judges._protocol import (
    Answer,
    CallLog,
    ItemUsage,
    Judge,
    JudgeCall,
    JudgeWrapper,
    Request,
    ask,
)
from offline_scorer.judges._settings import GenerationSettings, cache_dir


def default_cache_path() -> Path:
    """The default cache file: ``results.sqlite`` in the user cache folder."""
    return cache_dir() / "results.sqlite"


class ResultCache:
    """A sqlite key-value store of judge answers, safe to share between processes."""

    def __init__(self, path: str | os.PathLike[str] | None = None):
        self.path = Path(path) if path is not None else default_cache_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        with self._connect() as connection:
            connection.execute(
                "CREATE TABLE IF NOT EXISTS answers ("
                " key TEXT PRIMARY KEY, kind TEXT NOT NULL, output TEXT NOT NULL,"
                " created REAL NOT NULL)"
            )

    def _connect(self) -> sqlite3.Connection:
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if connection is None:
            connection = sqlite3.connect(self.path, timeout=60.0)
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("PRAGMA synchronous=NORMAL")
            self._local.connection = connection
        return connection

    def get_many(self, keys: Sequence[str]) -> dict[str, str]:
        """Return the stored outputs of those keys that are present."""
        found: dict[str, str] = {}
        connection = self._connect()
        for start in range(0, len(keys), 500):
            chunk = list(keys[start : start + 500])
            marks = ",".join("?" * len(chunk))
            rows = connection.execute(
                f"SELECT key, output FROM answers WHERE key IN ({marks})", chunk
            ).fetchall()
            found.update(dict(rows))
        return found

    def put_many(self, rows: Sequence[tuple[str, str, str]]) -> None:
        """Store ``(key, kind, output)`` rows in one transaction."""
        if not rows:
            return
        now = time.time()
        with self._connect() as connection:
            connection.executemany(
                "INSERT OR REPLACE INTO answers (key, kind, output, created) VALUES (?, ?, ?, ?)",
                [(key, kind, output, now) for key, kind, output in rows],
            )

    def __len__(self) -> int:
        return int(self._connect().execute("SELECT COUNT(*) FROM answers").fetchone()[0])


class CachedJudge(JudgeWrapper):
    """Serves answers from a :class:`ResultCache` and asks the inner judge only for misses.

    Failed answers are not cached: a later run asks again.

    Args:
        inner: the judge that answers cache misses.
        cache: the cache, or a path to its sqlite file (default: the user cache folder).

    Example:
        >>> judge = CachedJudge(TransformersJudge(), "results.sqlite")  # doctest: +SKIP
    """

    def __init__(self, inner: Judge, cache: ResultCache | str | os.PathLike[str] | None = None):
        self.inner = inner
        self.cache = cache if isinstance(cache, ResultCache) else ResultCache(cache)
        settings = getattr(inner, "settings", None)
        self._settings = (settings or GenerationSettings()).cache_key_part()
        self._log = CallLog()
        self.hits = 0
        self.misses = 0

    def answer(self, request: Request) -> list[Answer[Any]]:
        """Cached answers; the inner judge answers the misses in one call."""
        started = time.perf_counter()
        fingerprint = self.inner.fingerprint
        keys = [
            request_key(fingerprint, prompt, request.key_text(index), self._settings)
            for index, prompt in enumerate(request.prompts)
        ]
        stored = self.cache.get_many(keys)
        hit = ItemUsage(0, 0, 0.0, cached=True)
        answers: list[Answer[Any]] = [
            Answer.of(request.restore(i, _loaded(request, stored[key])), hit)
            if key in stored
            else Answer()
            for i, key in enumerate(keys)
        ]
        missing = [i for i, key in enumerate(keys) if key not in stored]
        self.hits += len(keys) - len(missing)
        self.misses += len(missing)
        if missing:
            new_rows = []
            for index, fresh in zip(missing, ask(self.inner, request.subset(missing)), strict=True):
                answers[index] = fresh
                kept = request.stored(fresh.value) if fresh.ok else None
                if kept is not None:
                    text = kept if isinstance(kept, str) else json.dumps(kept)
                    new_rows.append((keys[index], request.kind, text))
            self.cache.put_many(new_rows)
        usages = [answer.usage for answer in answers]
        self._log.add(JudgeCall(request.kind, usages, time.perf_counter() - started))
        return answers


def _loaded(request: Request, text: str) -> Any:
    """A cached row's text as :meth:`Request.restore` takes it (label reads are JSON)."""
    return json.loads(text) if request.kind == "labels" else text
