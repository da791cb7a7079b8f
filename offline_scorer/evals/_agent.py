"""A local agent: answers questions with a local model, for ``run_evals`` targets."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from offline_scorer._text import extract_text
from offline_scorer.judges._cards import DEFAULT_MODEL
from offline_scorer.judges._settings import GenerationSettings
from offline_scorer.judges.transformers._judge import TransformersJudge

DEFAULT_SYSTEM_PROMPT = "You are a helpful assistant. Answer the question briefly and accurately."


class LocalAgent:
    """Answers each input with a local instruction model (plain greedy generation, batched).

    It never loads a second copy of a model: given ``judge`` (the scorers' judge, as the
    CLI does) it answers with the same weights; given ``model`` it uses the process's
    shared judge for that model (the one scorers built with ``model=`` use).

    Args:
        model: a model card name, HF model directory or .gguf file.
        judge: a :class:`TransformersJudge` whose loaded weights to answer with (its
            device, dtype and load options apply); overrides ``model``.
        system_prompt: the instruction sent before every question.
        max_new_tokens: the token budget of one answer.
        max_sentences: stop an answer after this many sentences (None: no limit).
        batch_size: questions per forward pass.
    """

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        judge: TransformersJudge | None = None,
        system_prompt: str = DEFAULT_SYSTEM_PROMPT,
        max_new_tokens: int = 128,
        max_sentences: int | None = 3,
        batch_size: int = 8,
    ):
        self.model = judge.model_id if judge is not None else model
        self._base = judge
        self.system_prompt = system_prompt
        self._settings = GenerationSettings(
            max_new_tokens_text=max_new_tokens,
            max_sentences_text=max_sentences,
            batch_size=batch_size,
        )
        self._generator: TransformersJudge | None = None

    def _judge(self) -> TransformersJudge:
        if self._generator is None:
            base = self._base
            if base is None:
                from offline_scorer.judges._factory import shared_judge

                shared = shared_judge(self.model)
                if not isinstance(shared, TransformersJudge):  # pragma: no cover - one backend
                    raise TypeError("LocalAgent needs a TransformersJudge.")
                base = shared
            self._generator = base.with_settings(self._settings)
        return self._generator

    def answer_batch(self, inputs: Sequence[Any]) -> list[Any]:
        """Answer many inputs; an item that failed gets its exception in the list."""
        prompts = [
            [
                {"role": "system", "content": self.system_prompt},
                {"role": "user", "content": extract_text(value, side="input")},
            ]
            for value in inputs
        ]
        return self._judge().generate_text(prompts, return_exceptions=True)

    def __call__(self, value: Any) -> Any:
        """Answer one input."""
        answer = self.answer_batch([value])[0]
        if isinstance(answer, BaseException):
            raise answer
        return answer
