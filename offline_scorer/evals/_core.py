"""What a local run and a Ray run share: scorers, thresholds, row checks, scoring, totals.

``run_evals`` (``_run.py``) and the Ray backend (``ray/``) both build their scorers, parse
their thresholds and refuse unscorable rows here, score batches with :func:`score_chunk`
(the Ray actors call it on their batches) and fold finished items into :class:`Totals`,
so both give the same summary for the same rows.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from itertools import islice
from typing import Any, Literal, NamedTuple

from offline_scorer._exceptions import ConfigurationError, DataError, ScorerRunError
from offline_scorer._text import has_ground_truth
from offline_scorer.evals._agent import LocalAgent
from offline_scorer.evals._data import MISSING, DataItem, Dataset, Fields
from offline_scorer.evals._types import (
    EvalItem,
    EvalResult,
    EvalSummary,
    RowProblem,
    ScorerSummary,
    Threshold,
)
from offline_scorer.pipeline._results import ScoreResult
from offline_scorer.pipeline._scorer import Scorer
from offline_scorer.scorers._registry import get_scorer, scorer_info

ThresholdSpec = float | tuple[float | None, float | None] | Threshold | Mapping[str, float]
"""A minimum mean, ``(min, max)`` bounds, a :class:`Threshold` or its fields as a dict."""

Target = Callable[[Any], Any] | LocalAgent
"""What produces the outputs of rows that carry none."""

ItemCallback = Callable[[EvalItem, Any, dict[str, ScoreResult]], None]
"""Called with each finished item, its output and its results by scorer id."""


# --------------------------------------------------------------------------- scorers


def build_scorers(scorers: Sequence[Scorer | str]) -> list[Scorer]:
    """Scorer objects, built-in ids built by the registry; each scorer once.

    Raises:
        ConfigurationError: no scorers, or one scorer id twice.
        UnknownScorerError: an id that no built-in scorer has.
    """

    if not scorers:
        raise ConfigurationError("run_evals needs at least one scorer.")
    built = [get_scorer(s) if isinstance(s, str) else s for s in scorers]
    ids = [scorer.id for scorer in built]
    if len(set(ids)) != len(ids):
        raise ConfigurationError(f"Each scorer may appear once; got {ids}.")
    return built


def shown_id(scorer: Scorer) -> str:
    """The id a person types for a scorer: the short id of a built-in one."""

    info = scorer_info(scorer.id)
    return info.short_id if info is not None and info.id == scorer.id else scorer.id


def scale_of(scorer: Scorer) -> float:
    """The scorer's maximum score (its ``scale`` option, 1 without one)."""
    return float(scorer.options_dict().get("scale", 1))


# --------------------------------------------------------------------------- thresholds


def parse_thresholds(
    thresholds: Mapping[str, ThresholdSpec] | Iterable[str], scorers: Sequence[Scorer]
) -> dict[str, Threshold]:
    """Thresholds as :class:`Threshold` per full scorer id, checked against the scorers.

    Args:
        thresholds: per scorer id (short or full), a :data:`ThresholdSpec`; or texts
            ``SCORER=MIN`` / ``SCORER=MIN..MAX`` (either bound may be left out), as the
            command line's ``--threshold`` takes them.
        scorers: the scorers of the run.

    Returns:
        The bounds per full scorer id (a later text for the same scorer wins).

    Raises:
        ConfigurationError: a text that does not parse, a scorer that is not in the run, a
            bound outside ``0..scale`` or not finite, or a minimum above the maximum.

    Example:
        >>> parse_thresholds(["length=0.2..0.9"], [create_scorer(id="length", generate_score=len)])  # doctest: +SKIP
        {'length': Threshold(minimum=0.2, maximum=0.9)}
    """
    if isinstance(thresholds, Mapping):
        pairs = [(key, _to_threshold(key, spec)) for key, spec in thresholds.items()]
    else:
        texts = [thresholds] if isinstance(thresholds, str) else thresholds
        pairs = [parse_threshold_text(text) for text in texts]
    by_id = {scorer.id: scorer for scorer in scorers}
    limits: dict[str, Threshold] = {}
    for key, limit in pairs:
        scorer = _scorer_named(key, by_id)
        if scorer is None:
            raise ConfigurationError(
                f"Threshold for '{key}', which is not among the scorers ({', '.join(by_id)})."
            )
        _check_bounds(key, limit, scale_of(scorer))
        limits[scorer.id] = limit
    return limits


