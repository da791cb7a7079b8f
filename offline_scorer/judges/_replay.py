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
from pathlib import Path
from typing import Any, cast

from offline_scorer._exceptions import DataError, JudgeOutputError, ReplayMissError
from offline_scorer._files import write_text_atomically
from offline_scorer.judges._keys import Prompt, request_key
from offline_scorer.judges._protocol import (
    Answer,
    CallLog,
    ItemUsage,
    Judge,
    JudgeBase,
    JudgeCall,
    JudgeWrapper,
    Request,
    UsageTotals,
    ask,
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


class ReplayJudge(JudgeBase):
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

    def answer(self, request: Request) -> list[Answer[Any]]:
        """One recorded answer per prompt (JSON validated against its schema)."""
        usage = ItemUsage(0, 0, 0.0, cached=True)
        answers = []
        for index, prompt in enumerate(request.prompts):
            raw = self._lookup(prompt, request.key_text(index), index)
            outcome = raw if isinstance(raw, BaseException) else request.restore(index, raw)
            answers.append(Answer.of(outcome, usage))
        self._log.add(JudgeCall(request.kind, [usage] * len(answers)))
        return answers

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


def _shown_request(request: Request, index: int) -> Any:
    """What a recording shows of a prompt's request: its JSON schema or its labels."""
    if request.schemas is not None:
        return request.schemas[index].model_json_schema()
    if request.labels is not None:
        return list(request.labels[index])
    return None


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

    @property
    def usage_totals(self) -> UsageTotals:
        """The inner judge's totals."""
        return cast(UsageTotals, getattr(self.inner, "usage_totals", UsageTotals()))

    def answer(self, request: Request) -> list[Answer[Any]]:
        """Ask the inner judge, record each raw answer, return the answers."""
        answers = ask(self.inner, request)
        for index, (prompt, answer) in enumerate(zip(request.prompts, answers, strict=True)):
            output = request.stored(answer.value) if answer.ok else None
            if isinstance(answer.error, JudgeOutputError) and answer.error.raw_output is not None:
                # Record invalid answers too: replaying them reproduces the same failure.
                output = answer.error.raw_output
            if output is not None:
                self._remember(
                    prompt, _shown_request(request, index), request.key_text(index), output
                )
        self._save()
        return answers

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
