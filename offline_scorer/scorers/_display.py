"""How a scorer's step results are shown in a report: small tables of plain values.

A scorer registers a display function (``ScorerInfo.display``) that turns one
:class:`ScoreResult` into :class:`StepTable` s. The HTML report renders every table the same
way, so it never needs to know the shape of a scorer's step results.

Display functions are pure and total: a step result of an unexpected shape (a run that
failed half-way, a result file from another version) gives fewer tables, never an error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from offline_scorer.pipeline._results import ScoreResult

RowKind = Literal["ok", "warn", "bad"]
"""How a row reads at a glance: good, doubtful or bad."""


@dataclass(frozen=True)
class StepRow:
    """One row of a :class:`StepTable`."""

    cells: tuple[Any, ...]
    """One value per column: a string shows as text, None as a dash, anything else as JSON."""
    kind: RowKind | None = None
    """Colours the row (and its ``kind_column`` cell, shown as a badge)."""


@dataclass(frozen=True)
class StepTable:
    """A titled table of values taken from a run's step results."""

    heading: str
    """What the table shows (``statements and verdicts``)."""
    columns: tuple[str, ...]
    """The column headings."""
    rows: tuple[StepRow, ...] = ()
    """The rows; a table without rows shows "none"."""
    kind_column: int | None = None
    """The position of the column whose cells show as badges in the row's kind colour."""


def format_probabilities(value: Any) -> Any:
    """A ``{label: probability}`` mapping as ``yes 0.82 · unsure 0.10 · no 0.08``.

    Args:
        value: the ``probabilities`` field of a verdict or match (usually absent).

    Returns:
        The formatted text; None for None; any other shape unchanged (shown as JSON).
    """
    if not isinstance(value, Mapping) or not all(_is_number(p) for p in value.values()):
        return value
    return " · ".join(f"{label} {probability:.2f}" for label, probability in value.items())


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _field(value: Any, key: str) -> Any:
    """``value[key]`` when ``value`` is a mapping, else None."""
    return value.get(key) if isinstance(value, Mapping) else None


def _list_of(value: Any, kind: type) -> list[Any] | None:
    """``value`` when it is a list whose entries are all ``kind``, else None."""
    if isinstance(value, list) and all(isinstance(entry, kind) for entry in value):
        return value
    return None


def _has_probabilities(records: Sequence[Mapping[str, Any]]) -> bool:
    return any(record.get("probabilities") is not None for record in records)


# --------------------------------------------------------------------------- answer relevancy

_VERDICT_KINDS: dict[str, RowKind] = {"yes": "ok", "unsure": "warn", "no": "bad"}


def relevancy_tables(result: ScoreResult) -> list[StepTable]:
    """Each statement of the answer beside its verdict and the judge's reason.

    Args:
        result: an answer relevancy run.

    Returns:
        One table, or none when the run has no statements.
    """
    statements = _list_of(_field(result.preprocess_step_result, "statements"), str)
    if statements is None:
        return []
    verdicts = _list_of(_field(result.analyze_step_result, "results"), Mapping) or []
    probabilities = _has_probabilities(verdicts)
    # Read verdicts carry probabilities and no reason: no empty reason column for them.
    reasons = not probabilities or any(v.get("reason") for v in verdicts)
    rows = []
    for position, statement in enumerate(statements):
        # A run that failed at analyze still lists its statements, without verdicts.
        verdict = verdicts[position] if position < len(verdicts) else {}
        value = str(verdict.get("result", "—"))
        cells: tuple[Any, ...] = (position + 1, statement, value)
        if reasons:
            cells += (verdict.get("reason", ""),)
        if probabilities:
            cells += (format_probabilities(verdict.get("probabilities")),)
        rows.append(StepRow(cells, _VERDICT_KINDS.get(value.strip().lower())))
    columns: tuple[str, ...] = ("#", "statement", "verdict")
    if reasons:
        columns += ("reason",)
    if probabilities:
        columns += ("probabilities",)
    return [StepTable("statements and verdicts", columns, tuple(rows), kind_column=2)]


