"""Answer similarity: how closely an answer matches a ground-truth reference answer.

Pipeline: preprocess breaks both texts into semantic units; analyze matches every
ground-truth unit to the answer (exact / semantic / partial / missing) and lists extra
answer units and contradictions; the score follows the reference formula (see
:func:`similarity_score`); a short reason explains it.

With the embedded card (``scorers/_modes.py``) both texts are split into units, each
reference unit's match is read from the fitted verdict model against every answer unit
(the answer unit with the most expected points wins), and the score is the formula over
the match probabilities. Read verdicts list no contradictions (the verdict model has no
contradiction class yet); extra answer units are those the model matches to nothing.
"""

from __future__ import annotations

from functools import lru_cache, partial
from typing import Any, Literal, Optional

from pydantic import BaseModel, Field
from pydantic import create_model as _create_model

from offline_scorer._exceptions import ConfigurationError
from offline_scorer._text import ground_truth_text
from offline_scorer.pipeline._prompts import render_prompt
from offline_scorer.pipeline._steps import PromptStep, Skip, StepContext
from offline_scorer.scorers._build import ScorerDefinition, scorer_factory
from offline_scorer.scorers._common import (
    REASON_TEXT_CHARS,
    REASON_UNIT_CHARS,
    FiniteFloat,
    clip,
    format_score,
    item_limit,
    reference_alternatives,
    text_item,
    unique_in_order,
)
from offline_scorer.scorers._facts import keep_facts
from offline_scorer.scorers._judge_reads import similarity_step
from offline_scorer.scorers._modes import ModeOptions, Modes
from offline_scorer.scorers._similarity_read import (
    analysis_from,
    render_label_reads,
    whole_reference,
)
from offline_scorer.scorers._similarity_score import (
    expected_similarity_score,
    match_points,
    similarity_score,
)
from offline_scorer.scorers._split import aliases_of, split_answer, split_reference
from offline_scorer.scorers._summaries import similarity_summary
from offline_scorer.scorers._verdicts import SIMILARITY_LABELS

SCORER_ID = "answer-similarity-scorer"
TEMPLATES = "answer-similarity"
MAX_UNITS = 16
MatchType = Literal["exact", "semantic", "partial", "missing"]
# Run schemas are built at run time from the extracted units; mypy cannot follow them.
create_model: Any = _create_model
NO_GROUND_TRUTH_REASON = {
    "en": "The score is 0 because no ground truth was provided to compare the answer with.",
    "fr": "Le score est de 0 car aucune réponse de référence n'a été fournie pour comparer "
    "la réponse.",
}


class AnswerSimilarityOptions(ModeOptions):
    """Options of the answer similarity scorer (unknown names are rejected)."""

    require_ground_truth: bool = Field(
        True,
        description="Fail runs without a ground truth (False: score them 0 without any "
        "model call).",
    )
    semantic_threshold: FiniteFloat = Field(
        0.8, ge=0, description="Points for a semantic match (a partial match gets half)."
    )
    exact_match_bonus: FiniteFloat = Field(
        0.2, ge=0, description="Extra points for an exact match."
    )
    missing_penalty: FiniteFloat = Field(
        0.15, ge=0, description="Points lost per missing ground-truth unit."
    )
    contradiction_penalty: FiniteFloat = Field(
        1.0, ge=0, description="Score lost per contradiction (1.0: any contradiction gives 0)."
    )
    extra_info_penalty: FiniteFloat = Field(
        0.05, ge=0, description="Score lost per extra answer unit, at most 0.2 in total."
    )
    scale: FiniteFloat = Field(1, gt=0, description="The maximum score.")
    split_alternatives: bool = Field(
        True,
        description="Also read one short reference string with ' | ' or ' / ' between its "
        "parts ('Paris / City of Light') as a list of alternatives.",
    )

    def points(self) -> dict[str, float]:
        """What one reference unit's match adds to the formula's sum, per match type."""
        return match_points(
            semantic_threshold=self.semantic_threshold,
            exact_match_bonus=self.exact_match_bonus,
            missing_penalty=self.missing_penalty,
        )

    def formula(self) -> dict[str, Any]:
        """The formula's keyword arguments."""
        return {
            "semantic_threshold": self.semantic_threshold,
            "exact_match_bonus": self.exact_match_bonus,
            "missing_penalty": self.missing_penalty,
            "contradiction_penalty": self.contradiction_penalty,
            "extra_info_penalty": self.extra_info_penalty,
            "scale": self.scale,
        }


