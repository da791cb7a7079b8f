"""Generation settings and the user cache folder."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Device = Literal["auto", "cpu", "cuda", "mps"]
DType = Literal["auto", "float32", "bfloat16", "float16"]

CACHE_ENV = "OFFLINE_SCORER_CACHE"


class GenerationSettings(BaseModel):
    """How a judge decodes. Frozen: a judge's settings never change after it is built.

    Decoding is always greedy, so the same prompt gives the same output; every limit is
    bounded so that no generation can run away.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_new_tokens_json: int = Field(
        768, ge=16, le=8192, description="Token budget of one constrained JSON answer."
    )
    max_new_tokens_text: int = Field(
        160, ge=8, le=4096, description="Token budget of one free-text answer (reasons)."
    )
    max_string_chars: int = Field(
        200,
        ge=16,
        description="Longest JSON string value; past it the model must close the string.",
    )
    max_string_tokens: int = Field(
        64,
        ge=8,
        description=(
            "Most tokens in one JSON string value; past it the model must close the string "
            "(a loop of one-character tokens, such as digits, stays under max_string_chars "
            "for a long time)."
        ),
    )
    max_sentences_text: int | None = Field(
        2, ge=1, description="Stop a free-text answer after this many sentences (None: no limit)."
    )
    batch_size: int = Field(
        8, ge=1, le=1024, description="Prompts per forward pass; larger batches use more memory."
    )
    decoder: Literal["loop", "generate"] = Field(
        "loop",
        description=(
            "'loop': our decode loop (shared-prefix cache, preallocated cache, rows leave the "
            "batch when done, jump-forward); 'generate': transformers' generate. Same greedy "
            "choices; models whose cache is not plain full attention always use 'generate'."
        ),
    )
    prefix_cache: bool = Field(
        True,
        description="Compute the system block shared by a step's prompts once per model (loop only).",
    )
    jump_forward: bool = Field(
        True,
        description="Take tokens the JSON constraint forces without a decode step each (loop only).",
    )

    def cache_key_part(self) -> dict[str, object]:
        """The settings that change what a model answers, for result-cache keys."""
        return {
            "decoding": "greedy",
            "max_new_tokens_json": self.max_new_tokens_json,
            "max_new_tokens_text": self.max_new_tokens_text,
            "max_string_chars": self.max_string_chars,
            "max_string_tokens": self.max_string_tokens,
            "max_sentences_text": self.max_sentences_text,
        }


def cache_dir() -> Path:
    """The user cache folder: ``$OFFLINE_SCORER_CACHE``, else the XDG cache folder."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "offline-scorer"