def _scorer_named(key: str, by_id: Mapping[str, Scorer]) -> Scorer | None:
    """The scorer of the run that ``key`` names: its id, or a built-in scorer's short id."""

    if key in by_id:
        return by_id[key]
    info = scorer_info(key)
    return by_id.get(info.id) if info is not None else None


def parse_threshold_text(text: str) -> tuple[str, Threshold]:
    """``id=0.7`` (a minimum) or ``id=0.2..0.9`` (bounds) as (scorer id, bounds).

    Raises:
        ConfigurationError: no ``=``, no scorer id, or a bound that is not a number.
    """
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise ConfigurationError(f"Threshold {text!r}: use SCORER=MIN or SCORER=MIN..MAX.")
    low, dots, high = value.partition("..")
    try:
        minimum = float(low) if low.strip() else None
        maximum = float(high) if dots and high.strip() else None
    except ValueError:
        raise ConfigurationError(f"Threshold {text!r}: bounds must be numbers.") from None
    return name.strip(), Threshold(minimum=minimum, maximum=maximum)


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


def _check_bounds(key: str, limit: Threshold, scale: float) -> None:
    for bound in (limit.minimum, limit.maximum):
        if bound is not None and not (math.isfinite(bound) and 0 <= bound <= scale):
            raise ConfigurationError(
                f"Threshold {bound} for '{key}' is outside 0..{scale:g} (the scorer's scale)."
            )
    if limit.minimum is not None and limit.maximum is not None and limit.minimum > limit.maximum:
        raise ConfigurationError(f"Threshold for '{key}': minimum is above maximum.")


# --------------------------------------------------------------------------- row checks


@dataclass(frozen=True)
class RowFacts:
    """What a pass over the rows found that decides whether the scorers can run at all."""

    without_output: Sequence[int | str]
    """Where the rows without an output are (line numbers, or ids on Ray)."""
    with_ground_truth: int
    """How many rows have a ground truth."""
    located_by: str = "lines"
    """What ``without_output`` holds, in words (``lines``, ``ids``)."""


def dataset_facts(dataset: Dataset) -> RowFacts:
    """The facts of a dataset: counted from its items when it holds them in a list.

    A :class:`Dataset` built by hand carries no counts; a lazy one (read again from its
    file) has the counts :func:`load_dataset` gathered while checking it.
    """
    if isinstance(dataset.items, list):
        return RowFacts(
            without_output=[item.line for item in dataset.items if not item.has_output],
            with_ground_truth=sum(has_ground_truth(item.ground_truth) for item in dataset.items),
        )
    return RowFacts(dataset.lines_without_output, dataset.rows_with_ground_truth)


def check_rows(
    scorers: Sequence[Scorer],
    facts: RowFacts,
    fields: Fields,
    *,
    answers_missing_outputs: bool,
    remedy: str,
) -> None:
    """Refuse, before any model loads, rows that the scorers cannot score.

    Args:
        scorers: the scorers of the run.
        facts: what the pass over the rows found.
        fields: the column names (shown in the messages).
        answers_missing_outputs: something (a target, an agent) produces missing outputs.
        remedy: how the caller's user gets outputs for such rows, ending the message.

    Raises:
        ConfigurationError: rows without an output, and nothing produces one.
        DataError: a scorer needs a ground truth and no row has one.
    """
    if facts.without_output and not answers_missing_outputs:
        shown = list(facts.without_output[:10])
        raise ConfigurationError(
            f"Rows without an output ({facts.located_by} {shown}) cannot be scored: add an "
            f"'{fields.output}' column, or {remedy}."
        )
    needing = [shown_id(scorer) for scorer in scorers if scorer.needs_ground_truth]
    if needing and facts.with_ground_truth == 0:
        raise DataError(
            f"{' and '.join(needing)} needs a ground truth, but no row has a "
            f"'{fields.ground_truth}' value (use --ground-truth-field to name the column)."
        )