class UnitMatch(BaseModel):
    """How one ground-truth unit is expressed in the answer."""

    ground_truth_unit: str
    output_unit: Optional[str]
    match_type: MatchType
    explanation: str


class Contradiction(BaseModel):
    """An answer unit that states the opposite of a ground-truth unit."""

    output_unit: str
    ground_truth_unit: str
    explanation: str


class Analysis(BaseModel):
    """Analyze result."""

    matches: list[UnitMatch]
    extra_in_output: list[str]
    contradictions: list[Contradiction]


@lru_cache(maxsize=256)
def units_schema(
    max_output: int, max_ground_truth: int, output_given: bool, allow_underscore: bool = True
) -> type[BaseModel]:
    """The preprocess schema of one run, with list bounds that follow the texts' lengths."""
    item = text_item("_" if allow_underscore else "")
    return create_model(  # type: ignore[call-overload,no-any-return]
        "Units",
        output_units=(
            list[item],  # type: ignore[valid-type]
            Field(
                min_length=1 if output_given else 0, max_length=max_output if output_given else 0
            ),
        ),
        ground_truth_units=(
            list[item],  # type: ignore[valid-type]
            Field(min_length=1, max_length=max_ground_truth),
        ),
    )


def _units_schema(ctx: StepContext) -> type[BaseModel]:
    ground_truth = ground_truth_text(ctx.ground_truth) or ""
    return units_schema(
        item_limit(ctx.output_text, MAX_UNITS),
        item_limit(ground_truth, MAX_UNITS),
        bool(ctx.output_text.strip()),
        "_" in ctx.output_text + ground_truth,
    )


def _units_result(ctx: StepContext, answer: Any) -> dict[str, Any]:
    """The judge's units, each checked against its own text (``_facts.py``)."""
    output_units, output_fallbacks = keep_facts(answer.output_units, ctx.output_text)
    reference = ground_truth_text(ctx.ground_truth) or ""
    reference_units, reference_fallbacks = keep_facts(answer.ground_truth_units, reference)
    return {
        "output_units": unique_in_order(output_units),
        "ground_truth_units": unique_in_order(reference_units),
        "fact_fallbacks": output_fallbacks + reference_fallbacks,
    }


@lru_cache(maxsize=1024)
def analysis_schema(
    output_units: tuple[str, ...], ground_truth_units: tuple[str, ...]
) -> type[BaseModel]:
    """The analyze schema of one run.

    Exactly one match per ground-truth unit, in order, each naming its unit as a constant;
    answer units can only be quoted from the extracted list, so the model cannot invent them.
    """
    out_type: Any = Literal[output_units] if output_units else None  # type: ignore[valid-type]
    gt_type: Any = Literal[ground_truth_units]  # type: ignore[valid-type]
    matches = [
        _match_type_for(position, unit, out_type)
        for position, unit in enumerate(ground_truth_units)
    ]
    contradiction = create_model(
        "RunContradiction",
        output_unit=(out_type if output_units else str, ...),
        ground_truth_unit=(gt_type, ...),
        explanation=(str, ...),
    )
    extra_limit = len(output_units)
    return create_model(  # type: ignore[call-overload,no-any-return]
        "RunAnalysis",
        matches=(tuple[tuple(matches)], ...),  # type: ignore[misc]
        extra_in_output=(
            list[out_type if output_units else str],  # type: ignore[misc]
            Field(max_length=extra_limit),
        ),
        contradictions=(
            list[contradiction],  # type: ignore[valid-type]
            Field(max_length=len(ground_truth_units) if output_units else 0),
        ),
    )


