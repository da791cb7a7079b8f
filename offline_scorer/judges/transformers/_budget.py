"""Token budgets that follow the work: the most tokens a schema's JSON can take.

Under the constraint every part of an answer is bounded: keys and constant strings are
fixed text, every free string is closed after ``max_string_tokens`` tokens (see
``_constraint.py``), and the built-in schemas bound every list (``maxItems``). So the
longest answer a schema allows has a computable length. A judge gives each prompt at least
its configured budget and, when the schema may need more (16 statements, 12 reference
units), that bound, so a valid answer is never cut by the budget. Counting is in tokens
with a safe over-estimate: fixed text counts one token per character (constants are ASCII
after escaping, and no token spells less than one character).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from offline_scorer._exceptions import ContextLengthError
from offline_scorer.judges._protocol import ItemUsage

if TYPE_CHECKING:
    from offline_scorer.judges._settings import GenerationSettings
    from offline_scorer.judges.transformers._loading import LoadedModel

# Numbers, booleans and null: digits come one or a few per token; 24 covers any JSON number
# a verdict or a score needs and the cap of string tokens stops digit loops inside strings.
_SCALAR_TOKENS = 24


@lru_cache(maxsize=1024)
def schema_token_bound(schema_json: str, max_string_tokens: int) -> int | None:
    """The most tokens a compact JSON answer to this schema can take, or None if unbounded.

    Args:
        schema_json: the JSON schema text (pydantic's, with ``$defs`` and ``$ref``).
        max_string_tokens: the constraint's cap on tokens inside one free string.
    """
    schema = json.loads(schema_json)
    return _Bound(schema.get("$defs", {}), max_string_tokens).of(schema, depth=0)


class _Bound:
    def __init__(self, defs: dict[str, Any], max_string_tokens: int):
        self._defs = defs
        # Opening quote, the capped content, one more token that may carry the closing quote.
        self._free_string = max_string_tokens + 3

    def of(self, node: Any, depth: int) -> int | None:
        if depth > 64 or not isinstance(node, dict):
            return None
        if "$ref" in node:
            name = str(node["$ref"]).rsplit("/", 1)[-1]
            return self.of(self._defs.get(name), depth + 1)
        if "const" in node:
            return _spelled(node["const"])
        if "enum" in node:
            return max((_spelled(value) for value in node["enum"]), default=0)
        for key in ("anyOf", "oneOf"):
            if key in node:
                return _largest([self.of(option, depth + 1) for option in node[key]])
        kind = node.get("type")
        if kind == "object":
            return self._object(node, depth)
        if kind == "array":
            return self._array(node, depth)
        if kind == "string":
            return self._free_string
        if kind in ("integer", "number", "boolean", "null"):
            return _SCALAR_TOKENS
        return None

    def _object(self, node: dict[str, Any], depth: int) -> int | None:
        if node.get("additionalProperties") not in (None, False):
            return None
        total = 2  # braces
        for key, value in node.get("properties", {}).items():
            inner = self.of(value, depth + 1)
            if inner is None:
                return None
            total += _spelled(key) + 2 + inner  # "key": value,
        return total

    def _array(self, node: dict[str, Any], depth: int) -> int | None:
        prefix = node.get("prefixItems", [])
        total = 2  # brackets
        for item in prefix:
            inner = self.of(item, depth + 1)
            if inner is None:
                return None
            total += inner + 1
        limit = node.get("maxItems")
        if node.get("items") is False:
            return total
        if limit is None:
            return None
        more = max(0, int(limit) - len(prefix))
        if more == 0:
            return total
        inner = self.of(node.get("items"), depth + 1)
        return None if inner is None else total + more * (inner + 1)


def _spelled(value: Any) -> int:
    """Characters of a constant's compact JSON with non-ASCII escaped (its token bound)."""
    return len(json.dumps(value, ensure_ascii=True, separators=(",", ":")))


def _largest(values: list[int | None]) -> int | None:
    return None if any(value is None for value in values) else max(values, default=0)  # type: ignore[type-var]


@dataclass
class Encoded:
    """One prompt rendered by the chat template and tokenized."""

    position: int
    token_ids: list[int]
    prefill: str = ""
    budget: int = 0
    """New tokens this prompt may generate (set by :func:`fit_to_window`)."""
    wanted: int = 0
    """The budget it asked for (more than ``budget`` when the window is too short)."""
    prefix: int = 0
    """How many leading tokens are the prompt's system block (shared by a step's prompts)."""
    item_prefix: int = 0
    """How many leading tokens are the system block and the item, before a focus message
    (shared by the reads of one item; 0 when the prompt has no focus message)."""


def json_budgets(schema_texts: list[str], settings: GenerationSettings) -> list[int]:
    """Per prompt: the configured JSON budget, or more when its schema may need more."""
    budgets = []
    for text in schema_texts:
        bound = schema_token_bound(text, settings.max_string_tokens)
        budgets.append(max(settings.max_new_tokens_json, bound or 0))
    return budgets


def fit_to_window(
    encoded: list[Encoded],
    budgets: list[int],
    floor: int,
    loaded: LoadedModel,
    results: list[Any],
    usages: list[ItemUsage | None],
) -> list[Encoded]:
    """Give each prompt its budget within the context window; fail those that cannot fit.

    A budget larger than the configured one (``floor``: a schema that may need more) shrinks
    to what the window leaves, never below the configured budget. A prompt that cannot fit
    gets a :class:`ContextLengthError` in ``results``; the others are returned.
    """
    valid = []
    for item in encoded:
        budget = item.wanted = budgets[item.position]
        room = loaded.context_length - len(item.token_ids)
        if budget > room >= floor:
            budget = room
        item.budget = budget
        needed = len(item.token_ids) + budget
        if needed > loaded.context_length:
            results[item.position] = ContextLengthError(
                f"Prompt {item.position} has {len(item.token_ids)} tokens; with the "
                f"generation budget of {budget} tokens it needs {needed}, but model "
                f"'{loaded.model_id}' has a context window of {loaded.context_length} "
                "tokens. Shorten the text (nothing is truncated silently) or use a model "
                "with a longer context."
            )
            usages[item.position] = ItemUsage(len(item.token_ids), 0, 0.0)
        else:
            valid.append(item)
    return valid


def budget_message(item: Encoded, context_length: int, text: str) -> str:
    """Why a JSON answer was cut, and what to do about it."""
    if item.wanted > item.budget:
        why = (
            f"its schema may need {item.wanted} new tokens but the context window of "
            f"{context_length} tokens leaves {item.budget} after the prompt's "
            f"{len(item.token_ids)}. Shorten the input (fewer statements or units), or use a "
            "model with a longer context"
        )
    else:
        why = (
            f"it reached its token budget of {item.budget} tokens (max_new_tokens_json). "
            "Raise max_new_tokens_json or shorten the input"
        )
    return (
        f"The JSON of prompt {item.position} did not close: {why}. Partial output: {text[:200]!r}"
    )