# --------------------------------------------------------------------------- scoring


def chunks(items: Iterable[DataItem], size: int) -> Iterator[list[DataItem]]:
    """``items`` in lists of ``size`` (the last one shorter), read as they are needed."""
    iterator = iter(items)
    while chunk := list(islice(iterator, size)):
        yield chunk


def score_chunk(
    chunk: list[DataItem], scorers: Sequence[Scorer], target: Target | None, fail_fast: bool
) -> list[EvalItem]:
    """Produce the chunk's missing outputs, then run every scorer once over the chunk.

    Raises:
        ScorerRunError: with ``fail_fast``, the first failed target call or scorer run.
    """
    outputs = _produce_outputs(chunk, target)
    items = [_eval_item(item, out) for item, out in zip(chunk, outputs, strict=True)]
    if fail_fast:
        for item, out in zip(items, outputs, strict=True):
            if isinstance(out, BaseException):
                raise ScorerRunError(_target_error(item), step="target") from out
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


def _eval_item(item: DataItem, output: Any) -> EvalItem:
    failed = isinstance(output, BaseException)
    return EvalItem(
        index=item.index,
        item_id=item.item_id,
        input=item.input,
        output=None if failed else output,
        ground_truth=item.ground_truth,
        request_context=item.request_context,
        target_error=f"{type(output).__name__}: {output}" if failed else None,
    )


def _run_request(item: EvalItem, scorer: Scorer) -> dict[str, Any]:
    return {
        "input": item.input,
        "output": item.output,
        "ground_truth": item.ground_truth,
        "run_id": f"{item.item_id}/{scorer.id}",
        "request_context": item.request_context,
    }


def _target_error(item: EvalItem) -> str:
    return f"Scorer run failed: the target failed on item {item.item_id}: {item.target_error}"


def _target_failure(item: EvalItem, scorer: Scorer) -> ScoreResult:
    return ScoreResult(
        run_id=f"{item.item_id}/{scorer.id}",
        scorer_id=scorer.id,
        scorer_options=scorer.options_dict(),
        status="failed",
        failed_step="target",
        error=_target_error(item),
        input=item.input,
        ground_truth=item.ground_truth,
    )


def _produce_outputs(chunk: list[DataItem], target: Target | None) -> list[Any]:
    outputs: list[Any] = [item.output if item.has_output else MISSING for item in chunk]
    pending = [i for i, out in enumerate(outputs) if out is MISSING]
    if not pending:
        return outputs
    if target is None:  # check_rows refuses such rows first; this guards direct callers
        raise ConfigurationError("Rows without an output need a target that produces answers.")
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


# --------------------------------------------------------------------------- totals


@dataclass(frozen=True)
class CacheCounts:
    """Judge answers served from a result cache (hits) and generated by the model (misses)."""

    hits: int
    misses: int


def cache_counts(scorers: Sequence[Scorer]) -> CacheCounts | None:
    """The counts of the caching judges of ``scorers`` so far (None: no judge caches)."""
    judges = {id(s._judge): s._judge for s in scorers if s._judge is not None}
    cached = [j for j in judges.values() if hasattr(j, "hits") and hasattr(j, "misses")]
    if not cached:
        return None
    return CacheCounts(
        hits=sum(int(j.hits) for j in cached),  # type: ignore[attr-defined]
        misses=sum(int(j.misses) for j in cached),  # type: ignore[attr-defined]
    )