def _match_type_for(position: int, unit: str, out_type: Any) -> Any:
    """One ground-truth unit's match: found (quoting an answer unit) or missing (null).

    Two shapes make "output_unit is null exactly when the match is missing" part of the
    schema, so the model cannot call a unit matched without naming where it matched.
    """
    missing = create_model(
        f"Missing{position + 1}",
        ground_truth_unit=(Literal[unit], ...),  # type: ignore[valid-type]
        output_unit=(type(None), ...),
        match_type=(Literal["missing"], ...),
        explanation=(str, ...),
    )
    if out_type is None:
        return missing
    found = create_model(
        f"Found{position + 1}",
        ground_truth_unit=(Literal[unit], ...),  # type: ignore[valid-type]
        output_unit=(out_type, ...),
        match_type=(Literal["exact", "semantic", "partial"], ...),
        explanation=(str, ...),
    )
    return found | missing


# ------------------------------------------------------------------------ steps


def _missing_ground_truth(ctx: StepContext) -> bool:
    return ground_truth_text(ctx.ground_truth) is None


def _no_units(ctx: StepContext) -> dict[str, Any] | None:
    """Empty units for a run without a ground truth (or an error when one is required)."""
    if not _missing_ground_truth(ctx):
        return None
    if ctx.options.require_ground_truth:
        raise ConfigurationError(
            "The answer similarity scorer requires a ground truth (a reference answer) for "
            "every run; this run has none. Provide ground_truth, or build the scorer with "
            "require_ground_truth=False to score such runs 0."
        )
    return {"output_units": [], "ground_truth_units": []}


def _render_preprocess(ctx: StepContext) -> Any:
    empty = _no_units(ctx)
    if empty is not None:
        return Skip(empty)
    variables = {"output": ctx.output_text, "ground_truth": ground_truth_text(ctx.ground_truth)}
    return render_prompt(TEMPLATES, ctx.language, "preprocess", variables)


def _render_analyze(ctx: StepContext) -> Any:
    units = ctx.preprocess_result
    if not units["ground_truth_units"]:
        return Skip({"matches": [], "extra_in_output": [], "contradictions": []})
    variables = {
        "output_units": units["output_units"],
        "ground_truth_units": units["ground_truth_units"],
    }
    return render_prompt(TEMPLATES, ctx.language, "analyze", variables)


def _analyze_schema(ctx: StepContext) -> type[BaseModel]:
    units = ctx.preprocess_result
    return analysis_schema(tuple(units["output_units"]), tuple(units["ground_truth_units"]))


def _analyze_result(ctx: StepContext, answer: Any) -> dict[str, Any]:
    return make_consistent(Analysis.model_validate(answer.model_dump()).model_dump())


def make_consistent(analysis: dict[str, Any]) -> dict[str, Any]:
    """Remove findings that contradict the judge's own matches.

    * a repeated extra unit or contradiction counts once;
    * a ground-truth unit matched ``exact`` or ``semantic`` cannot also be contradicted,
      and an answer unit cannot contradict a ground-truth unit with the same text;
    * an answer unit used in an ``exact`` or ``semantic`` match is not extra information.
    """
    agreed = [m for m in analysis["matches"] if m["match_type"] in ("exact", "semantic")]
    agreed_truths = {_norm(m["ground_truth_unit"]) for m in agreed}
    used_outputs = {_norm(m["output_unit"] or "") for m in agreed}
    seen: set[tuple[str, str]] = set()
    contradictions = []
    for item in analysis["contradictions"]:
        key = (_norm(item["output_unit"]), _norm(item["ground_truth_unit"]))
        if key in seen or key[1] in agreed_truths or key[0] == key[1]:
            continue
        seen.add(key)
        contradictions.append(item)
    extra = [
        u for u in unique_in_order(analysis["extra_in_output"]) if _norm(u) not in used_outputs
    ]
    return {**analysis, "extra_in_output": extra, "contradictions": contradictions}


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def _split_units(ctx: StepContext) -> dict[str, Any]:
    empty = _no_units(ctx)
    if empty is not None:
        return empty
    return {
        "output_units": split_answer(ctx.output_text),
        "ground_truth_units": split_reference(ground_truth_text(ctx.ground_truth)),
    }


