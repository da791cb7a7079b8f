"""A 10,000-row dataset streams through run_evals with flat memory (no model needed).

The scorer asks a judge at two steps (a JSON answer, then a text reason), so everything a
judge keeps per call is inside the measurement; the judge is the scripted ``FakeJudge``
(public API), which keeps the same bounded call log as the real judges.

Memory is measured with tracemalloc (Python allocations, exact and repeatable), comparing
1,000 rows with 10,000 rows in the same test: flat means the peak does not grow with the
number of rows.
"""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest
from pydantic import BaseModel

from offline_scorer import PromptStep, StepContext, create_scorer, load_dataset, run_evals
from offline_scorer.judges._protocol import CALL_LOG_SIZE
from offline_scorer.testing import FakeJudge

BATCH = 16  # 1,000 rows already make more calls than the call log keeps


class WordCount(BaseModel):
    words: int


def _ask(ctx: StepContext) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": "Count the words of the answer."},
        {"role": "user", "content": ctx.output_text},
    ]


def _judged_scorer(judge: FakeJudge):  # type: ignore[no-untyped-def]
    """A custom scorer whose score and reason come from the judge."""
    return create_scorer(
        id="words",
        judge=judge,
        analyze=PromptStep(_ask, schema=WordCount),
        generate_score=lambda ctx: min(1.0, ctx.analyze_result["words"] / 40),
        generate_reason=PromptStep(_ask),
    )


def _write_rows(path: Path, count: int) -> Path:
    with path.open("w") as handle:
        for number in range(count):
            row = {
                "id": f"row-{number}",
                "input": f"Question {number}?",
                "output": "word " * (number % 40),
            }
            handle.write(json.dumps(row) + "\n")
    return path


def _peak_bytes(path: Path) -> tuple[int, int, float]:
    judge = FakeJudge(
        json={WordCount: lambda prompt, schema: {"words": len(prompt[-1]["content"].split())}},
        text="Counted.",
        keep_requests=False,  # the test's own record of requests would grow with the rows
    )
    scorer = _judged_scorer(judge)
    seen = 0

    def count(item, output, results):  # type: ignore[no-untyped-def]
        nonlocal seen
        seen += 1

    tracemalloc.start()
    try:
        dataset = load_dataset(path, lazy=True)
        result = run_evals(
            dataset,
            [scorer],
            on_item_complete=count,
            keep_items=False,
            batch_size=BATCH,
            progress=False,
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.items == [] and seen == result.summary.total_items
    # Every call is counted, but the judge remembers only the most recent ones.
    batches = -(-seen // BATCH)
    assert judge.usage_totals.calls == 2 * batches
    assert judge.usage_totals.prompts == 2 * seen
    assert len(judge.call_log) == CALL_LOG_SIZE
    return peak, seen, result.scores["words"] or 0.0


@pytest.mark.slow
def test_ten_thousand_rows_stream_with_flat_memory(tmp_path: Path) -> None:
    small_peak, small_count, _ = _peak_bytes(_write_rows(tmp_path / "small.jsonl", 1_000))
    big_peak, big_count, mean = _peak_bytes(_write_rows(tmp_path / "big.jsonl", 10_000))
    assert (small_count, big_count) == (1_000, 10_000)
    assert mean == pytest.approx(sum(min(1.0, (n % 40) / 40) for n in range(10_000)) / 10_000)
    # Ten times the rows, not ten times the memory: the peak is the batch in flight.
    assert big_peak < 1.5 * small_peak, (small_peak, big_peak)


def test_lazy_and_eager_datasets_give_the_same_items(tmp_path: Path) -> None:
    path = _write_rows(tmp_path / "rows.jsonl", 50)
    lazy = load_dataset(path, lazy=True)
    eager = load_dataset(path)
    assert len(lazy) == len(eager) == 50
    assert [(i.index, i.item_id, i.output) for i in lazy.items] == [
        (i.index, i.item_id, i.output) for i in eager.items
    ]
