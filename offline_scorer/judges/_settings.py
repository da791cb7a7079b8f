"""How a judge is built and how it decodes (:class:`JudgeConfig`, :class:`GenerationSettings`),
and the user cache folder.

Every default of a judge lives here, once: the model, backend, device, dtype, threads,
prompts per forward pass (the card's recommendation for the device, else
:data:`FALLBACK_BATCH_SIZE` on a CPU and :data:`ACCELERATOR_BATCH_SIZE` on an accelerator),
token budgets and the decoder.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from offline_scorer._exceptions import ConfigurationError
from offline_scorer.judges._cards import (
    ACCELERATOR_BATCH_SIZE,
    DEFAULT_MODEL,
    FALLBACK_BATCH_SIZE,
    ModelCard,
    card_for,
)

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
    batch_size: int | None = Field(
        None,
        ge=1,
        le=1024,
        description="Prompts per forward pass; larger batches use more memory. None: the "
        "model card's recommended_batch_size on a CPU and its "
        "recommended_accelerator_batch_size on a GPU or MPS "
        f"({FALLBACK_BATCH_SIZE} and {ACCELERATOR_BATCH_SIZE} for a model without a card).",
    )
    read_batch_size: int | None = Field(
        None,
        ge=1,
        le=1024,
        description="Label reads per forward pass, sorted by length (reads sharing a system "
        "block). None: 1 on the CPU, where a read alone gives the same numbers to the last bit "
        "whatever else is scored; batch_size on an accelerator.",
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
        description="Compute the system block shared by a step's prompts once per model (decode loop and label reads).",
    )
    jump_forward: bool = Field(
        True,
        description="Take tokens the JSON constraint forces without a decode step each (loop only).",
    )
    lookup_tokens: int = Field(
        8,
        ge=0,
        le=32,
        description=(
            "Prompt lookup (loop only): feed up to this many tokens guessed from the row's "
            "own text (the model's answers quote their prompts) and keep those the model "
            "chooses itself, several tokens per forward pass; 0 turns it off. Greedy choices "
            "are unchanged."
        ),
    )

    def prompts_per_pass(self, device_type: str = "cpu", card: ModelCard | None = None) -> int:
        """``batch_size`` on a device of this type (``"cpu"``, ``"cuda:0"``, ...) for a model
        with this card (None: no card): the card's recommendation for the device when the
        settings name none."""
        if self.batch_size is not None:
            return self.batch_size
        if device_type.split(":")[0] == "cpu":
            return card.recommended_batch_size if card is not None else FALLBACK_BATCH_SIZE
        return (
            card.recommended_accelerator_batch_size if card is not None else ACCELERATOR_BATCH_SIZE
        )

    def reads_per_pass(self, device_type: str, card: ModelCard | None = None) -> int:
        """``read_batch_size`` on a device of this type (``"cpu"``, ``"cuda"``, ...)."""
        if self.read_batch_size is not None:
            return self.read_batch_size
        if device_type.split(":")[0] == "cpu":
            return 1
        return self.prompts_per_pass(device_type, card)

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


LOAD_OPTIONS = ("device", "dtype", "threads", "trust_remote_code", "allow_pickle")
"""The fields of :class:`JudgeConfig` that choose how weights are loaded."""


class JudgeConfig(BaseModel):
    """How a judge is built: the model, where and how it runs, and how it decodes.

    Built once where the user speaks (the CLI, a scorer factory, the local agent) and passed
    down whole: the backend table builds the judge from it (:func:`build_judge`), locally
    and on every Ray actor alike, so every option works on every backend and the scorers'
    modes resolve against the same model card everywhere. Frozen and hashable: judges are
    shared per configuration.

    Example:
        >>> JudgeConfig(model="smollm2-135m-instruct", dtype="float32").load_options["dtype"]
        'float32'
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str = Field(
        DEFAULT_MODEL, description="A model card name, a local HF model directory or a .gguf file."
    )
    backend: str = Field("transformers", description="A key of the backend table (BACKENDS).")
    device: Device = Field("auto", description="auto picks CUDA, then Apple MPS, then the CPU.")
    dtype: DType = Field(
        "auto", description="auto: bfloat16/float16 on accelerators, float32 on the CPU."
    )
    threads: int | None = Field(
        None, ge=1, description="CPU threads for torch (None: the physical cores)."
    )
    trust_remote_code: bool = Field(
        False, description="Run custom modelling code shipped in a model directory."
    )
    allow_pickle: bool = Field(False, description="Accept pickle (.bin/.pt) weights.")
    generation: GenerationSettings = Field(
        default_factory=GenerationSettings, description="Token budgets, batch size, decoder."
    )

    @classmethod
    def from_options(cls, model: str | JudgeConfig | None = None, **options: Any) -> JudgeConfig:
        """A configuration from flat keyword options: load options and generation settings.

        Args:
            model: a model reference, or a configuration to start from.
            **options: :data:`LOAD_OPTIONS`, ``backend``, and :class:`GenerationSettings`
                fields (``batch_size``, ``max_new_tokens_json``, ...).

        Raises:
            ConfigurationError: an unknown option name, or a value out of range.
        """
        base = model if isinstance(model, JudgeConfig) else cls(model=model or DEFAULT_MODEL)
        generation_fields = set(GenerationSettings.model_fields)
        unknown = set(options) - set(LOAD_OPTIONS) - {"backend"} - generation_fields
        if unknown:
            raise ConfigurationError(
                f"Unknown judge option(s) {sorted(unknown)}; load options are "
                f"{list(LOAD_OPTIONS)}, plus backend, and generation settings are "
                f"{sorted(generation_fields)}."
            )
        generation = {k: v for k, v in options.items() if k in generation_fields}
        top = {k: v for k, v in options.items() if k not in generation_fields}
        try:
            settings = GenerationSettings(**{**base.generation.model_dump(), **generation})
            return cls(**{**base.model_dump(exclude={"generation"}), **top}, generation=settings)
        except ValueError as error:
            raise ConfigurationError(f"Invalid judge option: {error}") from error

    @property
    def card(self) -> ModelCard | None:
        """The model card the model names (None for a directory or file of your own)."""
        return card_for(self.model)

    @property
    def load_options(self) -> dict[str, Any]:
        """The options that choose how weights are loaded, by name."""
        return {name: getattr(self, name) for name in LOAD_OPTIONS}


def cache_dir() -> Path:
    """The user cache folder: ``$OFFLINE_SCORER_CACHE``, else the XDG cache folder."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "offline-scorer"
