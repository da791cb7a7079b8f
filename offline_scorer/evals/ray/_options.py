"""What a Ray run is asked to do (:class:`RayOptions`), and the plan every actor receives."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from offline_scorer._exceptions import ConfigurationError
from offline_scorer.evals._data import Fields
from offline_scorer.judges._cards import DEFAULT_MODEL
from offline_scorer.judges._settings import Device, DType

if TYPE_CHECKING:
    from offline_scorer.pipeline._scorer import Scorer


class RayOptions(BaseModel):
    """How ``run_evals(..., backend="ray")`` runs on Ray.

    Attributes:
        address: the Ray cluster to join (``auto``, ``ray://host:10001`` or ``host:6379``);
            None starts a local Ray instance, or uses the one this process already started.
        actors: number of scoring actors, each holding one loaded judge.
        num_cpus: CPUs reserved per actor; torch uses that many threads in it.
        num_gpus: GPUs reserved per actor (1 on a GPU cluster: one model per GPU).
        model: model reference each actor loads; it must resolve on every worker.
        device: ``auto``, ``cpu``, ``cuda`` or ``mps``, as for a local judge.
        dtype: ``auto``, ``float32``, ``bfloat16`` or ``float16``.
        judge_settings: the judge's generation settings (fields of
            ``GenerationSettings``: ``batch_size``, ``max_new_tokens_json``,
            ``max_new_tokens_text`` ...); ``batch_size`` defaults to the ``batch_size``
            given to ``run_evals``.
        max_restarts: how often Ray restarts a dead actor (-1: without limit).
        max_task_retries: how often a batch whose actor died is retried (-1: without limit).
        output: a folder to write the result rows into, from the workers, as JSONL files
            (or Parquet files when the name ends with ``.parquet``). Kept rows are read back
            from it for the summary, so nothing is scored twice.
        cache: a result cache file (sqlite) every actor puts its judge behind, as
            ``CachedJudge`` does locally; hits and misses are summed into the summary.
            Scorers built on a ``CachedJudge`` give its file when this is None. Several
            actors on one machine share the file safely (write-ahead log, busy timeout).
            Each actor opens the path on its own node: on a cluster of several machines
            every node keeps its own cache there, unless the path is on a filesystem they
            share, and SQLite's write-ahead log does not work over network filesystems
            (NFS, SMB): keep the file on local disks, or run without a cache.
        judge_factory: builds the judge inside each actor instead of loading ``model``
            (any picklable function; used by tests and for custom judges).
        env: extra environment variables for the actors.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    address: str | None = None
    actors: int = Field(1, ge=1)
    num_cpus: float = Field(1.0, gt=0)
    num_gpus: float = Field(0.0, ge=0)
    model: str = DEFAULT_MODEL
    device: Device = "auto"
    dtype: DType = "auto"
    judge_settings: dict[str, Any] = Field(default_factory=dict)
    max_restarts: int = Field(-1, ge=-1)
    max_task_retries: int = Field(-1, ge=-1)
    output: str | None = None
    cache: str | None = None
    judge_factory: Callable[[], Any] | None = None
    env: dict[str, str] = Field(default_factory=dict)


@dataclass(frozen=True)
class ScorerSpec:
    """A built-in scorer as the actors rebuild it: id, options and language."""

    id: str
    options: dict[str, Any]
    language: str


@dataclass(frozen=True)
class ActorPlan:
    """Everything an actor needs to build its judge and scorers (sent to every worker)."""

    scorers: list[ScorerSpec]
    fields: Fields
    row_format: Literal["json", "table"]
    model: str
    device: Device
    dtype: DType
    judge_settings: dict[str, Any]
    threads: int
    judge_factory: Callable[[], Any] | None = None
    cache: str | None = None


def scorer_specs(scorers: Sequence[Scorer]) -> list[ScorerSpec]:
    """Built-in scorers as specs the actors can rebuild.

    Raises:
        ConfigurationError: a scorer is not built in (its steps cannot be rebuilt remotely).
    """
    from offline_scorer.scorers._registry import scorer_ids, scorer_info

    specs = []
    for scorer in scorers:
        info = scorer_info(scorer.id)
        # A custom scorer that took a built-in id would be rebuilt as the built-in one.
        if info is None or info.id != scorer.id or not isinstance(scorer.options, info.options):
            raise ConfigurationError(
                f"backend='ray' rebuilds each scorer on the actors from its id and options; "
                f"'{scorer.id}' is not a built-in scorer ({', '.join(scorer_ids())}). "
                "Score custom scorers with the local backend."
            )
        specs.append(ScorerSpec(scorer.id, scorer.options_dict(), scorer.language))
    return specs


def cache_file(options: RayOptions, scorers: Sequence[Scorer]) -> str | None:
    """The result cache every actor opens, as an absolute path (None: no cache).

    It is ``options.cache``, or the file of the ``CachedJudge`` the scorers were built with.

    Raises:
        ConfigurationError: two different cache files were asked for.
    """
    from offline_scorer.judges._cache import CachedJudge

    paths: set[str] = set()
    for scorer in scorers:
        judge: object = scorer._judge
        if isinstance(judge, CachedJudge):
            paths.add(os.path.abspath(judge.cache.path))
    if options.cache is not None:
        paths.add(os.path.abspath(options.cache))
    if len(paths) > 1:
        raise ConfigurationError(
            f"backend='ray' puts every actor behind one result cache, but {sorted(paths)} "
            "were asked for (ray={'cache': ...} and the scorers' CachedJudge): pass one."
        )
    return paths.pop() if paths else None


def actor_plan(
    options: RayOptions,
    specs: list[ScorerSpec],
    fields: Fields,
    row_format: Literal["json", "table"],
    batch_size: int,
    cache: str | None,
) -> ActorPlan:
    """The plan sent to every actor, its generation settings checked here, not remotely.

    Raises:
        ConfigurationError: ``judge_settings`` that ``GenerationSettings`` refuses.
    """
    return ActorPlan(
        scorers=specs,
        fields=fields,
        row_format=row_format,
        model=options.model,
        device=options.device,
        dtype=options.dtype,
        judge_settings=_judge_settings(options, batch_size),
        threads=max(1, int(options.num_cpus)),
        judge_factory=options.judge_factory,
        cache=cache,
    )


def _judge_settings(options: RayOptions, batch_size: int) -> dict[str, Any]:
    from offline_scorer.judges._settings import GenerationSettings

    chosen = {"batch_size": batch_size, **options.judge_settings}
    try:
        GenerationSettings(**chosen)
    except ValueError as error:
        raise ConfigurationError(f"Ray option judge_settings: {error}") from error
    return chosen
