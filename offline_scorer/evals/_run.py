"""``run_evals``: items -> target -> scorers (batched) -> summary, thresholds and verdict."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal

from offline_scorer._exceptions import ConfigurationError
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
from offline_scorer.pipeline._scorer import Scorer


def run_evals(
    data: Any,
    scorers: Sequence[Scorer | str],
    target: Target | None = None,
    on_item_complete: ItemCallback | None = None,
    thresholds: Mapping[str, ThresholdSpec] | None = None,
    batch_size: int = 16,
    fail_fast: bool = False,
    progress: bool = True,
    *,
    fields: Fields | None = None,
    skip_invalid: bool = False,
    keep_items: bool = True,
    backend: Literal["local", "ray"] = "local",
    ray: Any = None,
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
        batch_size: items per batch.
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
            ``actors``, ``num_cpus``, ``num_gpus``, ``model``, ``device``, ``dtype``,
            ``output``, ``cache``, ``max_restarts``, ``max_task_retries`` ...).

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
    if backend == "ray":
        return _run_evals_on_ray(
            data,
            scorers,
            target,
            on_item_complete,
            thresholds,
            batch_size,
            fail_fast,
            progress,
            fields,
            skip_invalid,
            keep_items,
            ray,
        )
    if backend != "local":
        raise ConfigurationError(f"Unknown backend {backend!r}: use 'local' or 'ray'.")
    if ray is not None:
        raise ConfigurationError("ray= options need backend='ray'.")
    started = time.perf_counter()
    fields = fields or Fields()
    dataset = (
        data
        if isinstance(data, Dataset)
        else load_dataset(data, fields=fields, skip_invalid=skip_invalid)
    )
    built = build_scorers(scorers)
    limits = parse_thresholds(thresholds or {}, built)
    check_rows(
        built,
        dataset_facts(dataset),
        fields,
        answers_missing_outputs=target is not None,
        remedy="pass target= (a function or LocalAgent) to produce them",
    )
    if batch_size < 1:
        raise ConfigurationError("batch_size must be at least 1.")
    totals = Totals(built, limits)
    cache_before = cache_counts(built)
    bar = progress_bar(len(dataset), enabled=progress)
    try:
        scored = _scored_items(dataset, built, target, fail_fast, batch_size, bar)
        collected = collect(scored, totals, keep_items, on_item_complete)
    finally:
        bar.close()
    _count_cache(totals, cache_before, cache_counts(built))
    seconds = time.perf_counter() - started
    end = RunEnd(seconds, len(dataset), dataset.problems, collected.interrupted)
    return eval_result(totals, end, collected.items)


def _scored_items(
    dataset: Dataset,
    scorers: list[Scorer],
    target: Target | None,
    fail_fast: bool,
    batch_size: int,
    bar: ProgressBar,
) -> Iterator[EvalItem]:
    """The dataset's items, scored batch by batch as they are asked for."""
    for chunk in chunks(dataset.items, batch_size):
        done = score_chunk(chunk, scorers, target, fail_fast)
        bar.update(len(done))
        yield from done


def _count_cache(totals: Totals, before: CacheCounts | None, after: CacheCounts | None) -> None:
    """This run's cache hits and misses (a judge used in earlier runs counted those too)."""
    if after is None:
        return
    before = before or CacheCounts(0, 0)
    totals.add_cache(CacheCounts(after.hits - before.hits, after.misses - before.misses))


def _run_evals_on_ray(
    data: Any,
    scorers: Sequence[Scorer | str],
    target: Target | None,
    on_item_complete: ItemCallback | None,
    thresholds: Mapping[str, ThresholdSpec] | None,
    batch_size: int,
    fail_fast: bool,
    progress: bool,
    fields: Fields | None,
    skip_invalid: bool,
    keep_items: bool,
    options: Any,
) -> EvalResult:
    from offline_scorer.evals.ray._backend import run_evals_on_ray

    if target is not None:
        raise ConfigurationError(
            "backend='ray' scores answers already in the data and takes no target=; produce "
            "the outputs first, or use the local backend."
        )
    if fail_fast:
        raise ConfigurationError(
            "fail_fast=True needs the local backend: on Ray, failures are recorded per item."
        )
    return run_evals_on_ray(
        data,
        scorers,
        options=options,
        thresholds=thresholds,
        batch_size=batch_size,
        fields=fields,
        skip_invalid=skip_invalid,
        keep_items=keep_items,
        on_item_complete=on_item_complete,
        progress=progress,
    )
