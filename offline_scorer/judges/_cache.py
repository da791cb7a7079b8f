"""A persistent result cache in front of any judge.

Each answer is stored in a sqlite file under a key that hashes the model fingerprint, the
rendered messages, the schema and the decoding settings. Re-running a job costs nothing and
an interrupted job resumes where it stopped. The file uses write-ahead logging and a busy
timeout, so several processes can read and write the same cache at once.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from offline_scorer.judges._keys import Prompt, request_key, schema_text
from offline_scorer.judges._protocol import (
    ItemUsage,
    Judge,
    JudgeCall,
    JudgeWrapper,
    SchemaArg,
    finish,
    parse_json_output,
    schemas_per_prompt,
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
        self._calls: list[JudgeCall] = []
        self.hits = 0
        self.misses = 0

    @property
    def call_log(self) -> list[JudgeCall]:
        """This judge's calls; items served from the cache are marked ``cached``."""
        return self._calls

    def generate_json(
        self, prompts: Sequence[Prompt], schema: SchemaArg, *, return_exceptions: bool = False
    ) -> list[Any]:
        """Cached :meth:`Judge.generate_json`."""
        schemas = schemas_per_prompt(schema, len(prompts))
        texts = [schema_text(s) for s in schemas]

        def ask(indexes: list[int]) -> list[Any]:
            return self.inner.generate_json(
                [prompts[i] for i in indexes],
                [schemas[i] for i in indexes],
                return_exceptions=True,
            )

        def parse(index: int, output: str) -> Any:
            return parse_json_output(output, schemas[index], index=index)

        results = self._serve("json", prompts, texts, ask, parse)
        return finish(results, return_exceptions)

    def generate_text(
        self, prompts: Sequence[Prompt], *, return_exceptions: bool = False
    ) -> list[Any]:
        """Cached :meth:`Judge.generate_text`."""

        def ask(indexes: list[int]) -> list[Any]:
            return self.inner.generate_text([prompts[i] for i in indexes], return_exceptions=True)

        results = self._serve("text", prompts, [None] * len(prompts), ask, lambda _, out: out)
        return finish(results, return_exceptions)

    def _serve(
        self,
        kind: Any,
        prompts: Sequence[Prompt],
        schema_texts: Sequence[str | None],
        ask: Any,
        parse: Any,
    ) -> list[Any]:
        started = time.perf_counter()
        fingerprint = self.inner.fingerprint
        keys = [
            request_key(fingerprint, prompt, text, self._settings)
            for prompt, text in zip(prompts, schema_texts)
        ]
        stored = self.cache.get_many(keys)
        results: list[Any] = [None] * len(prompts)
        usages = [ItemUsage(0, 0, 0.0, cached=True) for _ in prompts]
        missing = [i for i, key in enumerate(keys) if key not in stored]
        for index, key in enumerate(keys):
            if key in stored:
                results[index] = parse(index, stored[key])
        self.hits += len(prompts) - len(missing)
        self.misses += len(missing)
        if missing:
            answers = ask(missing)
            inner_usage = self.inner.call_log[-1].items if self.inner.call_log else []
            new_rows = []
            for position, (index, answer) in enumerate(zip(missing, answers)):
                results[index] = answer
                if position < len(inner_usage):
                    usages[index] = inner_usage[position]
                if isinstance(answer, BaseModel):
                    new_rows.append((keys[index], kind, answer.model_dump_json()))
                elif isinstance(answer, str):
                    new_rows.append((keys[index], kind, answer))
            self.cache.put_many(new_rows)
        self._calls.append(JudgeCall(kind, usages, time.perf_counter() - started))
        return results
