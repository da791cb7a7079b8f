"""The one place judges are built: one judge per (model, backend, settings) in a process.

Scorers, the local agent and the CLI all ask :func:`shared_judge`, so a model is loaded
once however many of them use it. A backend is a name in :data:`BACKENDS` mapping to a
builder; a new backend is one new sub-folder of ``judges/`` plus one line in that table.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from offline_scorer._exceptions import ConfigurationError
from offline_scorer.judges._cards import DEFAULT_MODEL
from offline_scorer.judges._protocol import Judge
from offline_scorer.judges._settings import GenerationSettings


def _transformers_judge(model: str, settings: GenerationSettings, **load: Any) -> Judge:
    from offline_scorer.judges.transformers import TransformersJudge

    return TransformersJudge(model, settings=settings, **load)


BACKENDS: dict[str, Callable[..., Judge]] = {
    "transformers": _transformers_judge,
}
"""Judge builders by backend name: ``builder(model, settings, **load_options) -> Judge``."""

LOAD_OPTIONS = ("device", "dtype", "threads", "trust_remote_code", "allow_pickle")
"""The options that choose how weights are loaded (the rest are generation settings)."""

_JUDGES: dict[tuple[Any, ...], Judge] = {}
_LOCK = threading.Lock()


def shared_judge(
    model: str | None = None, *, backend: str = "transformers", **options: Any
) -> Judge:
    """One judge per (model, backend, options) in this process, so users share weights.

    Args:
        model: a model card name, HF model directory or .gguf file (default: the
            embedded model).
        backend: a key of :data:`BACKENDS`.
        **options: load options (``device``, ``dtype``, ``threads``,
            ``trust_remote_code``, ``allow_pickle``) and :class:`GenerationSettings`
            fields (``batch_size``, ``max_new_tokens_json``, ...).

    Raises:
        ConfigurationError: an unknown backend or option name.
    """
    reference = model or DEFAULT_MODEL
    builder = BACKENDS.get(backend)
    if builder is None:
        raise ConfigurationError(
            f"Unknown judge backend {backend!r}; known backends: {', '.join(sorted(BACKENDS))}."
        )
    unknown = set(options) - set(LOAD_OPTIONS) - set(GenerationSettings.model_fields)
    if unknown:
        raise ConfigurationError(
            f"Unknown judge option(s) {sorted(unknown)}; load options are "
            f"{list(LOAD_OPTIONS)} and generation settings are "
            f"{sorted(GenerationSettings.model_fields)}."
        )
    key = (reference, backend, tuple(sorted(options.items())))
    with _LOCK:
        judge = _JUDGES.get(key)
        if judge is None:
            settings = GenerationSettings(
                **{k: v for k, v in options.items() if k in GenerationSettings.model_fields}
            )
            load = {k: v for k, v in options.items() if k in LOAD_OPTIONS}
            judge = builder(reference, settings, **load)
            _JUDGES[key] = judge
        return judge
