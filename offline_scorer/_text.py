"""Turning the accepted shapes of ``input``, ``output`` and ``ground_truth`` into text.

This is the one place where run inputs become strings. Accepted shapes:

* a plain string;
* a list of chat messages ``{"role": ..., "content": ...}`` whose content is a string or a
  list of parts ``{"type": "text", "text": ...}``. For ``input`` the FIRST user message with
  text is used, for ``output`` the LAST assistant message with text (tool-only messages are
  skipped);
* a dict with ``text`` or ``content``;
* ``None`` (missing text becomes the empty string).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

ACCEPTED_SHAPES = (
    "a string, a list of chat messages ({'role': ..., 'content': str | [{'type': 'text', "
    "'text': ...}]}), a dict with 'text' or 'content', or None"
)


def extract_text(value: Any, *, side: Literal["input", "output"], field: str = "") -> str:
    """Return the text of an ``input`` (first user message) or ``output`` (last assistant).

    Raises:
        TypeError: ``value`` is none of the accepted shapes (see the module docstring).
    """
    name = field or side
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        if _is_message(value):
            return _extract_from_messages([value], side, name)
        for key in ("text", "content"):
            if key in value:
                return _content_text(value[key], name)
        raise TypeError(
            f"{name}: a dict needs a 'text' or 'content' key. Accepted: {ACCEPTED_SHAPES}."
        )
    if isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
        return _extract_from_messages(value, side, name)
    raise TypeError(f"{name}: got {type(value).__name__}. Accepted: {ACCEPTED_SHAPES}.")


def _is_message(value: Mapping[str, Any]) -> bool:
    return "role" in value


def _extract_from_messages(messages: Sequence[Any], side: str, name: str) -> str:
    wanted_role = "user" if side == "input" else "assistant"
    texts = []
    for position, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise TypeError(
                f"{name}[{position}]: expected a chat message dict, got "
                f"{type(message).__name__}. Accepted: {ACCEPTED_SHAPES}."
            )
        if message.get("role") != wanted_role:
            continue
        text = _content_text(message.get("content"), f"{name}[{position}].content")
        if text:
            texts.append(text)
    if not texts:
        return ""
    return texts[0] if side == "input" else texts[-1]


def _content_text(content: Any, name: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence) and not isinstance(content, (bytes, bytearray)):
        parts = []
        for position, part in enumerate(content):
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, Mapping):
                # Tool calls, images and other non-text parts carry no answer text.
                if part.get("type", "text") == "text" and isinstance(part.get("text"), str):
                    parts.append(part["text"])
            else:
                raise TypeError(
                    f"{name}[{position}]: a content part must be a dict like "
                    f"{{'type': 'text', 'text': ...}}, got {type(part).__name__}."
                )
        return "\n".join(parts)
    raise TypeError(
        f"{name}: message content must be a string or a list of parts, got "
        f"{type(content).__name__}. Accepted: {ACCEPTED_SHAPES}."
    )


def ground_truth_text(value: Any) -> str | None:
    """The ground truth as text, or None when it is missing.

    Missing means None, or a string that is empty or only whitespace. Any other value
    (numbers, including 0, dicts, lists) is rendered as compact JSON.

    Raises:
        TypeError: the value cannot be rendered as JSON.
    """
    if value is None:
        return None
    if isinstance(value, str):
        return value if value.strip() else None
    if isinstance(value, float) and not math.isfinite(value):
        raise TypeError(f"ground_truth: {value!r} is not a usable reference answer.")
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError) as error:
        raise TypeError(
            f"ground_truth: a {type(value).__name__} cannot be rendered as text; pass a string, "
            "a number, or JSON-compatible dicts and lists."
        ) from error


def has_ground_truth(value: Any) -> bool:
    """Whether a ground truth is given: not None or blank, and a list holds a non-blank one."""
    if isinstance(value, (list, tuple)):
        return any(has_ground_truth(item) for item in value)
    return value is not None and not (isinstance(value, str) and not value.strip())
