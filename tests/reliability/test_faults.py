"""Faults: out-of-memory, a judge failing mid-batch, a model that will not load.

Pipeline-level faults are scripted with ``offline_scorer.testing.FakeJudge`` (public API, no
model): an exception given as a prompt's answer is that prompt's failure, as a real judge
reports it. The out-of-memory tests exercise the transformers judge's own retry logic on
the real model; only the device condition is simulated (see each test).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from test_judge_real import ITEMS, Food, prompt

from offline_scorer import (
    GenerationSettings,
    JudgeOutputError,
    TransformersJudge,
    create_answer_relevancy_scorer,
    run_evals,
)
from offline_scorer.judges import outcomes, values
from offline_scorer.testing import FakeJudge

# ----------------------------------------------------------------- out of memory (real model)


@pytest.fixture
def generate_sizes(judge: TransformersJudge) -> Iterator[Callable[[int], list[int]]]:
    """Make the loaded model's forward pass raise torch's OOM error above a batch size.

    Out-of-memory cannot be provoked safely on a shared CPU machine, so this mocks a
    device condition: the wrapper raises ``torch.OutOfMemoryError`` (what a GPU raises) when
    a pass has more than ``limit`` rows, and otherwise runs the real pass. It wraps the
    model object from transformers (an instance attribute, removed afterwards), not a
    method of ours, so it holds for our decode loop and for ``generate`` alike. Returns the
    batch sizes of the decodes that were tried (the first pass of each).
    """
    import weakref

    import torch

    loaded = judge.load()
    model = loaded.model
    real_forward = model.forward
    patch = pytest.MonkeyPatch()
    # The prompts' shared system block is computed once per model (a pass of one row);
    # compute it before the condition is installed, as any earlier call would have.
    first = judge._encode(0, prompt("banana"))
    loaded.prefixes.get(model, tuple(first.token_ids[: first.prefix]))

    def install(limit: int) -> list[int]:
        sizes: list[int] = []
        started: weakref.WeakSet[Any] = weakref.WeakSet()

        def forward(*args: Any, **kwargs: Any) -> Any:
            rows = int(kwargs["input_ids"].shape[0])
            cache = kwargs.get("cache", kwargs.get("past_key_values"))
            if cache is None or cache not in started:
                sizes.append(rows)
                if cache is not None:
                    started.add(cache)
            if rows > limit:
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
            return real_forward(*args, **kwargs)

        # The instance dict shadows the class's method; undo deletes the key again.
        patch.setitem(vars(model), "forward", forward)
        return sizes

    yield install
    patch.undo()


@pytest.mark.slow
def test_out_of_memory_splits_the_batch_and_loses_nothing(
    judge: TransformersJudge, generate_sizes: Callable[[int], list[int]]
) -> None:
    """A sub-batch that runs out of memory is retried in halves, down to what fits."""
    prompts = [prompt(item) for item in ITEMS]
    expected = values(judge.generate_json(prompts, Food))
    sizes = generate_sizes(2)
    flaky = TransformersJudge(judge.load(), settings=GenerationSettings(batch_size=8))
    assert values(flaky.generate_json(prompts, Food)) == expected
    assert sizes == [5, 2, 3, 1, 2]  # halves, down to what fits


@pytest.mark.slow
def test_out_of_memory_even_alone_fails_each_item_clearly(
    judge: TransformersJudge, generate_sizes: Callable[[int], list[int]]
) -> None:
    """When even one prompt does not fit, every prompt fails with a message that says so."""
    sizes = generate_sizes(0)
    hopeless = TransformersJudge(judge.load(), settings=GenerationSettings(batch_size=8))
    results = outcomes(hopeless.generate_json([prompt("banana"), prompt("carrot")], Food))
    assert all(isinstance(r, JudgeOutputError) and "even alone" in str(r) for r in results)
    assert sorted(sizes) == [1, 1, 2]


# ----------------------------------------------------------------- pipeline faults (no model)

# Lower case and without numbers: a statement no answer's fact check sends back to its source.
STATEMENT = {"statements": ["the author is shakespeare"]}
EXTRACTED = {**STATEMENT, "fact_fallbacks": 0}
VERDICTS = {"results": [{"result": "yes", "reason": "It answers the question."}]}


def relevancy_judge(**script: Any) -> FakeJudge:
    """A judge scripted for the relevancy scorer: one statement, one 'yes', a reason."""
    return FakeJudge(
        json={"Statements": STATEMENT, "Verdicts": VERDICTS}, **{"text": "Relevant.", **script}
    )


def test_a_judge_failure_mid_batch_fails_only_that_run() -> None:
    judge = relevancy_judge(rules=[("Bananas", RuntimeError("simulated device failure"))])
    scorer = create_answer_relevancy_scorer(judge=judge)
    results = scorer.run_batch(
        [
            {"input": "Who wrote Hamlet?", "output": "Shakespeare."},
            {"input": "Who wrote Hamlet?", "output": "Bananas are yellow."},
            {"input": "Who wrote Hamlet?", "output": "William Shakespeare."},
        ]
    )
    assert [r.status for r in results] == ["scored", "failed", "scored"]
    assert [r.score for r in results] == [1.0, None, 1.0]
    assert results[1].failed_step == "preprocess"
    assert "simulated device failure" in (results[1].error or "")
    # The failed run is not asked again in later stages; the others are, in one call each.
    assert [call.kind for call in judge.call_log] == ["json", "json", "text"]
    assert [len(call.items) for call in judge.call_log] == [3, 2, 2]


def test_a_failure_in_a_later_step_keeps_the_earlier_results() -> None:
    judge = relevancy_judge(rules=[("Bananas", JudgeOutputError("simulated: bad verdicts"))])
    scorer = create_answer_relevancy_scorer(judge=judge)
    (result,) = scorer.run_batch([{"input": "Bananas?", "output": "Shakespeare."}])
    assert result.status == "failed" and result.failed_step == "analyze"
    assert result.preprocess_step_result == EXTRACTED
    assert result.error is not None and result.error.startswith("Scorer run failed:")


def test_an_answer_that_does_not_fit_its_schema_fails_only_its_run() -> None:
    judge = relevancy_judge(rules=[("loop", {"statements": []})])  # min_length=1
    results = create_answer_relevancy_scorer(judge=judge).run_batch(
        [{"input": "q", "output": "a loop"}, {"input": "q", "output": "fine"}]
    )
    assert [r.status for r in results] == ["failed", "scored"]
    assert "does not match schema Statements" in (results[0].error or "")


def test_a_judge_that_raises_fails_every_run_of_the_stage_with_the_cause() -> None:
    def crash(prompt: Any) -> str:
        raise RuntimeError("simulated: the device went away")

    scorer = create_answer_relevancy_scorer(judge=relevancy_judge(text=crash))
    results = scorer.run_batch([{"input": "q", "output": "a"}, {"input": "q", "output": "b"}])
    assert all(r.status == "failed" and r.failed_step == "generate_reason" for r in results)
    assert all("the device went away" in (r.error or "") for r in results)
    assert all(r.preprocess_step_result == EXTRACTED for r in results)


def test_run_evals_counts_only_the_failed_item(tmp_path: Any) -> None:
    judge = relevancy_judge(rules=[("Bananas", RuntimeError("simulated device failure"))])
    rows = [
        {"id": "a", "input": "Who wrote Hamlet?", "output": "Shakespeare."},
        {"id": "b", "input": "Who wrote Hamlet?", "output": "Bananas."},
        {"id": "c", "input": "Who wrote Hamlet?", "output": "Shakespeare did."},
    ]
    result = run_evals(rows, [create_answer_relevancy_scorer(judge=judge)], progress=False)
    summary = result.summary.scorers["answer-relevancy-scorer"]
    assert (summary.scored, summary.failed) == (2, 1)
    assert result.scores["answer-relevancy-scorer"] == 1.0


def test_model_load_failure_fails_every_run_with_a_clear_message(tmp_path: Any) -> None:
    missing = tmp_path / "model.gguf"
    scorer = create_answer_relevancy_scorer(judge=TransformersJudge(str(missing)))
    results = scorer.run_batch([{"input": "q", "output": "a"}, {"input": "q", "output": "b"}])
    assert all(r.status == "failed" and str(missing) in (r.error or "") for r in results)
    assert all((r.error or "").startswith("Scorer run failed:") for r in results)
