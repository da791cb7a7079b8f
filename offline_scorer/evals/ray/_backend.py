"""``run_evals(..., backend="ray")``: the steps of a Ray run, from options to summary."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from offline_scorer.evals._config import RunConfig
from offline_scorer.evals._core import (
    Collected,
    ItemCallback,
    RunEnd,
    Totals,
    check_rows,
    collect,
    eval_result,
    parse_thresholds,
)
from offline_scorer.evals._types import EvalResult
from offline_scorer.evals.ray._actors import score_on_ray
from offline_scorer.evals.ray._cluster import ray_session
from offline_scorer.evals.ray._options import ActorPlan, RayOptions, actor_plan
from offline_scorer.evals.ray._results import SUMMARY_COLUMNS, result_items, write_rows
from offline_scorer.evals.ray._source import RaySource, RowCheck, ray_source, scan_rows
from offline_scorer.pipeline._scorer import Scorer

_REMEDY = (
    "produce the answers first: the Ray backend scores answers already in the data (a "
    "local run can use target=)"
)


def run_evals_on_ray(
    data: Any, scorers: list[Scorer], run: RunConfig, on_item_complete: ItemCallback | None
) -> EvalResult:
    """``run_evals`` on Ray: see :func:`offline_scorer.run_evals` for the arguments.

    Raises:
        ConfigurationError: bad options, a custom scorer, scorers on different judges, rows
            without output, two cache files, Ray missing or unreachable.
        DataError: invalid rows, no usable row, or no ground truth for a scorer that needs
            one.
        ModelLoadError: the model does not resolve on a worker (the message names it).
        OfflineScorerError: the Ray job failed for another reason.
    """
    started = time.perf_counter()
    options = run.ray or RayOptions()
    limits = parse_thresholds(run.thresholds, scorers)
    fields = run.fields
    totals = Totals(scorers, limits)
    # Checked before Ray starts: custom scorers, two caches, scorers on different judges.
    plan = actor_plan(options, scorers, fields, "json")
    check = RowCheck()
    collected = Collected([], interrupted=False)
    try:
        with ray_session(options.address, progress=run.progress):
            source = ray_source(data, fields, run.skip_invalid)
            check = scan_rows(source, fields, run.skip_invalid)
            check_rows(
                scorers, check.facts(fields), fields, answers_missing_outputs=False, remedy=_REMEDY
            )
            plan = replace(plan, row_format=source.row_format)
            full = run.keep_items or on_item_complete is not None
            rows = _result_rows(source, plan, options, run.batch_size, full)
            items = result_items(rows, full, totals.add_cache)
            collected = collect(items, totals, run.keep_items, on_item_complete)
    except KeyboardInterrupt:  # before any item finished (collect keeps the others)
        collected = Collected([], interrupted=True)
    end = RunEnd(time.perf_counter() - started, check.usable, check.problems, collected.interrupted)
    return eval_result(totals, end, collected.items)


def _result_rows(
    source: RaySource, plan: ActorPlan, options: RayOptions, batch_size: int, full: bool
) -> Any:
    """The result rows to read: written by the workers first when asked, else trimmed to
    what the summary needs when items are neither kept nor passed on."""
    rows = score_on_ray(source, plan, options, batch_size)
    if options.output:
        return write_rows(rows, options.output)
    return rows if full else rows.select_columns(SUMMARY_COLUMNS)
