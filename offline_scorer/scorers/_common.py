"""Pieces shared by the built-in scorers."""

from __future__ import annotations

import math
import re
from typing import Annotated, Any

from pydantic import AfterValidator, StringConstraints


def _check_finite(value: float) -> float:
    if not math.isfinite(value):
        raise ValueError("must be a finite number")
    return value


FiniteFloat = Annotated[float, AfterValidator(_check_finite)]
"""A float option type that refuses NaN and infinities."""


def round_half_up(value: float) -> float:
    """Round to 2 decimals, halves up, like the reference scorers.

    Python's ``round`` rounds halves to even and binary floats sit just below many
    halves (0.625, 1.005), so the reference adds one machine epsilon before flooring:
    0.625 -> 0.63, 0.575 -> 0.58, 1.005 -> 1.01.
    """
    return math.floor((value + 2.220446049250313e-16) * 100 + 0.5) / 100


def format_score(score: float) -> str:
    """A score as the reference writes it in reasons: no trailing zeros."""
    return f"{score:.2f}".rstrip("0").rstrip(".")


def item_limit(text: str, ceiling: int) -> int:
    """How many statements or units a text can reasonably hold.

    Two per sentence, never more than one per word, within [1, ceiling]. A small model
    asked for a list tends to fill it with repeats until its budget runs out; a bound that
    follows the text's length keeps lists honest and generation short.
    """
    sentences = [part for part in re.split(r"[.!?;\n]+", text) if part.strip()]
    words = len(text.split())
    return max(1, min(ceiling, 2 * max(1, len(sentences)), max(1, words)))


def split_text(text: str, max_chars: int) -> list[str]:
    """Cut a text into chunks of at most ``max_chars``, at sentence ends where possible.

    A sentence longer than ``max_chars`` is cut at the last space before the limit (or at
    the limit when it has none). Joining the chunks with spaces gives back the words.
    """
    chunks: list[str] = []
    current = ""
    for sentence in re.split(r"(?<=[.!?])\s+", text.strip()):
        while len(sentence) > max_chars:
            cut = sentence.rfind(" ", 0, max_chars)
            cut = cut if cut > 0 else max_chars
            head, sentence = sentence[:cut].strip(), sentence[cut:].strip()
            if current:
                chunks.append(current)
                current = ""
            chunks.append(head)
        if current and len(current) + 1 + len(sentence) > max_chars:
            chunks.append(current)
            current = sentence
        else:
            current = f"{current} {sentence}".strip()
    if current:
        chunks.append(current)
    return chunks


def unique_in_order(items: list[str]) -> list[str]:
    """Drop repeated items (ignoring case and surrounding space), keeping the first."""
    seen: set[str] = set()
    kept = []
    for item in items:
        key = " ".join(item.split()).casefold()
        if key and key not in seen:
            seen.add(key)
            kept.append(item.strip())
    return kept


def text_item(*sources: str) -> Any:
    """The type of one extracted statement or unit: non-empty text on one line.

    An underscore is allowed only when the source text has one: inside JSON lists a small
    model drifts into snake_case identifiers ("water_boils_at_100") that no answer contained.

    No double quote and no backslash either. The constraint applies the pattern to the JSON
    text as written, pydantic to the decoded string: an escape the model wrote (``\\"``)
    would pass the first and fail the second, a failed run for a quoted word. A source
    sentence put in an item's place has its double quotes made single for the same reason
    (``_facts._plain``).
    """
    banned = "" if any("_" in source for source in sources) else "_"
    pattern = rf'^[^{banned}"\\\x00-\x1f]+$'
    return Annotated[str, StringConstraints(pattern=pattern)]


# " | " or " / " with spaces on both sides, between alternatives ("Paris / City of Light").
_ALTERNATIVES = re.compile(r"\s+[|/]\s+")
_NUMBER = re.compile(r"^[\d.,]+$")


def reference_alternatives(value: Any, *, split_strings: bool = True) -> list[str] | None:
    """A ground truth's alternative references, or None when it is a single reference.

    A list (or tuple) is always a set of alternatives: its non-blank strings, stripped,
    repeats removed (an empty list means no reference). With ``split_strings``, one short
    string (at most 30 words) with `` | `` or `` / `` between non-numeric parts is one too.

    Raises:
        TypeError: a list item is not a string or a number.
    """
    if isinstance(value, (list, tuple)):
        items = []
        for position, item in enumerate(value):
            if isinstance(item, bool) or not isinstance(item, (str, int, float)):
                raise TypeError(
                    f"ground_truth[{position}]: a list of references holds strings, got "
                    f"{type(item).__name__}. Pass each accepted answer as a string."
                )
            text = str(item).strip()
            if text and text not in items:
                items.append(text)
        return items
    if split_strings and isinstance(value, str) and len(value.split()) <= 30:
        parts = [part.strip() for part in _ALTERNATIVES.split(value.strip())]
        if len(parts) > 1 and all(parts) and not all(_NUMBER.match(p) for p in parts):
            return list(dict.fromkeys(parts))
    return None


# A reason prompt shows each text and each quoted unit at most this long: the reason needs
# the gist, and a long answer (its last unit folds in the rest of the text) would otherwise
# appear two or three times over and outgrow the context window.
REASON_TEXT_CHARS = 1200
REASON_UNIT_CHARS = 160


def clip(text: Any, limit: int) -> Any:
    """``text`` cut at ``limit`` characters with a note of how much was left out."""
    if not isinstance(text, str) or len(text) <= limit:
        return text
    return f"{text[:limit].rstrip()} [... {len(text) - limit} more characters]"
