"""A local agent: answers questions with a local model, for ``run_evals`` targets."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from offline_scorer._text import extract_text
from offline_scorer.judges._cards import DEFAULT_MODEL
from offline_scorer.judges._factory import shared_judge
from offline_scorer.judges._protocol import Judge
from offline_scorer.judges._settings import JudgeConfig

DEFAULT_SYSTEM_PROMPT = "You are a helpful assistant. Answer the question briefly and accurately."


class LocalAgent:
    """Answers each input with a local instruction model (plain greedy generation, batched).

    It never loads a second copy of a model: its judge is the backend table's judge for the
    same configuration with the agent's own token budgets, and judges that differ only in
    how they decode share the loaded weights.

    Args:
        model: a model card name, HF model directory or .gguf file, or a
            :class:`JudgeConfig` (its device, dtype and load options apply).
        judge: the scorers' judge, to answer with the same model and load options (as the
            CLI does); overrides ``model``. A judge built without a configuration (a
            replay or fake judge) answers as it is.
        system_prompt: the instruction sent before every question.
        max_new_tokens: the token budget of one answer.
        max_sentences: stop an answer after this many sentences (None: no limit).
        batch_size: questions per forward pass (None: the model card's recommendation).
    """

    def __init__(
        self,
        model: str | JudgeConfig = DEFAULT_MODEL,
        *,
        judge: Judge | None = None,
        system_prompt: str = DEFAULT_SYSTEM_PROMPT,
        max_new_tokens: int = 128,
        max_sentences: int | None = 3,
        batch_size: int | None = None,
    ):
        base = JudgeConfig.from_options(model) if judge is None else getattr(judge, "config", None)
        self.model = base.model if base is not None else judge.model_id  # type: ignore[union-attr]
        self.system_prompt = system_prompt
        self._ready: Judge | None = judge if base is None else None
        self._config = (
            None
            if base is None
            else JudgeConfig.from_options(
                base,
                max_new_tokens_text=max_new_tokens,
                max_sentences_text=max_sentences,
                batch_size=batch_size,
            )
        )

    def _judge(self) -> Judge:
        if self._ready is None:
            assert self._config is not None
            self._ready = shared_judge(self._config)
        return self._ready

    def answer_batch(self, inputs: Sequence[Any]) -> list[Any]:
        """Answer many inputs; an item that failed gets its exception in the list."""
        prompts = [
            [
                {"role": "system", "content": self.system_prompt},
                {"role": "user", "content": extract_text(value, side="input")},
            ]
            for value in inputs
        ]
        return [answer.outcome for answer in self._judge().generate_text(prompts)]

    def __call__(self, value: Any) -> Any:
        """Answer one input."""
        answer = self.answer_batch([value])[0]
        if isinstance(answer, BaseException):
            raise answer
        return answer
