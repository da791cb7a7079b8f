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

from pydantic import BaseModel

from offline_scorer.judges._keys import Prompt, request_key, schema_text
from offline_scorer.judges._protocol import (
    CallLog,
    ItemUsage,
    Judge,
    JudgeCall,
    JudgeWrapper,
    KeepsCallLog,
    LabelsArg,
    LabelScores,
    SchemaArg,
    finish,
    label_request_text,
    labels_per_prompt,
    parse_json_output,
    schemas_per_prompt,
    unwrap,
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


class CachedJudge(KeepsCallLog, JudgeWrapper):
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

    def generate_json(
        self,
        prompts: Sequence[Prompt],
        schema: SchemaArg,
        *,
        return_exceptions: bool = False,
        with_usage: bool = False,
    ) -> list[Any]:
        """Cached :meth:`Judge.generate_json`."""
        schemas = schemas_per_prompt(schema, len(prompts))
        texts = [schema_text(s) for s in schemas]

        def ask(indexes: list[int]) -> list[Any]:
            return self.inner.generate_json(
                [prompts[i] for i in indexes],
                [schemas[i] for i in indexes],
                return_exceptions=True,
                with_usage=True,
            )

        def parse(index: int, output: str) -> Any:
            return parse_json_output(output, schemas[index], index=index)

        results, usages = self._serve("json", prompts, texts, ask, parse)
        return finish(results, return_exceptions, usages, with_usage)

    def generate_text(
        self,
        prompts: Sequence[Prompt],
        *,
        return_exceptions: bool = False,
        with_usage: bool = False,
    ) -> list[Any]:
        """Cached :meth:`Judge.generate_text`."""

        def ask(indexes: list[int]) -> list[Any]:
            return self.inner.generate_text(
                [prompts[i] for i in indexes], return_exceptions=True, with_usage=True
            )

        results, usages = self._serve(
            "text", prompts, [None] * len(prompts), ask, lambda _, out: out
        )
        return finish(results, return_exceptions, usages, with_usage)

    def score_labels(
        self,
        prompts: Sequence[Prompt],
        labels: LabelsArg,
        *,
        return_exceptions: bool = False,
        with_usage: bool = False,
        hidden_state: bool = False,
    ) -> list[Any]:
        """Cached :meth:`Judge.score_labels` (the log-probabilities are stored as JSON)."""
        per_prompt = labels_per_prompt(labels, len(prompts))
        texts = [label_request_text(item, hidden_state) for item in per_prompt]

        def ask(indexes: list[int]) -> list[Any]:
            return self.inner.score_labels(
                [prompts[i] for i in indexes],
                [per_prompt[i] for i in indexes],
                return_exceptions=True,
                with_usage=True,
                hidden_state=hidden_state,
            )

        def parse(index: int, output: str) -> Any:
            return LabelScores.from_json(per_prompt[index], json.loads(output))

        results, usages = self._serve("labels", prompts, texts, ask, parse)
        return finish(results, return_exceptions, usages, with_usage)

    def _serve(
        self,
        kind: Any,
        prompts: Sequence[Prompt],
        schema_texts: Sequence[str | None],
        ask: Any,
        parse: Any,
    ) -> tuple[list[Any], list[ItemUsage]]:
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
            answers, inner_usage = unwrap(ask(missing))
            new_rows = []
            for index, answer, usage in zip(missing, answers, inner_usage, strict=True):
                results[index] = answer
                usages[index] = usage
                if isinstance(answer, BaseModel):
                    new_rows.append((keys[index], kind, answer.model_dump_json()))
                elif isinstance(answer, LabelScores):
                    new_rows.append((keys[index], kind, json.dumps(answer.to_json())))
                elif isinstance(answer, str):
                    new_rows.append((keys[index], kind, answer))
            self.cache.put_many(new_rows)
        self._log.add(JudgeCall(kind, usages, time.perf_counter() - started))
        return results, usages
