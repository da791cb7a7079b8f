"""``run_evals``: items -> target -> scorers (batched) -> summary, thresholds and verdict."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal

from offline_scorer._exceptions import ConfigurationError
from offline_scorer.evals._config import RunConfig
from offline_scorer.evals._core import (
    CacheCounts,
    ItemCallback,
    RunEnd,
    Target,
    ThresholdSpec,
    Totals,
    build_scorers,
    cache_counts,
    check_rows,
    chunks,
    collect,
    dataset_facts,
    eval_result,
    parse_thresholds,
    score_chunk,
)
from offline_scorer.evals._data import Dataset, Fields, load_dataset
from offline_scorer.evals._progress import ProgressBar, progress_bar
from offline_scorer.evals._types import EvalItem, EvalResult
from offline_scorer.evals.ray._backend import run_evals_on_ray
from offline_scorer.pipeline._scorer import Scorer


def run_evals(
    data: Any,
    scorers: Sequence[Scorer | str],
    target: Target | None = None,
    on_item_complete: ItemCallback | None = None,
    thresholds: Mapping[str, ThresholdSpec] | None = None,
    batch_size: int | None = None,
    fail_fast: bool | None = None,
    progress: bool | None = None,
    *,
    fields: Fields | None = None,
    skip_invalid: bool | None = None,
    keep_items: bool | None = None,
    backend: Literal["local", "ray"] | None = None,
    ray: Any = None,
    config: RunConfig | None = None,
) -> EvalResult:
    """Score a dataset with one or more scorers.

    For each batch of ``batch_size`` items: the target produces the outputs (items that
    carry an ``output`` keep it), then every scorer scores the batch with
    ``Scorer.run_batch`` (one judge call per stage), then ``on_item_complete(item, output,
    results)`` is called for each item.

    Args:
        data: a dataset path (JSONL, JSON, CSV), a list of dicts, a DataFrame, a
            ``datasets.Dataset``, or a :class:`Dataset` from :func:`load_dataset`.
        scorers: scorer objects, or built-in ids (``answer-relevancy``, ...).
        target: a callable ``input -> output``, a :class:`LocalAgent`, or None when every
            item carries its output.
        on_item_complete: called after each item is scored.
        thresholds: per scorer id, a minimum mean (float), ``(min, max)`` bounds, a
            :class:`Threshold` or ``{"minimum": ..., "maximum": ...}``; gives a verdict.
        batch_size: items per chunk (None here and below: ``RunConfig``'s default, which
            lives there only).
        fail_fast: stop at the first failed item (the reference's behaviour) by raising.
        progress: show a progress bar on stderr when it is a terminal.
        fields: column names for file and list data.
        skip_invalid: score the valid rows and report the invalid ones.
        keep_items: keep every item's results in the returned value. With False, memory
            stays flat whatever the dataset size: results reach you only through
            ``on_item_complete`` and the summary is computed as items finish.
        backend: ``local`` scores in this process; ``ray`` scores on a Ray cluster with a
            pool of actors, one judge each (needs ``pip install "offline-scorer[ray]"``).
            Files are then read with Ray Data readers (.jsonl, .csv, .parquet) and every
            row needs an id; scorers must be built-in; rows must carry their output
            (no ``target``); ``fail_fast`` is not available. Scores and the summary are
            the same as a local run's. Scorers built on a ``CachedJudge`` put every actor
            behind that judge's cache file (or name one: ``ray={"cache": path}``).
        ray: with ``backend="ray"``, a ``RayOptions`` or a dict of its fields (``address``,
            ``actors``, ``num_cpus``, ``num_gpus``, ``output``, ``cache``,
            ``max_restarts``, ``max_task_retries`` ...). The actors build the scorers'
            judge from the scorers' own :class:`JudgeConfig` (build the scorers with
            ``model=``), so a Ray run scores exactly like a local one.
        config: all of the above but ``data``, ``scorers``, ``target`` and
            ``on_item_complete`` as one :class:`RunConfig` (then pass none of them).

    Returns:
        Means per scorer id (over scored items, not rounded), the summary (counts, verdict)
        and every item's results. After Ctrl-C the finished items are returned with
        ``summary.interrupted`` set. With a ``CachedJudge``, the summary counts this run's
        cache hits and misses.

    Raises:
        DataError: bad or empty data, or no ground truth in any row for a scorer that needs
            one (before any model is loaded).
        ConfigurationError: no scorers, unknown scorer id, bad thresholds, or items without
            output and no target.
        ScorerRunError: with ``fail_fast``, the first failure.
        ModelLoadError: with ``backend="ray"``, the model does not resolve on a worker.

    Example:
        >>> result = run_evals("data.jsonl", ["answer-relevancy"], thresholds={"answer-relevancy": 0.7})  # doctest: +SKIP
        >>> result.summary.verdict  # doctest: +SKIP
        'passed'
    """
    run = RunConfig.merged(
        config,
        thresholds=thresholds,
        batch_size=batch_size,
        fail_fast=fail_fast,
        progress=progress,
        fields=fields,
        skip_invalid=skip_invalid,
        keep_items=keep_items,
        backend=backend,
        ray=ray,
    )
    built = build_scorers(scorers)
    if run.backend == "ray":
        _refuse_on_ray(target, run)
        return run_evals_on_ray(data, built, run, on_item_complete)
    if run.ray is not None:
        raise ConfigurationError("ray= options need backend='ray'.")
    return _run_locally(data, built, target, on_item_complete, run)


def _run_locally(
    data: Any,
    scorers: list[Scorer],
    target: Target | None,
    on_item_complete: ItemCallback | None,
    run: RunConfig,
) -> EvalResult:
    started = time.perf_counter()
    dataset = (
        data
        if isinstance(data, Dataset)
        else load_dataset(data, fields=run.fields, skip_invalid=run.skip_invalid)
    )
    limits = parse_thresholds(run.thresholds, scorers)
    check_rows(
        scorers,
        dataset_facts(dataset),
        run.fields,
        answers_missing_outputs=target is not None,
        remedy="pass target= (a function or LocalAgent) to produce them",
    )
    totals = Totals(scorers, limits)
    cache_before = cache_counts(scorers)
    bar = progress_bar(len(dataset), enabled=run.progress)
    try:
        scored = _scored_items(dataset, scorers, target, run, bar)
        collected = collect(scored, totals, run.keep_items, on_item_complete)
    finally:
        bar.close()
    _count_cache(totals, cache_before, cache_counts(scorers))
    seconds = time.perf_counter() - started
    end = RunEnd(seconds, len(dataset), dataset.problems, collected.interrupted)
    return eval_result(totals, end, collected.items)


def _scored_items(
    dataset: Dataset, scorers: list[Scorer], target: Target | None, run: RunConfig, bar: ProgressBar
) -> Iterator[EvalItem]:
    """The dataset's items, scored chunk by chunk as they are asked for."""
    for chunk in chunks(dataset.items, run.batch_size):
        done = score_chunk(chunk, scorers, target, run.fail_fast)
        bar.update(len(done))
        yield from done


def _count_cache(totals: Totals, before: CacheCounts | None, after: CacheCounts | None) -> None:
    """This run's cache hits and misses (a judge used in earlier runs counted those too)."""
    if after is None:
        return
    before = before or CacheCounts(0, 0)
    totals.add_cache(CacheCounts(after.hits - before.hits, after.misses - before.misses))


def _refuse_on_ray(target: Target | None, run: RunConfig) -> None:
    """What a Ray run cannot do, refused before Ray starts."""
    if target is not None:
        raise ConfigurationError(
            "backend='ray' scores answers already in the data and takes no target=; produce "
            "the outputs first, or use the local backend."
        )
    if run.fail_fast:
        raise ConfigurationError(
            "fail_fast=True needs the local backend: on Ray, failures are recorded per item."
        )