# --------------------------------------------------------------------------- answer similarity

_MATCH_KINDS: dict[str, RowKind] = {
    "exact": "ok",
    "semantic": "ok",
    "partial": "warn",
    "missing": "bad",
}
# (key in the analyze result, column heading)
_MATCH_COLUMNS = (
    ("ground_truth_unit", "ground-truth unit"),
    ("output_unit", "answer unit"),
    ("match_type", "match type"),
    ("explanation", "explanation"),
)
_CONTRADICTION_COLUMNS = (
    ("output_unit", "answer unit"),
    ("ground_truth_unit", "ground-truth unit"),
    ("explanation", "explanation"),
)
_UNIT_LISTS = (("ground_truth_units", "ground-truth units"), ("output_units", "answer units"))


def similarity_tables(result: ScoreResult) -> list[StepTable]:
    """The units of both texts, the unit matches, extra answer units and contradictions.

    Args:
        result: an answer similarity run.

    Returns:
        The tables the run's step results allow (none when it has neither).
    """
    tables = _references_table(result)
    tables += [
        _units_table(heading, units)
        for key, heading in _UNIT_LISTS
        if (units := _list_of(_field(result.preprocess_step_result, key), object)) is not None
    ]
    analysis = result.analyze_step_result
    matches = _list_of(_field(analysis, "matches"), Mapping)
    if matches is None:
        return tables
    tables.append(_matches_table(matches))
    extra = _list_of(_field(analysis, "extra_in_output"), object) or []
    tables.append(_units_table("extra units in the answer", extra))
    contradictions = _list_of(_field(analysis, "contradictions"), Mapping) or []
    tables.append(_records_table("contradictions", contradictions, _CONTRADICTION_COLUMNS, "bad"))
    return tables


def _references_table(result: ScoreResult) -> list[StepTable]:
    """With several references: each one's outcome, the one the steps below come from marked."""
    if not result.references:
        return []
    rows = tuple(
        StepRow(
            (
                "used" if position == result.reference_index else None,
                outcome.ground_truth,
                outcome.score,
                outcome.status if outcome.error is None else f"{outcome.status}: {outcome.error}",
            ),
            "ok" if position == result.reference_index else None,
        )
        for position, outcome in enumerate(result.references)
    )
    columns = ("", "reference", "score", "status")
    return [StepTable("references (the best one is used)", columns, rows, kind_column=0)]


def _units_table(heading: str, units: Sequence[Any]) -> StepTable:
    return StepTable(heading, ("unit",), tuple(StepRow((unit,)) for unit in units))


def _matches_table(matches: Sequence[Mapping[str, Any]]) -> StepTable:
    probabilities = _has_probabilities(matches)
    # Read matches carry probabilities and no explanation: no empty explanation column.
    explained = not probabilities or any(m.get("explanation") for m in matches)
    columns = _MATCH_COLUMNS if explained else _MATCH_COLUMNS[:-1]
    table = _records_table("unit matches", matches, columns)
    rows = []
    for row, match in zip(table.rows, matches):
        cells = row.cells
        if probabilities:
            cells += (format_probabilities(match.get("probabilities")),)
        rows.append(StepRow(cells, _MATCH_KINDS.get(str(match.get("match_type")))))
    headings = (*table.columns, "probabilities") if probabilities else table.columns
    return StepTable(table.heading, headings, tuple(rows), kind_column=2)


def _records_table(
    heading: str,
    records: Sequence[Mapping[str, Any]],
    columns: Sequence[tuple[str, str]],
    kind: RowKind | None = None,
) -> StepTable:
    """One row per record, one column per (key, heading) pair."""
    rows = tuple(StepRow(tuple(record.get(key) for key, _ in columns), kind) for record in records)
    return StepTable(heading, tuple(title for _, title in columns), rows)
