"""Built-in scorers by id: one table, above the scorer modules (which know nothing of it).

A registration says what the rest of the package needs to know about a scorer without
testing its id by string: how to build it, and whether its runs need a ground truth.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from offline_scorer._exceptions import UnknownScorerError
from offline_scorer.scorers._answer_relevancy import RELEVANCY, create_answer_relevancy_scorer
from offline_scorer.scorers._answer_similarity import SIMILARITY, create_answer_similarity_scorer
from offline_scorer.scorers._display import relevancy_tables, similarity_tables

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


_SCORERS: dict[str, ScorerInfo] = {
    info.short_id: info
    for info in (
        ScorerInfo(
            id=RELEVANCY.id,
            short_id="answer-relevancy",
            factory=create_answer_relevancy_scorer,
            options=RELEVANCY.options,
            display=relevancy_tables,
        ),
        ScorerInfo(
            id=SIMILARITY.id,
            short_id="answer-similarity",
            factory=create_answer_similarity_scorer,
            options=SIMILARITY.options,
            display=similarity_tables,
        ),
    )
}


def scorer_info(scorer_id: str) -> ScorerInfo | None:
    """The registration of a built-in scorer id (short or full), or None."""
    return _SCORERS.get(scorer_id.removesuffix("-scorer"))


def scorer_ids() -> list[str]:
    """The ids of the built-in scorers (``answer-relevancy``, ``answer-similarity``)."""
    return sorted(_SCORERS)


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
