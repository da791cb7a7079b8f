"""The supported API for the project's own benchmarks (``benchmarks/``) and tools (``tools/``).

Those scripts measure and fit the library's internals: the features behind the fitted
verdict models, the decode loop, the JSON constraint. Rather than reaching into private
modules, they import what they need from here, so a refactor of the package has one place
to keep working and one test (``tests/test_tools.py``) that says when a script goes around
it. User code should prefer the top-level ``offline_scorer`` API; the names below are
stable for the repository's own scripts, not promised to users.

Importing this module never imports torch, transformers or outlines (like ``import
offline_scorer``); the decode-loop names need them only when called.

Names, by what they serve:

* Verdict inputs and models (``tools/fit.py``): ``relevancy_inputs``, ``similarity_inputs``
  (the run-time inputs of one verdict a model names), ``RELEVANCY_INPUTS`` and
  ``SIMILARITY_INPUTS`` (the lexical inputs by name), ``LogisticModel``, ``ScorerModel``,
  ``ReadSpec``, ``Stamp`` (a verdict file's parts as the scorers read them),
  ``template_sha256`` (a shipped prompt's hash, for the stamp), ``best_label``,
  ``RELEVANCY_LABELS`` (the relevancy verdict labels, most relevant first),
  ``shared_embedder`` (the sentence embedder the inputs use), ``read_features`` (a judge's
  label read as inputs).
* Text units and lexical features (``tools/verdict_training.py``): ``split_answer``,
  ``split_reference``, ``aliases_of``, ``normalize_tokens``, ``content_tokens``,
  ``token_f1``, ``containment``, ``REFUSAL`` (the compiled pattern of refusal and error
  statements the scorers recognise).
* Score formulas: ``relevancy_score``, ``expected_relevancy_score``, ``similarity_score``,
  ``expected_similarity_score``, ``analysis_from``, ``AnswerSimilarityOptions``.
* Model cards (``benchmarks/obvious_pairs.py``): ``card_status`` (whether a card's weights
  are installed here, without loading them).
* Prompts: ``render_prompt``; ``use_prompt_folder`` (experiments: another template folder).
* Judge internals (``benchmarks/throughput.py``, ``_peer.py``, ``decode_speed.py``,
  ``profile_decode.py``): ``eos_ids``, ``join_prefill``, ``SentenceLimit``,
  ``parse_json_output``, ``schemas_per_prompt``, ``LoopRow``, ``loop_decode``,
  ``PerRowSchemaProcessor``, ``SchemaCompiler``, ``schema_text`` (a schema as the judge
  compiles it), ``unpack_bits`` (packed token masks, ``constraint_masks.py``).
* Loading (``benchmarks/gpu.py``, ``constraint_masks.py``): ``model_folder`` (a model's
  files as transformers reads them, a card's converted from its GGUF once),
  ``pick_device`` (the device ``device="auto"`` resolves to), ``quiet_transformers``
  (transformers' progress bars off for a block).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from offline_scorer.judges._cards import card_status, resolve_model
from offline_scorer.judges._keys import schema_text
from offline_scorer.judges._protocol import parse_json_output, schemas_per_prompt
from offline_scorer.judges.embeddings import shared_embedder
from offline_scorer.judges.transformers import _decoding
from offline_scorer.judges.transformers._constraint import (
    PerRowSchemaProcessor,
    SchemaCompiler,
    unpack_bits,
)
from offline_scorer.judges.transformers._decoding import _SentenceLimit as SentenceLimit
from offline_scorer.judges.transformers._gguf import _converted_gguf
from offline_scorer.judges.transformers._loading import pick_device as _pick_device
from offline_scorer.judges.transformers._loading import pick_dtype
from offline_scorer.judges.transformers._loop import Row as LoopRow
from offline_scorer.judges.transformers._loop import decode as loop_decode
from offline_scorer.judges.transformers._quiet import quiet_transformers
from offline_scorer.pipeline import _prompts
from offline_scorer.pipeline._prompts import render_prompt
from offline_scorer.scorers import AnswerSimilarityOptions, _features
from offline_scorer.scorers._answer_relevancy import expected_relevancy_score, relevancy_score
from offline_scorer.scorers._features import (
    _REFUSAL,
    RELEVANCY_INPUTS,
    SIMILARITY_INPUTS,
    containment,
    normalize_tokens,
)
from offline_scorer.scorers._judge_reads import read_features
from offline_scorer.scorers._similarity_read import analysis_from
from offline_scorer.scorers._similarity_score import expected_similarity_score, similarity_score
from offline_scorer.scorers._split import aliases_of, split_answer, split_reference
from offline_scorer.scorers._verdicts import (
    RELEVANCY_LABELS,
    LogisticModel,
    ReadSpec,
    ScorerModel,
    Stamp,
    best_label,
    relevancy_inputs,
    similarity_inputs,
    template_sha256,
)

__all__ = [
    "AnswerSimilarityOptions",
    "LogisticModel",
    "LoopRow",
    "PerRowSchemaProcessor",
    "REFUSAL",
    "RELEVANCY_INPUTS",
    "RELEVANCY_LABELS",
    "ReadSpec",
    "SIMILARITY_INPUTS",
    "SchemaCompiler",
    "ScorerModel",
    "SentenceLimit",
    "Stamp",
    "aliases_of",
    "analysis_from",
    "best_label",
    "card_status",
    "containment",
    "content_tokens",
    "eos_ids",
    "expected_relevancy_score",
    "expected_similarity_score",
    "join_prefill",
    "loop_decode",
    "model_folder",
    "normalize_tokens",
    "parse_json_output",
    "pick_device",
    "quiet_transformers",
    "read_features",
    "relevancy_inputs",
    "relevancy_score",
    "render_prompt",
    "schema_text",
    "schemas_per_prompt",
    "shared_embedder",
    "similarity_inputs",
    "similarity_score",
    "split_answer",
    "split_reference",
    "template_sha256",
    "token_f1",
    "unpack_bits",
    "use_prompt_folder",
]

REFUSAL = _REFUSAL
"""Refusal and error statements ("I cannot answer", "Error: ..."), as the scorers detect them."""


def eos_ids(model: Any, tokenizer: Any) -> list[int]:
    """The token ids that end a generated row, by the judge's own rule.

    Args:
        model: a loaded causal LM (its ``generation_config.eos_token_id``, one id or a list).
        tokenizer: its tokenizer (its ``eos_token_id`` is added when the config lacks it).

    Returns:
        The end-of-sequence ids, the configured ones first.
    """
    return _decoding._eos_ids(model, tokenizer)


def content_tokens(text: str) -> list[str]:
    """The content words of ``text`` as the verdict features count them.

    Normalised tokens (lower case, no punctuation, no articles), number words as digits,
    stop words dropped, common suffixes stripped.
    """
    return _features.content_tokens(text)


def token_f1(first: str, second: str) -> float:
    """Token-overlap F1 of two texts (bags of normalised tokens; 1.0 when both are empty)."""
    return _features.token_f1(first, second)


def join_prefill(prefill: str, continuation: str) -> str:
    """A free-text answer as the judge returns it: the forced start, then the model's text.

    Args:
        prefill: the start of the answer that the prompt fixed (may be empty).
        continuation: what the model wrote after it.

    Returns:
        Both joined, with one space between them unless either side already has one.
    """
    return _decoding._join_prefill(prefill, continuation)


def use_prompt_folder(folder: str | os.PathLike[str]) -> None:
    """Experiments only: render every built-in scorer's prompts from ``folder`` from now on.

    For the rest of the process, prompts whose step names no folder of its own come from
    ``folder`` (laid out like ``prompts/``: ``<scorer>/<language>/<step>.jinja``) instead
    of the shipped templates. Used by ``benchmarks/agreement.py --prompts``.

    Args:
        folder: an existing template folder.

    Raises:
        ConfigurationError: ``folder`` is not a folder.
    """
    chosen = _prompts.template_folder(folder)
    shipped = _prompts.template_folder

    def template_folder(custom: str | os.PathLike[str] | None = None) -> Any:
        return shipped(chosen if custom is None else custom)

    # render_prompt looks the folder up through this module-level function at each call.
    _prompts.template_folder = template_folder


def model_folder(reference: str) -> Path:
    """The folder of a model's files as transformers reads them (``config.json``, the
    tokenizer, the weights).

    Args:
        reference: a model card name, a local model directory or a ``.gguf`` file.

    Returns:
        A GGUF model's converted copy (converted once, in the dtype ``dtype="auto"`` picks
        for it on this CPU), or the directory itself.
    """
    resolved = resolve_model(reference)
    if resolved.kind != "gguf":
        return resolved.path
    recommended = resolved.card.recommended_dtype if resolved.card is not None else "auto"
    folder, _ = _converted_gguf(resolved, pick_dtype("auto", "cpu", recommended))
    return folder


def pick_device(device: str = "auto") -> str:
    """The device a judge with this ``device`` option runs on (``auto``: CUDA, then MPS,
    then the CPU); a forced device that is not here raises :class:`ModelLoadError`."""
    return _pick_device(device)  # type: ignore[arg-type]