def _score(ctx: StepContext) -> float:
    options: AnswerSimilarityOptions = ctx.options
    analysis = ctx.analyze_result
    penalties = {
        "contradictions": analysis["contradictions"],
        "extra_units": analysis["extra_in_output"],
    }
    if options.scoring == "expected":
        probabilities = [m["probabilities"] for m in analysis["matches"]]
        return expected_similarity_score(probabilities, **penalties, **options.formula())
    return similarity_score(analysis["matches"], **penalties, **options.formula())


def _render_reason(ctx: StepContext) -> Any:
    if _missing_ground_truth(ctx):
        return Skip(NO_GROUND_TRUTH_REASON[ctx.language])
    variables = {
        "output": clip(ctx.output_text, REASON_TEXT_CHARS),
        "ground_truth": clip(ground_truth_text(ctx.ground_truth), REASON_TEXT_CHARS),
        "score": format_score(ctx.score),
        "scale": format_score(ctx.options.scale),
        "analysis": _clipped_analysis(ctx.analyze_result),
        "summary": similarity_summary(ctx.analyze_result, ctx.language),
    }
    return render_prompt(TEMPLATES, ctx.language, "reason", variables)


def _clipped_analysis(analysis: dict[str, Any]) -> dict[str, Any]:
    """The analysis as the reason prompt shows it: every quoted unit clipped."""

    def unit_fields(record: dict[str, Any]) -> dict[str, Any]:
        return {
            key: clip(value, REASON_UNIT_CHARS) if key.endswith("_unit") else value
            for key, value in record.items()
        }

    return {
        **analysis,
        "matches": [unit_fields(match) for match in analysis["matches"]],
        "contradictions": [unit_fields(item) for item in analysis["contradictions"]],
        "extra_in_output": [clip(unit, REASON_UNIT_CHARS) for unit in analysis["extra_in_output"]],
    }


def _steps(modes: Modes) -> tuple[Any, Any]:
    """The preprocess and analyze steps for the resolved modes."""
    preprocess: Any = (
        _split_units
        if modes.extraction == "split"
        else PromptStep(_render_preprocess, schema=_units_schema, to_result=_units_result)
    )
    if modes.verdicts == "generate":
        analyze: Any = PromptStep(
            _render_analyze, schema=_analyze_schema, to_result=_analyze_result
        )
    elif modes.models is not None:
        analyze = similarity_step(
            modes.models.similarity,
            whole_reference,
            aliases_of,
            lambda ctx, references, answers, table: analysis_from(
                ctx.options.points(), references, answers, table
            ),
        )
    else:
        analyze = PromptStep(render_label_reads, labels=SIMILARITY_LABELS)
    return preprocess, analyze


SIMILARITY = ScorerDefinition(
    id=SCORER_ID,
    name="Answer Similarity",
    description="How closely the answer matches a ground-truth reference answer.",
    kind="similarity",
    options=AnswerSimilarityOptions,
    steps=_steps,
    score=_score,
    reason=_render_reason,
    summary="""Build the answer similarity scorer.

    A run whose ground truth is a list of accepted answers is scored against each and keeps
    the best (a deviation from the reference, which takes one string); its result names the
    winner (``reference_index``) and every reference's outcome (``references``).
    """,
    needs_ground_truth=lambda options: bool(options.require_ground_truth),
    references=lambda options: partial(
        reference_alternatives, split_strings=options.split_alternatives
    ),
)

create_answer_similarity_scorer = scorer_factory(SIMILARITY, "create_answer_similarity_scorer")
