"""Stable keys for judge requests, shared by the replay judge and the result cache."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel

Message = Mapping[str, str]
Prompt = Sequence[Message]


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace: the same value always gives the same text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def schema_text(schema: type[BaseModel]) -> str:
    """The JSON schema of a pydantic model, compact.

    Keys are NOT sorted: property order is the order the model must write the fields in.
    """
    return json.dumps(schema.model_json_schema(), separators=(",", ":"), ensure_ascii=False)


def request_key(
    model_fingerprint: str,
    prompt: Prompt,
    schema: str | None,
    extra: Mapping[str, object] | None = None,
) -> str:
    """Hash of everything that decides a greedy judge's answer to one request.

    Args:
        model_fingerprint: identity of the model weights.
        prompt: the chat messages sent.
        schema: canonical JSON schema text, or None for free text.
        extra: decoding settings that change the answer (token budgets), if any.
    """
    payload = {
        "model": model_fingerprint,
        "messages": [dict(message) for message in prompt],
        "schema": schema,
        "extra": dict(extra or {}),
    }
    return hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()