class Totals:
    """Per-scorer counts, sums and histograms, updated as items finish (flat memory)."""

    def __init__(self, scorers: Sequence[Scorer], thresholds: Mapping[str, Threshold]):
        self._thresholds = thresholds
        self._scales = {s.id: scale_of(s) for s in scorers}
        # Exact sums: the mean does not depend on the order items finish in (a Ray run
        # gets its rows in another order than a local run, and must give the same mean).
        self._sums = dict.fromkeys(self._scales, Fraction(0))
        self._counts = {s.id: {"scored": 0, "not_scorable": 0, "failed": 0} for s in scorers}
        self._histograms = {s.id: [0] * 10 for s in scorers}
        self._model: tuple[str | None, str | None] = (None, None)
        self._cache: CacheCounts | None = None

    def add(self, item: EvalItem) -> None:
        """Count one finished item's results."""
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

    def add_cache(self, counts: CacheCounts) -> None:
        """Count cache hits and misses (the summary then reports them)."""
        before = self._cache or CacheCounts(0, 0)
        self._cache = CacheCounts(before.hits + counts.hits, before.misses + counts.misses)

    def summary(self, seconds: float) -> EvalSummary:
        """The summary so far; ``total_items`` and the skipped rows are the caller's."""
        summaries = {scorer_id: self._scorer_summary(scorer_id) for scorer_id in self._counts}
        verdict: Literal["passed", "failed"] | None = None
        if self._thresholds:
            held = all(s.passed for s in summaries.values() if s.passed is not None)
            verdict = "passed" if held else "failed"
        return EvalSummary(
            total_items=0,
            scorers=summaries,
            verdict=verdict,
            model_id=self._model[0],
            model_fingerprint=self._model[1],
            seconds=seconds,
            cache_hits=None if self._cache is None else self._cache.hits,
            cache_misses=None if self._cache is None else self._cache.misses,
        )

    def _scorer_summary(self, scorer_id: str) -> ScorerSummary:
        counts = self._counts[scorer_id]
        scored = counts["scored"]
        mean = float(self._sums[scorer_id] / scored) if scored else None
        limit = self._thresholds.get(scorer_id)
        return ScorerSummary(
            scorer_id=scorer_id,
            mean=mean,
            scored=scored,
            not_scorable=counts["not_scorable"],
            failed=counts["failed"],
            threshold=limit,
            passed=None if limit is None else limit.accepts(mean),
            histogram=list(self._histograms[scorer_id]),
            scale=self._scales[scorer_id],
        )


class Collected(NamedTuple):
    """What :func:`collect` gathered."""

    items: list[EvalItem]
    """The finished items, when they are kept."""
    interrupted: bool
    """Whether Ctrl-C (or SIGTERM, in the CLI) stopped the run."""


def collect(
    items: Iterable[EvalItem],
    totals: Totals,
    keep_items: bool,
    on_item_complete: ItemCallback | None,
) -> Collected:
    """Fold finished items into ``totals`` as they come; Ctrl-C ends the run, not the result."""
    kept: list[EvalItem] = []
    try:
        for item in items:
            totals.add(item)
            if keep_items:
                kept.append(item)
            if on_item_complete is not None:
                on_item_complete(item, item.output, item.results)
    except KeyboardInterrupt:
        return Collected(kept, interrupted=True)
    return Collected(kept, interrupted=False)


@dataclass(frozen=True)
class RunEnd:
    """How a run ended: what the summary needs beyond the totals."""

    seconds: float
    total_items: int
    skipped_rows: Sequence[RowProblem]
    interrupted: bool


def eval_result(totals: Totals, end: RunEnd, items: list[EvalItem]) -> EvalResult:
    """The result of a run: means per scorer id, the summary and the kept items."""
    summary = totals.summary(end.seconds)
    summary.total_items = end.total_items
    summary.skipped_rows = list(end.skipped_rows)
    summary.interrupted = end.interrupted
    scores = {scorer_id: s.mean for scorer_id, s in summary.scorers.items()}
    return EvalResult(scores=scores, summary=summary, items=items)
