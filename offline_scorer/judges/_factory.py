"""The one place judges are built: the backend table, and one judge per configuration.

Everything that needs a judge (scorer factories, the local agent, the CLI, the Ray actors)
builds it from a :class:`JudgeConfig` through :func:`build_judge` or :func:`shared_judge`,
so a model is loaded once per process however many of them use it, and every option works
on every backend. A backend is a name in :data:`BACKENDS` mapping to a builder; a new
backend is one new sub-folder of ``judges/`` plus one line in that table.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from offline_scorer._exceptions import ConfigurationError
from offline_scorer.judges._protocol import Judge
from offline_scorer.judges._settings import JudgeConfig
from offline_scorer.judges.transformers import TransformersJudge


def _transformers_judge(config: JudgeConfig) -> Judge:

    return TransformersJudge.from_config(config)


BACKENDS: dict[str, Callable[[JudgeConfig], Judge]] = {
    "transformers": _transformers_judge,
}
"""Judge builders by backend name: ``builder(config) -> Judge`` (the model loads on first use)."""

_JUDGES: dict[JudgeConfig, Judge] = {}
_LOCK = threading.Lock()


def build_judge(config: JudgeConfig) -> Judge:
    """A new judge for ``config`` from the backend table (its model loads on first use).

    Raises:
        ConfigurationError: the configuration names an unknown backend.
    """
    builder = BACKENDS.get(config.backend)
    if builder is None:
        raise ConfigurationError(
            f"Unknown judge backend {config.backend!r}; known backends: "
            f"{', '.join(sorted(BACKENDS))}."
        )
    return builder(config)


def shared_judge(config: JudgeConfig | None = None) -> Judge:
    """One judge per configuration in this process, so its users share the weights.

    Raises:
        ConfigurationError: the configuration names an unknown backend.
    """
    config = config or JudgeConfig()
    with _LOCK:
        judge = _JUDGES.get(config)
        if judge is None:
            judge = _JUDGES[config] = build_judge(config)
        return judge


@dataclass(frozen=True)
class LazyJudge:
    """A judge not built yet: the process's shared judge for ``config``, on first call.

    Scorers built with a model reference hold one, so building a scorer never loads a
    model, and the configuration travels with the scorer (the Ray backend rebuilds the
    same judge on every actor from it).
    """

    config: JudgeConfig

    def __call__(self) -> Judge:
        return shared_judge(self.config)
