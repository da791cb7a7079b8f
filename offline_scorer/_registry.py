"""Built-in scorers by id, and judges shared between scorers of one process."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from offline_scorer._exceptions import UnknownScorerError
from offline_scorer._judge import TransformersJudge

_JUDGES: dict[tuple[Any, ...], TransformersJudge] = {}
_LOCK = threading.Lock()

_SETTINGS_FIELDS = (
    "max_new_tokens_json",
    "max_new_tokens_text",
    "max_string_chars",
    "max_string_tokens",
    "max_sentences_text",
    "batch_size",
)


def shared_judge(model: str, **options: Any) -> TransformersJudge:
    """One TransformersJudge per (model, options) in this process, so scorers share weights.

    Args:
        model: a model card name, HF model directory or .gguf file.
        **options: ``device``, ``dtype``, ``threads``, ``trust_remote_code``,
            ``allow_pickle`` and the generation settings ``batch_size``,
            ``max_new_tokens_json``, ``max_new_tokens_text``.
    """
    from offline_scorer._config import GenerationSettings

    key = (model, tuple(sorted(options.items())))
    with _LOCK:
        judge = _JUDGES.get(key)
        if judge is None:
            settings = GenerationSettings(
                **{k: v for k, v in options.items() if k in _SETTINGS_FIELDS}
            )
            rest = {k: v for k, v in options.items() if k not in _SETTINGS_FIELDS}
            judge = TransformersJudge(model, settings=settings, **rest)
            _JUDGES[key] = judge
        return judge


def _builders() -> dict[str, Callable[..., Any]]:
    from offline_scorer.scorers import (
        create_answer_relevancy_scorer,
        create_answer_similarity_scorer,
    )

    return {
        "answer-relevancy": create_answer_relevancy_scorer,
        "answer-similarity": create_answer_similarity_scorer,
    }


def scorer_ids() -> list[str]:
    """The ids of the built-in scorers (``answer-relevancy``, ``answer-similarity``)."""
    return sorted(_builders())


def get_scorer(scorer_id: str, **options: Any) -> Any:
    """Build a built-in scorer by id with options.

    The full ids (``answer-relevancy-scorer``) are accepted too.

    Raises:
        UnknownScorerError: no built-in scorer has that id; the message lists the known ids.
    """
    builders = _builders()
    key = scorer_id.removesuffix("-scorer")
    if key not in builders:
        raise UnknownScorerError(
            f"Unknown scorer '{scorer_id}'. Known scorers: {', '.join(sorted(builders))}."
        )
    return builders[key](**options)
