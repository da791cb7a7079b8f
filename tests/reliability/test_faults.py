"""Faults: out-of-memory, a judge failing mid-batch, a model that will not load.

Out-of-memory cannot be provoked safely on a shared CPU machine, so the tests raise torch's
own OutOfMemoryError from the judge's forward pass (the one place a real OOM surfaces);
everything around it (splitting, retrying, the real generation) runs for real.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from test_judge_real import ITEMS, Food, prompt

from offline_scorer import (
    GenerationSettings,
    JudgeOutputError,
    TransformersJudge,
    create_answer_relevancy_scorer,
)


class _OutOfMemoryAbove(TransformersJudge):
    """Raises torch's OOM error for sub-batches larger than ``limit`` prompts."""

    def __init__(self, loaded: Any, limit: int):
        super().__init__(loaded, settings=GenerationSettings(batch_size=8))
        self.limit = limit
        self.sizes: list[int] = []

    def _forward(self, chunk: Any, budget: int, processor: Any) -> Any:
        self.sizes.append(len(chunk))
        if len(chunk) > self.limit:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return super()._forward(chunk, budget, processor)


@pytest.mark.slow
def test_out_of_memory_splits_the_batch_and_loses_nothing(judge: TransformersJudge) -> None:
    prompts = [prompt(item) for item in ITEMS]
    expected = judge.generate_json(prompts, Food)
    flaky = _OutOfMemoryAbove(judge.load(), limit=2)
    assert flaky.generate_json(prompts, Food) == expected
    assert flaky.sizes == [5, 2, 3, 1, 2]  # halves, down to what fits


@pytest.mark.slow
def test_out_of_memory_even_alone_fails_each_item_clearly(judge: TransformersJudge) -> None:
    hopeless = _OutOfMemoryAbove(judge.load(), limit=0)
    results = hopeless.generate_json(
        [prompt("banana"), prompt("carrot")], Food, return_exceptions=True
    )
    assert all(isinstance(r, JudgeOutputError) and "even alone" in str(r) for r in results)
    assert sorted(hopeless.sizes) == [1, 1, 2]


class _FailsOn(TransformersJudge):
    """Raises inside generation whenever a sub-batch holds a prompt containing ``marker``."""

    def __init__(self, loaded: Any, marker: str):
        super().__init__(loaded, settings=GenerationSettings(batch_size=1))
        self.marker = marker

    def _forward(self, chunk: Any, budget: int, processor: Any) -> Any:
        text = self.load().tokenizer.decode(chunk[0].token_ids)
        if self.marker in text:
            raise RuntimeError("simulated device failure")
        return super()._forward(chunk, budget, processor)


@pytest.mark.slow
def test_a_judge_failure_mid_batch_fails_only_that_run(judge: TransformersJudge) -> None:
    scorer = create_answer_relevancy_scorer(judge=_FailsOn(judge.load(), "Bananas"))
    results = scorer.run_batch(
        [
            {"input": "Who wrote Hamlet?", "output": "Shakespeare."},
            {"input": "Who wrote Hamlet?", "output": "Bananas are yellow."},
        ]
    )
    assert [r.status for r in results] == ["scored", "failed"]
    assert results[1].failed_step == "preprocess"
    assert "simulated device failure" in results[1].error


def test_model_load_failure_fails_every_run_with_a_clear_message(tmp_path: Any) -> None:
    missing = tmp_path / "model.gguf"
    scorer = create_answer_relevancy_scorer(judge=TransformersJudge(str(missing)))
    results = scorer.run_batch([{"input": "q", "output": "a"}, {"input": "q", "output": "b"}])
    assert all(r.status == "failed" and str(missing) in r.error for r in results)
    assert all(r.error.startswith("Scorer run failed:") for r in results)
