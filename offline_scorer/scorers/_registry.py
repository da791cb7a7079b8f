"""Built-in scorers by id: each scorer module registers itself here.

A registration says what the rest of the package needs to know about a scorer without
testing its id by string: how to build it, and whether its runs need a ground truth.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from offline_scorer._exceptions import UnknownScorerError

if TYPE_CHECKING:
    from offline_scorer.pipeline._results import ScoreResult
    from offline_scorer.scorers._display import StepTable


@dataclass(frozen=True)
class ScorerInfo:
    """What the registry knows about one built-in scorer."""

    id: str
    """The full id recorded in results (``answer-relevancy-scorer``)."""
    short_id: str
    """The id users type (``answer-relevancy``)."""
    factory: Callable[..., Any]
    """Builds the scorer from keyword options (its options, plus ``model``/``judge``)."""
    options: type[Any]
    """The scorer's options model (pydantic, unknown names rejected)."""
    display: Callable[[ScoreResult], list[StepTable]] | None = None
    """Turns a run's step results into tables for reports (None: reports show them as JSON)."""


_SCORERS: dict[str, ScorerInfo] = {}


def register_scorer(info: ScorerInfo) -> None:
    """Make a scorer buildable by id (called by each built-in scorer module)."""
    _SCORERS[info.short_id] = info


def _registered() -> dict[str, ScorerInfo]:
    # Importing the package imports every built-in scorer module, which registers it.
    import offline_scorer.scorers  # noqa: F401

    return _SCORERS


def scorer_info(scorer_id: str) -> ScorerInfo | None:
    """The registration of a built-in scorer id (short or full), or None."""
    return _registered().get(scorer_id.removesuffix("-scorer"))


def scorer_ids() -> list[str]:
    """The ids of the built-in scorers (``answer-relevancy``, ``answer-similarity``)."""
    return sorted(_registered())


def get_scorer(scorer_id: str, **options: Any) -> Any:
    """Build a built-in scorer by id with options.

    The full ids (``answer-relevancy-scorer``) are accepted too.

    Raises:
        UnknownScorerError: no built-in scorer has that id; the message lists the known ids.
    """
    info = scorer_info(scorer_id)
    if info is None:
        raise UnknownScorerError(
            f"Unknown scorer '{scorer_id}'. Known scorers: {', '.join(scorer_ids())}."
        )
    return info.factory(**options)
