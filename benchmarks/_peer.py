"""The peer of ``throughput.py``: DeepEval's ``AnswerRelevancyMetric`` on our embedded model.

This is what a user would otherwise pick: DeepEval's metric with a custom judge written the
way DeepEval's custom-model guide shows (a ``DeepEvalBaseLLM`` subclass with ``load_model``,
``generate(prompt, schema)`` returning an instance of the pydantic schema, ``a_generate``
and ``get_model_name``; JSON confined by a constrained generator, here Outlines). The judge
wraps the very model and tokenizer that our own judge loads (SmolLM2-135M-Instruct, loaded
by ``offline_scorer.TransformersJudge().load()``, so the same weights, dtype and torch
threads), and decodes greedily with the same end-of-sequence ids as the naive way.

What the wrapper does per call: Outlines applies the model's chat template to DeepEval's
prompt (a user message, as ``outlines.from_transformers`` does for a plain string), and the
``outlines.Generator`` for the step's schema (built once per schema class and reused, the
generous reading of the guide, which builds its constraint per call) writes at most
``GenerationSettings().max_new_tokens_json`` tokens (768, our judge's default JSON budget).
The JSON is validated by the schema; invalid or truncated JSON raises, and the benchmark
counts that item as a failed row with the error's class.

It runs only in the peer venv ``.venv-peer`` (``make bench-peer`` makes it): DeepEval's
dependencies stay out of the project's venv. This module imports nothing heavy at import
time; DeepEval, Outlines and torch load inside :func:`child_deepeval`.

Telemetry and network: the child runs with :data:`PEER_ENV` (DeepEval's documented opt-outs
and the Hugging Face offline switches), without Confident AI keys, in a scratch folder that is
also ``DEEPEVAL_HOME`` (DeepEval writes ``.deepeval/`` state into the working folder), and
with outbound internet sockets refused and counted (``network_attempts`` in the result).
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from typing import Any

# DeepEval's opt-outs (telemetry, update checks, .env loading) and the offline switches.
PEER_ENV = {
    "DEEPEVAL_TELEMETRY_OPT_OUT": "1",
    # The deprecated, inverted alias: DeepEval turns telemetry off when either says so.
    "DEEPEVAL_TELEMETRY_ENABLED": "0",
    "DEEPEVAL_UPDATE_WARNING_OPT_IN": "0",
    "DEEPEVAL_DISABLE_DOTENV": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "DO_NOT_TRACK": "1",
}
# Any of these would make DeepEval upload results or traces to Confident AI.
DROPPED_ENV = ("CONFIDENT_API_KEY", "DEEPEVAL_API_KEY", "CONFIDENT_TRACE_FLUSH")
PEER_SCORERS = ("answer-relevancy",)


def peer_environment(scratch: str) -> dict[str, str]:
    """The environment of a peer child: ours, without upload keys, with the opt-outs."""
    env = {k: v for k, v in os.environ.items() if k not in DROPPED_ENV}
    return {**env, **PEER_ENV, "DEEPEVAL_HOME": scratch}


def refuse_network() -> list[str]:
    """Make every outbound internet connection fail; return the list the attempts go to."""
    attempts: list[str] = []
    internet = (socket.AF_INET, socket.AF_INET6)
    connect, connect_ex = socket.socket.connect, socket.socket.connect_ex

    def guarded(original: Callable[..., Any]) -> Callable[..., Any]:
        def call(self: socket.socket, address: Any) -> Any:
            if self.family in internet:
                attempts.append(repr(address))
                raise OSError(f"network refused by the benchmark: {address!r}")
            return original(self, address)

        return call

    socket.socket.connect = guarded(connect)  # type: ignore[method-assign]
    socket.socket.connect_ex = guarded(connect_ex)  # type: ignore[method-assign]
    return attempts


def outlines_judge(loaded: Any, max_new_tokens: int) -> Any:
    """A ``DeepEvalBaseLLM`` around a loaded model, its JSON confined by Outlines.

    Args:
        loaded: an ``offline_scorer`` ``LoadedModel`` (its ``.model`` and ``.tokenizer``).
        max_new_tokens: token budget of one JSON answer.

    Returns:
        The judge, ready for ``AnswerRelevancyMetric(model=...)``; it counts prompt and
        generated tokens in ``prompt_tokens`` / ``generated_tokens``.
    """
    import outlines
    from deepeval.models import DeepEvalBaseLLM
    from pydantic import BaseModel

    from offline_scorer.toolkit import eos_ids

    eos = eos_ids(loaded.model, loaded.tokenizer)
    options = {
        "max_new_tokens": max_new_tokens,
        "do_sample": False,
        "eos_token_id": eos,
        "pad_token_id": eos[0],
    }

    class OutlinesLocalJudge(DeepEvalBaseLLM):  # type: ignore[misc]
        def __init__(self) -> None:
            self.generators: dict[type[BaseModel], Any] = {}
            self.prompt_tokens = 0
            self.generated_tokens = 0
            super().__init__(model=loaded.model_id)

        def load_model(self) -> Any:
            return outlines.from_transformers(loaded.model, loaded.tokenizer)

        def generate(self, prompt: str, schema: type[BaseModel]) -> BaseModel:
            if schema not in self.generators:
                self.generators[schema] = outlines.Generator(self.model, schema)
            output = str(self.generators[schema](prompt, **options))
            self.prompt_tokens += self._tokens(self.model.type_adapter.format_input(prompt))
            self.generated_tokens += self._tokens(output)
            return schema.model_validate_json(output)

        async def a_generate(self, prompt: str, schema: type[BaseModel]) -> BaseModel:
            return self.generate(prompt, schema)

        def get_model_name(self) -> str:
            return f"{loaded.model_id} (local, Outlines JSON)"

        def _tokens(self, text: str) -> int:
            return len(loaded.tokenizer(text, add_special_tokens=False)["input_ids"])

    return OutlinesLocalJudge()


def child_deepeval(
    scorer_id: str, runs: list[dict[str, str]], warm_up: dict[str, str]
) -> dict[str, Any]:
    """Score ``runs`` with DeepEval's ``AnswerRelevancyMetric``; return the way's figures.

    An exception from ``metric.measure`` (invalid JSON, a schema violation …) makes that
    item a failed row; its class and the start of its message are kept in ``errors``.
    """
    if scorer_id not in PEER_SCORERS:
        raise ValueError(f"DeepEval has no peer of {scorer_id}")
    os.environ.update(PEER_ENV)  # already set by the parent; kept for a direct call
    attempts = refuse_network()
    started = time.perf_counter()
    from importlib.metadata import version

    from deepeval.metrics import AnswerRelevancyMetric
    from deepeval.test_case import LLMTestCase

    from benchmarks.throughput import bench_judge
    from offline_scorer import GenerationSettings

    settings = GenerationSettings()
    judge = outlines_judge(bench_judge(settings).load(), settings.max_new_tokens_json)
    metric = AnswerRelevancyMetric(
        model=judge, async_mode=False, include_reason=True, eval_mode="llm"
    )
    loaded_after = time.perf_counter() - started

    def measure(run: dict[str, str]) -> tuple[float | None, dict[str, str] | None]:
        case = LLMTestCase(input=run["input"], actual_output=run["output"])
        try:
            return float(metric.measure(case)), None
        except Exception as error:  # a failed row, whatever the cause
            return None, {"error": type(error).__name__, "message": str(error)[:300]}

    _, warm_error = measure(warm_up)  # compiles the three schemas; not timed
    judge.prompt_tokens = judge.generated_tokens = 0

    began = time.perf_counter()
    outcomes = [measure(run) for run in runs]
    seconds = time.perf_counter() - began

    errors = [{"item": i, **e} for i, (_, e) in enumerate(outcomes) if e is not None]
    return {
        "way": "deepeval",
        "scorer": scorer_id,
        "items": len(runs),
        "seconds": seconds,
        "load_seconds": loaded_after,
        "prompt_tokens": judge.prompt_tokens,
        "generated_tokens": judge.generated_tokens,
        "failed": len(errors),
        "errors": errors,
        "warm_up_error": warm_error,
        "scores": [score for score, _ in outcomes],
        "batch_size": 1,
        "max_new_tokens_json": settings.max_new_tokens_json,
        "network_attempts": attempts,
        "versions": {p: version(p) for p in ("deepeval", "outlines", "transformers", "torch")},
    }
