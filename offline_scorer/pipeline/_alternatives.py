"""Several acceptable references for one run: score against each, keep the best.

A scorer built with a ``references`` function (the answer similarity scorer is) asks it,
for each run, whether the run's ground truth is a set of alternatives (a list of accepted
answers, or one string of them). Such a run is expanded into one member per reference; the
members go through the scoring steps together with every other run of the batch (one judge
call per stage, as always), the best-scoring member wins, and only the winner gets a reason.
The run's result is the winner's, with ``reference_index`` naming it and ``references``
listing every reference's outcome.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from offline_scorer.pipeline._results import ReferenceOutcome, ScoreResult

References = Callable[[Any], "list[str] | None"]
"""Given a run's ground truth: its alternative references, or None when it is one reference."""


class _Member(Protocol):
    result: ScoreResult
    done: bool


@dataclass
class Group:
    """One caller run and the members it was expanded into."""

    position: int
    run: Any
    members: list[int]
    references: list[str] | None = None
    winner: int | None = None


def expand(
    runs: Sequence[Any], references: References | None
) -> tuple[list[tuple[int, Any]], list[Group]]:
    """Split runs with alternative references into one member per reference.

    Returns the members as (caller position, run mapping) and one group per caller run.
    """
    members: list[tuple[int, Any]] = []
    groups: list[Group] = []
    for position, run in enumerate(runs):
        alternatives = None
        if references is not None and isinstance(run, Mapping):
            try:
                alternatives = references(run.get("ground_truth"))
            except TypeError as error:
                raise TypeError(f"runs[{position}].{error}") from error
        if alternatives is None:
            groups.append(Group(position, run, [len(members)]))
            members.append((position, run))
            continue
        group = Group(position, run, [], list(alternatives))
        # No reference left (an empty list): one member without one, which the scorer
        # handles like any run without a ground truth.
        choices: list[str | None] = list(alternatives) or [None]
        for reference in choices:
            group.members.append(len(members))
            members.append((position, {**run, "ground_truth": reference}))
        groups.append(group)
    return members, groups


def drop_losers(groups: list[Group], states: Sequence[_Member]) -> None:
    """Keep only the best-scoring member of each group pending (for the reason step)."""
    for group in groups:
        if group.references is None:
            continue
        best = group.winner = _best(group, states)
        for index in group.members:
            if index != best and not states[index].done:
                states[index].done = True


def results(groups: list[Group], states: Sequence[_Member]) -> list[ScoreResult]:
    """One result per caller run: the winner's, naming every reference's outcome."""
    out: list[ScoreResult] = []
    for group in groups:
        if group.references is None:
            out.append(states[group.members[0]].result)
            continue
        best = group.winner if group.winner is not None else _best(group, states)
        chosen = states[best].result
        chosen.ground_truth = group.run.get("ground_truth")
        if group.references:
            chosen.reference_index = group.members.index(best)
            chosen.references = [
                _outcome(reference, states[index].result)
                for reference, index in zip(group.references, group.members, strict=True)
            ]
        out.append(chosen)
    return out


def _best(group: Group, states: Sequence[_Member]) -> int:
    """The member with the highest score (the earliest on ties), else the first member."""
    # A member still pending after the score step has its score; failed or not scorable
    # members have none.
    scored = [index for index in group.members if states[index].result.score is not None]
    if not scored:
        return group.members[0]
    return max(scored, key=lambda index: (states[index].result.score, -index))


def _outcome(reference: str, result: ScoreResult) -> ReferenceOutcome:
    scored = result.score is not None
    return ReferenceOutcome(
        ground_truth=reference,
        status="scored" if scored else result.status,
        score=result.score if scored else None,
        error=result.error or result.not_scorable_reason,
    )
