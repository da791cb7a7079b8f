"""Answer similarity with read verdicts: matches from verdict probabilities.

Used by ``_answer_similarity.py`` when ``verdicts="read"``: from the card's fitted verdict
model (every reference unit against every answer unit) or from the judge's own label
probabilities (one label read per reference unit, against the whole answer).
"""

from __future__ import annotations

from typing import Any

from offline_scorer._text import ground_truth_text
from offline_scorer.pipeline._prompts import render_prompt
from offline_scorer.pipeline._steps import Parts, Skip, StepContext
from offline_scorer.scorers._features import token_f1
from offline_scorer.scorers._verdicts import SIMILARITY_LABELS, best_label, ordered

TEMPLATES = "answer-similarity"


def whole_reference(ground_truth: Any) -> str:
    """The reference as the whole-item read shows it: the text, or a list of alternative
    references joined with `` / `` (the alias notation of ``_split.aliases_of``)."""
    if isinstance(ground_truth, list) and all(isinstance(item, str) for item in ground_truth):
        return " / ".join(item.strip() for item in ground_truth if item.strip())
    return ground_truth_text(ground_truth) or ""


def analysis_from(
    points: dict[str, float],
    references: list[str],
    answers: list[str],
    table: list[list[dict[str, float]]],
) -> dict[str, Any]:
    """Matches from a table of probabilities (reference unit x answer unit).

    Each reference unit takes the answer unit with the most expected points; its match type
    is that pair's most probable label. Answer units whose most probable label is
    ``missing`` against every reference unit are extra information.
    """
    matches, used = [], set()
    for unit, row in zip(references, table, strict=True):
        if not row:
            probabilities = {label: float(label == "missing") for label in SIMILARITY_LABELS}
            matches.append(_match(unit, None, probabilities))
            continue
        expected = [sum(points[k] * p for k, p in cell.items()) for cell in row]
        best = max(range(len(row)), key=lambda j: (expected[j], -j))
        kind = best_label(row[best], SIMILARITY_LABELS)
        if kind != "missing":
            used.add(best)
        matches.append(_match(unit, None if kind == "missing" else answers[best], row[best]))
    extra = [
        answer
        for j, answer in enumerate(answers)
        if j not in used
        and all(best_label(row[j], SIMILARITY_LABELS) == "missing" for row in table if row)
    ]
    return {"matches": matches, "extra_in_output": extra, "contradictions": []}


def _match(unit: str, output_unit: str | None, probabilities: dict[str, float]) -> dict[str, Any]:
    kind = best_label(probabilities, SIMILARITY_LABELS) if output_unit is not None else "missing"
    return {
        "ground_truth_unit": unit,
        "output_unit": output_unit,
        "match_type": kind,
        "explanation": "",
        "probabilities": ordered(probabilities, SIMILARITY_LABELS),
    }


def render_label_reads(ctx: StepContext) -> Any:
    """One label-reading prompt per reference unit (the judge's own label probabilities)."""
    units = ctx.preprocess_result
    if not units["ground_truth_units"]:
        return Skip({"matches": [], "extra_in_output": [], "contradictions": []})
    prompts = [
        render_prompt(
            TEMPLATES, ctx.language, "verdict", {"output": ctx.output_text, "ground_truth_unit": u}
        )
        for u in units["ground_truth_units"]
    ]
    return Parts(prompts=prompts, merge=_merge_label_reads)


def _merge_label_reads(ctx: StepContext, parts: list[Any]) -> dict[str, Any]:
    units = ctx.preprocess_result
    answers = units["output_units"]
    table = [[dict(scores.probabilities) for _ in answers] if answers else [] for scores in parts]
    analysis = analysis_from(ctx.options.points(), units["ground_truth_units"], answers, table)
    # The judge read one label per reference unit: quote the closest answer unit.
    for match in analysis["matches"]:
        if match["output_unit"] is not None:
            match["output_unit"] = max(
                answers, key=lambda a: (token_f1(a, match["ground_truth_unit"]), -answers.index(a))
            )
    return analysis
