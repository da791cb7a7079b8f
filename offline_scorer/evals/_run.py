"""``run_evals``: items -> target -> scorers (batched) -> summary, thresholds and verdict."""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from fractions import Fraction
from itertools import islice
from typing import Any, Literal

from offline_scorer._exceptions import ConfigurationError, ScorerRunError
from offline_scorer.evals._agent import LocalAgent
from offline_scorer.evals._data import MISSING, DataItem, Dataset, Fields, load_dataset
from offline_scorer.evals._types import EvalItem, EvalResult, EvalSummary, ScorerSummary, Threshold
from offline_scorer.pipeline._results import ScoreResult
from offline_scorer.pipeline._scorer import Scorer

ThresholdSpec = float | tuple[float | None, float | None] | Threshold | Mapping[str, float]
ItemCallback = Callable[[EvalItem, Any, dict[str, ScoreResult]], None]


def run_evals(
    data: Any,
    scorers: Sequence[Scorer | str],
    target: Callable[[Any], Any] | LocalAgent | None = None,
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
            the same as a local run's.
        ray: with ``backend="ray"``, a ``RayOptions`` or a dict of its fields (``address``,
            ``actors``, ``num_cpus``, ``num_gpus``, ``model``, ``device``, ``dtype``,
            ``output``, ``max_restarts``, ``max_task_retries`` ...).

    Returns:
        Means per scorer id (over scored items, not rounded), the summary (counts, verdict)
        and every item's results. After Ctrl-C the finished items are returned with
        ``summary.interrupted`` set.

    Raises:
        DataError: bad or empty data (before any model is loaded).
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
    dataset = (
        data
        if isinstance(data, Dataset)
        else load_dataset(data, fields=fields, skip_invalid=skip_invalid)
    )
    built = _build_scorers(scorers)
    limits = parse_thresholds(thresholds or {}, built)
    if target is None and dataset.lines_without_output:
        missing = dataset.lines_without_output[:10]
        raise ConfigurationError(
            f"Rows without an output (lines {missing}) need a target that produces answers: "
            "pass target= (a function or LocalAgent), or add an 'output' column."
        )
    if batch_size < 1:
        raise ConfigurationError("batch_size must be at least 1.")
    items: list[EvalItem] = []
    totals = _Totals(built, limits)
    bar = _Progress(len(dataset), enabled=progress)
    interrupted = False
    try:
        for chunk in _chunks(dataset.items, batch_size):
            done = _score_chunk(chunk, built, target, fail_fast)
            for item in done:
                totals.add(item)
                if keep_items:
                    items.append(item)
                if on_item_complete is not None:
                    on_item_complete(item, item.output, item.results)
            bar.advance(len(done))
    except KeyboardInterrupt:
        interrupted = True
    finally:
        bar.close()
    summary = totals.summary(time.perf_counter() - started)
    summary.total_items = len(dataset)
    summary.skipped_rows = list(dataset.problems)
    summary.interrupted = interrupted
    _add_cache_stats(summary, built)
    scores = {scorer_id: s.mean for scorer_id, s in summary.scorers.items()}
    return EvalResult(scores=scores, summary=summary, items=items)


def _run_evals_on_ray(
    data: Any,
    scorers: Sequence[Scorer | str],
    target: Callable[[Any], Any] | LocalAgent | None,
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


def _build_scorers(scorers: Sequence[Scorer | str]) -> list[Scorer]:
    from offline_scorer.scorers._registry import get_scorer

    if not scorers:
        raise ConfigurationError("run_evals needs at least one scorer.")
    built = [get_scorer(s) if isinstance(s, str) else s for s in scorers]
    ids = [scorer.id for scorer in built]
    if len(set(ids)) != len(ids):
        raise ConfigurationError(f"Each scorer may appear once; got {ids}.")
    return built


def parse_thresholds(
    thresholds: Mapping[str, ThresholdSpec], scorers: Sequence[Scorer]
) -> dict[str, Threshold]:
    """Normalize threshold specs to :class:`Threshold` per full scorer id, checking ranges.

    Raises:
        ConfigurationError: unknown scorer id, or a bound outside 0..scale or min > max.
    """
    by_id = {scorer.id: scorer for scorer in scorers}
    by_short = {scorer.id.removesuffix("-scorer"): scorer for scorer in scorers}
    limits: dict[str, Threshold] = {}
    for key, spec in thresholds.items():
        scorer = by_id.get(key) or by_short.get(key.removesuffix("-scorer"))
        if scorer is None:
            raise ConfigurationError(
                f"Threshold for '{key}', which is not among the scorers ({', '.join(by_id)})."
            )
        limit = _to_threshold(key, spec)
        scale = float(scorer.options_dict().get("scale", 1))
        for bound in (limit.minimum, limit.maximum):
            if bound is not None and not (math.isfinite(bound) and 0 <= bound <= scale):
                raise ConfigurationError(
                    f"Threshold {bound} for '{key}' is outside 0..{scale:g} (the scorer's scale)."
                )
        if (
            limit.minimum is not None
            and limit.maximum is not None
            and limit.minimum > limit.maximum
        ):
            raise ConfigurationError(f"Threshold for '{key}': minimum is above maximum.")
        limits[scorer.id] = limit
    return limits


def _to_threshold(key: str, spec: ThresholdSpec) -> Threshold:
    if isinstance(spec, Threshold):
        return spec
    if isinstance(spec, bool):
        raise ConfigurationError(f"Threshold for '{key}' must be a number, got {spec!r}.")
    if isinstance(spec, (int, float)):
        return Threshold(minimum=float(spec))
    if isinstance(spec, Mapping):
        return Threshold(**spec)
    if isinstance(spec, tuple) and len(spec) == 2:
        return Threshold(minimum=spec[0], maximum=spec[1])
    raise ConfigurationError(f"Threshold for '{key}' must be a number or (min, max), got {spec!r}.")


def _score_chunk(
    chunk: list[DataItem],
    scorers: list[Scorer],
    target: Callable[[Any], Any] | LocalAgent | None,
    fail_fast: bool,
) -> list[EvalItem]:
    outputs = _produce_outputs(chunk, target)
    items = [
        EvalItem(
            index=item.index,
            item_id=item.item_id,
            input=item.input,
            output=None if isinstance(out, BaseException) else out,
            ground_truth=item.ground_truth,
            request_context=item.request_context,
            target_error=f"{type(out).__name__}: {out}" if isinstance(out, BaseException) else None,
        )
        for item, out in zip(chunk, outputs, strict=True)
    ]
    if fail_fast:
        for item, out in zip(items, outputs, strict=True):
            if isinstance(out, BaseException):
                raise ScorerRunError(
                    f"Scorer run failed: the target failed on item {item.item_id}: {item.target_error}",
                    step="target",
                ) from out
    ready = [item for item in items if item.target_error is None]
    for scorer in scorers:
        runs = [_run_request(item, scorer) for item in ready]
        results = scorer.run_batch(runs) if runs else []
        for item, result in zip(ready, results, strict=True):
            item.results[scorer.id] = result
            if fail_fast and result.status == "failed":
                raise ScorerRunError(
                    result.error or "Scorer run failed", step=result.failed_step or "?"
                )
        for item in items:
            if item.target_error is not None:
                item.results[scorer.id] = _target_failure(item, scorer)
    return items


def _run_request(item: EvalItem, scorer: Scorer) -> dict[str, Any]:
    return {
        "input": item.input,
        "output": item.output,
        "ground_truth": item.ground_truth,
        "run_id": f"{item.item_id}/{scorer.id}",
        "request_context": item.request_context,
    }


def _target_failure(item: EvalItem, scorer: Scorer) -> ScoreResult:
    return ScoreResult(
        run_id=f"{item.item_id}/{scorer.id}",
        scorer_id=scorer.id,
        scorer_options=scorer.options_dict(),
        status="failed",
        failed_step="target",
        error=f"Scorer run failed: the target failed on item {item.item_id}: {item.target_error}",
        input=item.input,
        ground_truth=item.ground_truth,
    )


def _produce_outputs(
    chunk: list[DataItem], target: Callable[[Any], Any] | LocalAgent | None
) -> list[Any]:
    outputs: list[Any] = [item.output if item.has_output else MISSING for item in chunk]
    pending = [i for i, out in enumerate(outputs) if out is MISSING]
    if not pending:
        return outputs
    assert target is not None
    if isinstance(target, LocalAgent):
        answers = target.answer_batch([chunk[i].input for i in pending])
        for i, answer in zip(pending, answers, strict=True):
            outputs[i] = answer
        return outputs
    for i in pending:
        try:
            outputs[i] = target(chunk[i].input)
        except Exception as error:  # the item is recorded as failed, the others go on
            outputs[i] = error
    return outputs


def _chunks(items: Iterable[DataItem], size: int) -> Iterator[list[DataItem]]:
    iterator = iter(items)
    while chunk := list(islice(iterator, size)):
        yield chunk


class _Totals:
    """Per-scorer counts, sums and histograms, updated as items finish (flat memory)."""

    def __init__(self, scorers: Sequence[Scorer], thresholds: Mapping[str, Threshold]):
        self._scorers = list(scorers)
        self._thresholds = thresholds
        self._scales = {s.id: float(s.options_dict().get("scale", 1)) for s in scorers}
        # Exact sums: the mean does not depend on the order items finish in (a Ray run
        # gets its rows in another order than a local run, and must give the same mean).
        self._sums = dict.fromkeys(self._scales, Fraction(0))
        self._counts = {s.id: {"scored": 0, "not_scorable": 0, "failed": 0} for s in scorers}
        self._histograms = {s.id: [0] * 10 for s in scorers}
        self._model: tuple[str | None, str | None] = (None, None)

    def add(self, item: EvalItem) -> None:
        for scorer_id, result in item.results.items():
            if scorer_id not in self._counts:
                continue
            if result.status == "scored" and result.score is not None:
                self._counts[scorer_id]["scored"] += 1
                self._sums[scorer_id] += Fraction(result.score)
                bins = self._histograms[scorer_id]
                scale = self._scales[scorer_id]
                bins[min(len(bins) - 1, max(0, int(result.score / scale * len(bins))))] += 1
            else:
                self._counts[scorer_id][result.status] += 1
            if self._model == (None, None) and result.model_id:
                self._model = (result.model_id, result.model_fingerprint)

    def summary(self, seconds: float) -> EvalSummary:
        summaries = {}
        for scorer_id, counts in self._counts.items():
            scored = counts["scored"]
            mean = float(self._sums[scorer_id] / scored) if scored else None
            limit = self._thresholds.get(scorer_id)
            summaries[scorer_id] = ScorerSummary(
                scorer_id=scorer_id,
                mean=mean,
                scored=counts["scored"],
                not_scorable=counts["not_scorable"],
                failed=counts["failed"],
                threshold=limit,
                passed=None if limit is None else limit.accepts(mean),
                histogram=list(self._histograms[scorer_id]),
                scale=self._scales[scorer_id],
            )
        verdict: Literal["passed", "failed"] | None = None
        if self._thresholds:
            held = all(s.passed for s in summaries.values() if s.passed is not None)
            verdict = "passed" if held else "failed"
        return EvalSummary(
            total_items=0,  # set by the caller: rows in the dataset
            scorers=summaries,
            verdict=verdict,
            model_id=self._model[0],
            model_fingerprint=self._model[1],
            seconds=seconds,
        )


def _add_cache_stats(summary: EvalSummary, scorers: Sequence[Scorer]) -> None:
    judges = {id(s._judge): s._judge for s in scorers if s._judge is not None}
    cached = [j for j in judges.values() if hasattr(j, "hits") and hasattr(j, "misses")]
    if cached:
        summary.cache_hits = sum(j.hits for j in cached)  # type: ignore[attr-defined]
        summary.cache_misses = sum(j.misses for j in cached)  # type: ignore[attr-defined]


class _Progress:
    """A one-line progress bar on stderr: items done, items/s, ETA. Quiet when not a TTY."""

    def __init__(self, total: int, *, enabled: bool):
        self.total = total
        self.done = 0
        self.started = time.perf_counter()
        self.enabled = enabled and sys.stderr.isatty()

    def advance(self, count: int) -> None:
        self.done += count
        if not self.enabled:
            return
        elapsed = time.perf_counter() - self.started
        rate = self.done / elapsed if elapsed > 0 else 0.0
        eta = (self.total - self.done) / rate if rate > 0 else float("inf")
        width = 30
        filled = int(width * self.done / max(1, self.total))
        eta_text = f"{eta:5.0f}s" if math.isfinite(eta) else "   ?s"
        sys.stderr.write(
            f"\r[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} "
            f"{rate:5.2f} items/s ETA {eta_text}"
        )
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")
