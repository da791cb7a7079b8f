"""Replay and record judge outputs, so scorers can run in CI without loading a model.

A recording is a human-readable JSON file::

    {"format": "offline-scorer-recording/1",
     "entries": {"<key>": {"model": ..., "kind": "json"|"text"|"labels", "messages": [...],
                           "schema": {...} | null, "output": "<raw model text>"}}}

The key hashes (model fingerprint, rendered messages, schema), see :func:`request_key`.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from offline_scorer._exceptions import DataError, JudgeOutputError, ReplayMissError
from offline_scorer._files import write_text_atomically
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

FORMAT = "offline-scorer-recording/1"


def _read_recording(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as error:
        raise DataError(f"Recording file {path} does not exist.") from error
    except json.JSONDecodeError as error:
        raise DataError(f"Recording file {path} is not valid JSON: {error}") from error
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise DataError(f"{path} is not an offline-scorer recording (expected format {FORMAT}).")
    entries = data.get("entries")
    if not isinstance(entries, dict):
        raise DataError(f"Recording file {path} has no 'entries' object.")
    return entries


def write_json_atomically(path: Path, value: Any) -> None:
    """Write JSON (sorted keys, one-space indent) atomically."""
    text = json.dumps(value, indent=1, ensure_ascii=False, sort_keys=True) + "\n"
    write_text_atomically(path, text)


class ReplayJudge(KeepsCallLog):
    """A judge that answers from a recording file and never loads a model.

    A request with no recording raises :class:`ReplayMissError` showing the unmatched prompt
    (usually the prompts or the model changed since recording); it never falls back to
    anything else.

    Args:
        path: the recording file written by :class:`RecordingJudge`.
        model_fingerprint: the fingerprint the recording was made with; by default the one
            stored in the file (a recording holds one model).

    Example:
        >>> judge = ReplayJudge("tests/recordings/relevancy.json")  # doctest: +SKIP
    """

    def __init__(self, path: str | os.PathLike[str], *, model_fingerprint: str | None = None):
        self.path = Path(path)
        self._entries = _read_recording(self.path)
        models = sorted({entry["model"] for entry in self._entries.values()})
        if model_fingerprint is None:
            if len(models) > 1:
                raise DataError(
                    f"Recording {self.path} holds several models ({', '.join(models)}); pass "
                    "model_fingerprint= to pick one."
                )
            model_fingerprint = models[0] if models else "unknown"
        self._fingerprint = model_fingerprint
        self._log = CallLog()

    @property
    def model_id(self) -> str:
        """The recorded model's name (the fingerprint without its checksum)."""
        return self._fingerprint.split("@", 1)[0]

    @property
    def fingerprint(self) -> str:
        """The recorded model's fingerprint."""
        return self._fingerprint

    def generate_json(
        self,
        prompts: Sequence[Prompt],
        schema: SchemaArg,
        *,
        return_exceptions: bool = False,
        with_usage: bool = False,
    ) -> list[Any]:
        """Replay one recorded JSON answer per prompt, validated against its schema."""
        schemas = schemas_per_prompt(schema, len(prompts))
        results: list[Any] = []
        for index, (prompt, item_schema) in enumerate(zip(prompts, schemas)):
            raw = self._lookup(prompt, schema_text(item_schema), index)
            results.append(
                raw
                if isinstance(raw, BaseException)
                else parse_json_output(raw, item_schema, index=index)
            )
        return finish(results, return_exceptions, self._record("json", prompts), with_usage)

    def generate_text(
        self,
        prompts: Sequence[Prompt],
        *,
        return_exceptions: bool = False,
        with_usage: bool = False,
    ) -> list[Any]:
        """Replay one recorded text answer per prompt."""
        results = [self._lookup(prompt, None, index) for index, prompt in enumerate(prompts)]
        return finish(results, return_exceptions, self._record("text", prompts), with_usage)

    def score_labels(
        self,
        prompts: Sequence[Prompt],
        labels: LabelsArg,
        *,
        return_exceptions: bool = False,
        with_usage: bool = False,
        hidden_state: bool = False,
    ) -> list[Any]:
        """Replay one recorded set of label log-probabilities per prompt."""
        per_prompt = labels_per_prompt(labels, len(prompts))
        results: list[Any] = []
        for index, (prompt, item) in enumerate(zip(prompts, per_prompt)):
            raw = self._lookup(prompt, label_request_text(item, hidden_state), index)
            results.append(
                raw if isinstance(raw, BaseException) else LabelScores.from_json(item, raw)
            )
        return finish(results, return_exceptions, self._record("labels", prompts), with_usage)

    def _lookup(self, prompt: Prompt, schema: str | None, index: int) -> Any:
        entry = self._entries.get(request_key(self._fingerprint, prompt, schema))
        if entry is None:
            shown = json.dumps([dict(m) for m in prompt], ensure_ascii=False)[:600]
            return ReplayMissError(
                f"No recorded answer in {self.path} for prompt {index} (model "
                f"{self._fingerprint}, {_request_kind(schema)} request). The prompts, "
                f"schema or model changed since recording; record again. Prompt: {shown}",
                index=index,
            )
        return entry["output"]

    def _record(self, kind: Any, prompts: Sequence[Prompt]) -> list[ItemUsage]:
        usages = [ItemUsage(0, 0, 0.0, cached=True) for _ in prompts]
        self._log.add(JudgeCall(kind, usages))
        return usages


