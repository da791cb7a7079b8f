"""Ray itself: importing it, joining a cluster quietly, the actors' environment, errors."""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from offline_scorer._exceptions import (
    ConfigurationError,
    DataError,
    ModelLoadError,
    OfflineScorerError,
)
from offline_scorer.evals._progress import shows_progress

INSTALL_HINT = 'pip install "offline-scorer[ray]"'

# Environment the actors need to behave like the driver: offline switches and our own
# settings (cache folder, model); Ray forwards them with runtime_env.
_FORWARDED_PREFIXES = ("OFFLINE_SCORER_",)
_FORWARDED_NAMES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "RAY_USAGE_STATS_ENABLED")


def import_ray() -> Any:
    """Import Ray and Ray Data, or say how to install them."""
    try:
        import ray
        import ray.data
    except ImportError as error:
        raise ConfigurationError(
            f"backend='ray' needs Ray Data, which is not installed: run {INSTALL_HINT}."
        ) from error
    return ray


def connect(address: str | None) -> bool:
    """Join (or start) Ray with telemetry and dashboard off; True when we started it."""
    ray = import_ray()
    if ray.is_initialized():
        return False
    # Ray reads this when it starts: no usage statistics are collected or sent.
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    try:
        ray.init(
            address=address,
            include_dashboard=False,
            log_to_driver=True,
            configure_logging=False,
        )
    except (ConnectionError, RuntimeError, ValueError) as error:
        where = f"the Ray cluster at {address}" if address else "a local Ray instance"
        raise ConfigurationError(
            f"Could not connect to {where}: {error}. Check --ray-address (e.g. 'auto' on a "
            "node of the cluster) or leave it out to start Ray on this machine."
        ) from error
    return True


def data_context(ray: Any) -> Any:
    """Ray Data's current context (made on first use, quietly: see below)."""
    with warnings.catch_warnings():
        # Ray 2.60's own DataContext() sets deprecated fields of itself and warns about
        # them; nothing the user did, so they are not shown.
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        return ray.data.DataContext.get_current()


@contextmanager
def ray_session(address: str | None, *, progress: bool) -> Iterator[Any]:
    """Ray joined for one run, rows kept in input order, errors translated to ours.

    Ray Data's context is restored afterwards, and a Ray instance started here is shut
    down. Ray Data draws its progress bars only where ours would show (see
    :func:`~offline_scorer.evals._progress.shows_progress`).

    Raises:
        ConfigurationError: Ray is missing or unreachable.
        OfflineScorerError: the Ray job failed (our own error from a worker when it
            carries one: :func:`translate_ray_error`).
    """
    ray = import_ray()
    started_ray = connect(address)
    context = data_context(ray)
    saved = (context.execution_options.preserve_order, context.enable_progress_bars)
    # Rows come back in input order: the same item order as a local run.
    context.execution_options.preserve_order = True
    context.enable_progress_bars = shows_progress(progress)
    try:
        yield ray
    except OfflineScorerError:
        raise
    except Exception as error:
        raise from_ray_error(error) from error
    finally:
        context.execution_options.preserve_order, context.enable_progress_bars = saved
        if started_ray:
            ray.shutdown()


def forwarded_env(extra: Mapping[str, str]) -> dict[str, str]:
    """The driver's offline switches and OFFLINE_SCORER_* settings, plus ``extra``."""
    env = {
        name: value
        for name, value in os.environ.items()
        if name.startswith(_FORWARDED_PREFIXES) or name in _FORWARDED_NAMES
    }
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TRANSFORMERS_OFFLINE", "1")
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    env.update(extra)
    return env


def translate_ray_error(error: BaseException) -> OfflineScorerError | None:
    """Our own error raised inside a worker, found in a Ray exception's chain."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OfflineScorerError):
            return current
        cause = getattr(current, "cause", None)
        current = cause if isinstance(cause, BaseException) else current.__cause__
    # Ray hands worker errors back as text: the last one of ours is the outermost.
    text = str(error)
    for marker, kind in (
        ("ModelLoadError: ", ModelLoadError),
        ("DataError: ", DataError),
        ("ConfigurationError: ", ConfigurationError),
    ):
        if marker in text:
            message = text.rsplit(marker, 1)[1].strip().splitlines()[0]
            return kind(message)
    return None


def from_ray_error(error: Exception) -> OfflineScorerError:
    """Ours from a worker when the error carries one, else one line that says where to look."""
    ours = translate_ray_error(error)
    if ours is not None:
        return ours
    first = (str(error).strip().splitlines() or [""])[0]
    return OfflineScorerError(
        f"The Ray job failed: {type(error).__name__}: {first} (the worker logs above say "
        "more; rerun with the local backend to see the error in this process)."
    )
