"""The progress bar of a run: tqdm on stderr, only where a person watches it."""

from __future__ import annotations

import sys
from typing import Any, Protocol

from tqdm import tqdm


class ProgressBar(Protocol):
    """The part of a tqdm bar a run uses."""

    def update(self, n: int = 1) -> Any:
        """Count ``n`` more finished items."""

    def close(self) -> None:
        """End the bar's line."""


def shows_progress(enabled: bool) -> bool:
    """Whether to draw progress: asked for, and stderr is a terminal (not a log or pipe)."""
    return enabled and sys.stderr is not None and sys.stderr.isatty()


def progress_bar(total: int, *, enabled: bool) -> ProgressBar:
    """A progress bar on stderr (items done, items/s, time left); silent unless it shows."""

    bar: ProgressBar = tqdm(
        total=total,
        unit="item",
        file=sys.stderr,
        disable=not shows_progress(enabled),
        dynamic_ncols=True,
    )
    return bar