def _request_kind(schema: str | None) -> str:
    if schema is None:
        return "text"
    return "labels" if schema.startswith("labels:") else "JSON"


class RecordingJudge(JudgeWrapper):
    """Wraps a real judge and records every answer it gives into a recording file.

    The file is rewritten atomically after every call, so an interrupted run keeps what
    was recorded. Existing entries in the file are kept.

    Args:
        inner: the judge whose answers are recorded.
        path: the recording file (created when absent).
    """

    def __init__(self, inner: Judge, path: str | os.PathLike[str]):
        self.inner = inner
        self.path = Path(path)
        self._entries: dict[str, Any] = _read_recording(self.path) if self.path.exists() else {}
        self._lock = threading.Lock()

    @property
    def call_log(self) -> list[JudgeCall]:
        """The inner judge's recent calls."""
        return self.inner.call_log

    def generate_json(
        self,
        prompts: Sequence[Prompt],
        schema: SchemaArg,
        *,
        return_exceptions: bool = False,
        with_usage: bool = False,
    ) -> list[Any]:
        """Ask the inner judge, record each raw answer, return its results."""
        schemas = schemas_per_prompt(schema, len(prompts))
        answers = self.inner.generate_json(
            prompts, schemas, return_exceptions=True, with_usage=True
        )
        results, usages = unwrap(answers)
        for prompt, item_schema, result in zip(prompts, schemas, results):
            if isinstance(result, BaseModel):
                self._remember(
                    prompt,
                    item_schema.model_json_schema(),
                    schema_text(item_schema),
                    result.model_dump_json(),
                )
            elif isinstance(result, JudgeOutputError) and result.raw_output is not None:
                # Record invalid answers too: replaying them reproduces the same failure.
                self._remember(
                    prompt,
                    item_schema.model_json_schema(),
                    schema_text(item_schema),
                    result.raw_output,
                )
        self._save()
        return finish(results, return_exceptions, usages, with_usage)

    def generate_text(
        self,
        prompts: Sequence[Prompt],
        *,
        return_exceptions: bool = False,
        with_usage: bool = False,
    ) -> list[Any]:
        """Ask the inner judge, record each answer, return them."""
        answers = self.inner.generate_text(prompts, return_exceptions=True, with_usage=True)
        results, usages = unwrap(answers)
        for prompt, result in zip(prompts, results):
            if isinstance(result, str):
                self._remember(prompt, None, None, result)
        self._save()
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
        """Ask the inner judge, record each set of label log-probabilities, return them."""
        per_prompt = labels_per_prompt(labels, len(prompts))
        answers = self.inner.score_labels(
            prompts, per_prompt, return_exceptions=True, with_usage=True, hidden_state=hidden_state
        )
        results, usages = unwrap(answers)
        for prompt, item, result in zip(prompts, per_prompt, results):
            if isinstance(result, LabelScores):
                text = label_request_text(item, hidden_state)
                self._remember(prompt, list(item), text, result.to_json())
        self._save()
        return finish(results, return_exceptions, usages, with_usage)

    def _remember(self, prompt: Prompt, schema: Any, text: str | None, output: Any) -> None:
        key = request_key(self.inner.fingerprint, prompt, text)
        with self._lock:
            self._entries[key] = {
                "model": self.inner.fingerprint,
                "kind": _request_kind(text).lower(),
                "messages": [dict(message) for message in prompt],
                "schema": schema,
                "output": output,
            }

    def _save(self) -> None:
        with self._lock:
            write_json_atomically(self.path, {"format": FORMAT, "entries": self._entries})
