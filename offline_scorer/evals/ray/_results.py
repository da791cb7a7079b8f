"""The output of a Ray run: flat result rows, written by the workers and read back.

An actor returns one flat row per item and scorer (:data:`RESULT_COLUMNS`). The first row
of each batch also carries the batch's result-cache hits and misses
(:data:`CACHE_COLUMNS`; None on the other rows and without a cache), so the driver sums
them into the summary from the rows alone, even when they were written and read back.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from offline_scorer.evals._core import CacheCounts
from offline_scorer.evals._types import EvalItem
from offline_scorer.evals.ray._cluster import import_ray
from offline_scorer.evals.ray._source import IO_CPUS
from offline_scorer.pipeline._results import ScoreResult

if TYPE_CHECKING:
    import pyarrow

# The flat columns every scored row carries, in this order (also the Parquet schema).
RESULT_COLUMNS = (
    "item_id",
    "scorer_id",
    "status",
    "score",
    "reason",
    "error",
    "step_results",
    "model_id",
    "model_fingerprint",
    "result",
)

# Per batch, on its first row: judge answers served from the result cache, and generated.
CACHE_COLUMNS = ("cache_hits", "cache_misses")

# What the summary needs when items are not kept (the rest stays on the workers).
SUMMARY_COLUMNS = [
    "item_id",
    "scorer_id",
    "status",
    "score",
    "model_id",
    "model_fingerprint",
    *CACHE_COLUMNS,
]


def flat_row(item: EvalItem, result: ScoreResult) -> dict[str, Any]:
    """One output row: the columns of :data:`RESULT_COLUMNS` (cache columns left None)."""
    steps = {
        "preprocess": result.preprocess_step_result,
        "analyze": result.analyze_step_result,
        "stats": {name: stats.model_dump() for name, stats in result.steps.items()},
    }
    return {
        "item_id": item.item_id,
        "scorer_id": result.scorer_id,
        "status": result.status,
        "score": result.score,
        "reason": result.reason,
        "error": result.error,
        "step_results": json.dumps(steps, ensure_ascii=False),
        "model_id": result.model_id,
        "model_fingerprint": result.model_fingerprint,
        "result": result.model_dump_json(),
    }


def rows_table(rows: list[dict[str, Any]], cache: CacheCounts | None) -> pyarrow.Table:
    """One batch's rows as an arrow table with a fixed schema (an empty batch keeps it).

    ``cache`` (the batch's hits and misses) goes on the first row.
    """
    import pyarrow as pa

    if rows and cache is not None:
        rows[0] = {**rows[0], "cache_hits": cache.hits, "cache_misses": cache.misses}
    schema = pa.schema(
        [(name, pa.float64() if name == "score" else pa.string()) for name in RESULT_COLUMNS]
        + [(name, pa.int64()) for name in CACHE_COLUMNS]
    )
    return pa.Table.from_pylist(rows, schema=schema)


def write_rows(rows: Any, output: str) -> Any:
    """Write the result rows from the workers, then read them back (nothing reruns)."""
    ray = import_ray()
    path = os.path.abspath(output)
    with warnings.catch_warnings():
        # Ray 2.60 marks ray_remote_args deprecated, but writes take no num_cpus otherwise.
        warnings.filterwarnings("ignore", message=".*ray_remote_args.*deprecated")
        if output.endswith(".parquet"):
            rows.write_parquet(path, ray_remote_args={"num_cpus": IO_CPUS})
            return ray.data.read_parquet(path, num_cpus=IO_CPUS)
        rows.write_json(path, ray_remote_args={"num_cpus": IO_CPUS})
        # Read back as text lines, parsed by us: exactly the values that were written.
        return ray.data.read_text(path, num_cpus=IO_CPUS)


def result_items(
    rows: Any, keep_items: bool, count_cache: Callable[[CacheCounts], None]
) -> Iterator[EvalItem]:
    """Items rebuilt from result rows, in the order the rows come (one item's rows together).

    With ``keep_items`` False only what the summary needs is rebuilt (status, score, model).
    Each batch's cache hits and misses go to ``count_cache``.
    """
    current: EvalItem | None = None
    for row in _plain_rows(rows):
        if row.get("cache_hits") is not None:
            count_cache(CacheCounts(int(row["cache_hits"]), int(row["cache_misses"] or 0)))
        if current is None or row["item_id"] != current.item_id:
            if current is not None:
                yield current
            current = EvalItem(
                index=0 if current is None else current.index + 1, item_id=row["item_id"]
            )
        result = _result_of(row, keep_items)
        if keep_items and current.input is None:
            current.input, current.output = result.input, result.output
            current.ground_truth = result.ground_truth
            current.request_context = result.request_context
        current.results[result.scorer_id] = result
    if current is not None:
        yield current


def _plain_rows(rows: Any) -> Iterator[dict[str, Any]]:
    """Rows as dicts, whether they are arrow rows or JSON lines read back as text."""
    for batch in rows.iter_batches(batch_format="pyarrow", batch_size=1024):
        for line in batch.to_pylist():
            yield json.loads(line["text"]) if "text" in line else line


def _result_of(row: dict[str, Any], keep_items: bool) -> ScoreResult:
    if keep_items:
        return ScoreResult.model_validate_json(row["result"])
    return ScoreResult(
        run_id=f"{row['item_id']}/{row['scorer_id']}",
        scorer_id=row["scorer_id"],
        status=row["status"],
        score=row["score"],
        model_id=row["model_id"],
        model_fingerprint=row["model_fingerprint"],
    )
