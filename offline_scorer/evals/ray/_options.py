"""What a Ray run is asked to do (:class:`RayOptions`), and the plan every actor receives."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from offline_scorer._exceptions import ConfigurationError
from offline_scorer.evals._data import Fields
from offline_scorer.judges._cache import CachedJudge
from offline_scorer.judges._settings import JudgeConfig
from offline_scorer.scorers._registry import scorer_ids, scorer_info

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

    address: str | None = Field(
        None,
        description="The Ray cluster to join (auto, ray://head:10001 or host:6379); "
        "default: start Ray here.",
    )
    actors: int = Field(1, ge=1, description="Scoring actors, one loaded judge each.")
    num_cpus: float = Field(1.0, gt=0, description="CPUs (torch threads) per actor.")
    num_gpus: float = Field(0.0, ge=0, description="GPUs per actor (1 on a GPU cluster).")
    max_restarts: int = Field(-1, ge=-1)
    max_task_retries: int = Field(-1, ge=-1)
    output: str | None = None
    cache: str | None = None
    judge_factory: Callable[[], Any] | None = None
    env: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _judge_options_travel_with_the_scorers(cls, values: Any) -> Any:
        moved = sorted(set(values) & _JUDGE_OPTIONS) if isinstance(values, Mapping) else []
        if moved:
            raise ValueError(
                f"{moved} are judge options: the actors build the judge the scorers were "
                "built with, so pass them to the scorers (get_scorer(id, model=..., "
                "device=..., dtype=...), or a JudgeConfig as model=)."
            )
        return values


# Options an earlier version took here; they now travel with the scorers' JudgeConfig.
_JUDGE_OPTIONS = {"model", "device", "dtype", "judge_settings"}


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
    judge: JudgeConfig | None
    """The judge every actor builds through the backend table (None: ``judge_factory``)."""
    threads: int
    judge_factory: Callable[[], Any] | None = None
    cache: str | None = None


def scorer_specs(scorers: Sequence[Scorer]) -> list[ScorerSpec]:
    """Built-in scorers as specs the actors can rebuild.

    Raises:
        ConfigurationError: a scorer is not built in (its steps cannot be rebuilt remotely).
    """

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


def judge_config_of(scorers: Sequence[Scorer], options: RayOptions) -> JudgeConfig | None:
    """The one judge configuration of ``scorers``, as every actor builds it.

    Each actor gets as many torch threads as CPUs it reserves, unless the configuration
    names a number.

    Raises:
        ConfigurationError: the scorers were built on different judges, or on a judge
            without a configuration (a replay or fake judge) and no ``judge_factory``.
    """
    if options.judge_factory is not None:
        return None
    configs = {scorer.judge_config for scorer in scorers}
    if None in configs:
        raise ConfigurationError(
            "backend='ray' rebuilds the scorers' judge on every actor from its JudgeConfig, "
            "but a scorer was built on a ready judge without one (a ReplayJudge or "
            "FakeJudge); build it with model=..., or pass ray={'judge_factory': ...}."
        )
    if len(configs) > 1:
        raise ConfigurationError(
            "backend='ray' loads one judge per actor, but the scorers were built on "
            f"{len(configs)} different judge configurations; build them with the same model "
            "and options."
        )
    (config,) = configs
    assert config is not None
    if config.threads is None:
        config = config.model_copy(update={"threads": max(1, int(options.num_cpus))})
    return config


def actor_plan(
    options: RayOptions,
    scorers: Sequence[Scorer],
    fields: Fields,
    row_format: Literal["json", "table"],
) -> ActorPlan:
    """The plan sent to every actor.

    Raises:
        ConfigurationError: a custom scorer, scorers on different judges, or two caches.
    """
    specs = scorer_specs(scorers)
    cache = cache_file(options, scorers)
    return ActorPlan(
        scorers=specs,
        fields=fields,
        row_format=row_format,
        judge=judge_config_of(scorers, options),
        threads=max(1, int(options.num_cpus)),
        judge_factory=options.judge_factory,
        cache=cache,
    )
