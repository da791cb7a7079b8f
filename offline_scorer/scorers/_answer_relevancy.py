"""Answer relevancy: how well an answer addresses its question (not whether it is true).

Pipeline: preprocess splits the answer into statements; analyze gives one verdict per
statement (``yes`` / ``unsure`` / ``no``); the score is
``round_half_up((#yes + uncertainty_weight * #unsure) / n * scale)``; a short reason
explains it.

How statements are extracted, verdicts reached and the score computed depends on three
options resolved from the judge's card (``scorers/_modes.py``): with the embedded card the
answer is split into sentences, each verdict's probabilities are read from the fitted
verdict model, and the score is the formula's expected value over those probabilities.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel, Field, create_model

from offline_scorer.pipeline._prompts import render_prompt
from offline_scorer.pipeline._steps import Parts, PromptStep, Skip, StepContext
from offline_scorer.scorers._build import ScorerDefinition, scorer_factory
from offline_scorer.scorers._common import (
    REASON_TEXT_CHARS,
    REASON_UNIT_CHARS,
    FiniteFloat,
    clip,
    format_score,
    item_limit,
    round_half_up,
    split_text,
    text_item,
    unique_in_order,
)
from offline_scorer.scorers._facts import keep_facts
from offline_scorer.scorers._judge_reads import relevancy_step
from offline_scorer.scorers._modes import ModeOptions, Modes
from offline_scorer.scorers._split import split_answer
from offline_scorer.scorers._summaries import relevancy_summary
from offline_scorer.scorers._verdicts import RELEVANCY_LABELS, best_label, ordered

SCORER_ID = "answer-relevancy-scorer"
TEMPLATES = "answer-relevancy"
# A bound on statements keeps a looping small model from filling its whole token budget.
MAX_STATEMENTS = 16
VERDICTS = ("yes", "unsure", "no")


class AnswerRelevancyOptions(ModeOptions):
    """Options of the answer relevancy scorer (unknown names are rejected)."""

    uncertainty_weight: FiniteFloat = Field(
        0.3, ge=0, le=1, description="Weight of an 'unsure' verdict, between 0 and 1."
    )
    scale: FiniteFloat = Field(1, gt=0, description="The maximum score.")
    split_long_answers: bool = Field(
        False,
        description="Split answers longer than chunk_chars into chunks at sentence ends for "
        "the preprocess step (and long statement lists into groups for the analyze step) "
        "instead of failing when they do not fit the model's context window.",
    )
    chunk_chars: int = Field(3000, ge=50, description="Chunk size, in characters.")


class Verdict(BaseModel):
    """One statement's relevance verdict."""

    result: Literal["yes", "unsure", "no"]
    reason: str


class Verdicts(BaseModel):
    """Analyze result: one verdict per statement, in order."""

    results: list[Verdict]


@lru_cache(maxsize=64)
def statements_schema(max_items: int, allow_underscore: bool = True) -> type[BaseModel]:
    """The preprocess schema of one run: between 1 and ``max_items`` statements."""
    item = text_item("_" if allow_underscore else "")
    return create_model(  # type: ignore[call-overload,no-any-return]
        "Statements",
        statements=(list[item], Field(min_length=1, max_length=max_items)),  # type: ignore[valid-type]
    )


def _statements_schema(ctx: StepContext) -> type[BaseModel]:
    return _statements_schema_for(ctx.output_text)


def _statements_schema_for(text: str) -> type[BaseModel]:
    return statements_schema(item_limit(text, MAX_STATEMENTS), "_" in text)


@lru_cache(maxsize=1024)
def verdicts_schema(count: int) -> type[BaseModel]:
    """The analyze schema of a run with ``count`` statements: exactly that many verdicts.

    (Measured: also repeating each statement as a constant in its verdict cost about 45%
    more generated tokens and did not change the embedded model's verdicts.)
    """
    return create_model(  # type: ignore[call-overload,no-any-return]
        "Verdicts",
        results=(list[Verdict], Field(min_length=count, max_length=count)),
    )


def relevancy_score(
    verdicts: Sequence[Mapping[str, Any] | str],
    *,
    uncertainty_weight: float = 0.3,
    scale: float = 1,
) -> float:
    """The answer relevancy score of a list of verdicts.

    ``n`` counts every verdict; a verdict string other than yes/unsure/no (after trimming
    and lower-casing) counts toward ``n`` but adds nothing, like ``no``.

    Args:
        verdicts: verdict dicts (``{"result": ...}``) or verdict strings.
        uncertainty_weight: weight of ``unsure`` verdicts.
        scale: the maximum score.

    Returns:
        0 when there are no verdicts, else ``round_half_up((yes + w * unsure) / n * scale)``.

    Example:
        >>> relevancy_score(["yes", "unsure", "no"])
        0.43
    """
    if not verdicts:
        return 0.0
    labels = [
        str(v.get("result", "") if isinstance(v, Mapping) else v).strip().lower() for v in verdicts
    ]
    points = labels.count("yes") + uncertainty_weight * labels.count("unsure")
    return round_half_up(points / len(labels) * scale)


def expected_relevancy_score(
    probabilities: Sequence[Mapping[str, float]],
    *,
    uncertainty_weight: float = 0.3,
    scale: float = 1,
) -> float:
    """The relevancy formula over label probabilities instead of hard labels.

    Each statement adds ``P(yes) + uncertainty_weight * P(unsure)`` instead of 1, the weight
    or 0; with one-hot probabilities this is exactly :func:`relevancy_score`.

    Example:
        >>> expected_relevancy_score([{"yes": 0.5, "unsure": 0.5, "no": 0.0}])
        0.65
    """
    if not probabilities:
        return 0.0
    points = sum(
        p.get("yes", 0.0) + uncertainty_weight * p.get("unsure", 0.0) for p in probabilities
    )
    return round_half_up(points / len(probabilities) * scale)


# ------------------------------------------------------------------------ steps


def _render_preprocess(ctx: StepContext) -> Any:
    text = ctx.output_text
    if not text.strip():
        # Nothing to split: no model call for an empty answer.
        return Skip({"statements": []})
    options: AnswerRelevancyOptions = ctx.options
    if options.split_long_answers and len(text) > options.chunk_chars:
        chunks = split_text(text, options.chunk_chars)
        return Parts(
            prompts=[_preprocess_prompt(ctx, chunk) for chunk in chunks],
            schemas=[_statements_schema_for(chunk) for chunk in chunks],
            merge=_merge_statements,
        )
    return _preprocess_prompt(ctx, text)


def _preprocess_prompt(ctx: StepContext, text: str) -> Any:
    return render_prompt(TEMPLATES, ctx.language, "preprocess", {"output": text})


def _merge_statements(ctx: StepContext, parts: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "statements": unique_in_order([s for part in parts for s in part["statements"]]),
        "fact_fallbacks": sum(part.get("fact_fallbacks", 0) for part in parts),
    }


def _statements_result(ctx: StepContext, answer: Any) -> dict[str, Any]:
    """The judge's statements, each checked against the answer (``_facts.py``)."""
    statements, fallbacks = keep_facts(answer.statements, ctx.output_text)
    return {"statements": unique_in_order(statements), "fact_fallbacks": fallbacks}


def _render_analyze(ctx: StepContext) -> Any:
    statements = ctx.preprocess_result["statements"]
    if not statements:
        return Skip({"results": []})
    options: AnswerRelevancyOptions = ctx.options
    if options.split_long_answers and sum(len(s) + 4 for s in statements) > options.chunk_chars:
        groups = _group_statements(statements, options.chunk_chars)
        return Parts(
            prompts=[_analyze_prompt(ctx, group) for group in groups],
            schemas=[verdicts_schema(len(group)) for group in groups],
            merge=lambda ctx, parts: {"results": [v for part in parts for v in part["results"]]},
        )
    return _analyze_prompt(ctx, statements)


def _analyze_prompt(ctx: StepContext, statements: list[str]) -> Any:
    variables = {"input": ctx.input_text, "statements": statements}
    return render_prompt(TEMPLATES, ctx.language, "analyze", variables)


def _group_statements(statements: list[str], max_chars: int) -> list[list[str]]:
    groups: list[list[str]] = [[]]
    size = 0
    for statement in statements:
        if groups[-1] and size + len(statement) + 4 > max_chars:
            groups.append([])
            size = 0
        groups[-1].append(statement)
        size += len(statement) + 4
    return groups


def _analyze_schema(ctx: StepContext) -> type[BaseModel]:
    return verdicts_schema(len(ctx.preprocess_result["statements"]))


def _analyze_result(ctx: StepContext, answer: Any) -> dict[str, Any]:
    return {"results": [{"result": v.result, "reason": v.reason} for v in answer.results]}


def _split_statements(ctx: StepContext) -> dict[str, Any]:
    return {"statements": split_answer(ctx.output_text)}


def _verdict(probabilities: Mapping[str, float]) -> dict[str, Any]:
    return {
        "result": best_label(probabilities, RELEVANCY_LABELS),
        "probabilities": ordered(probabilities, RELEVANCY_LABELS),
    }


def _render_label_reads(ctx: StepContext) -> Any:
    """One label-reading prompt per statement (the judge's own label probabilities), the
    whole answer in view and the statement named after it."""
    statements = ctx.preprocess_result["statements"]
    if not statements:
        return Skip({"results": []})
    shown = {"input": ctx.input_text, "output": ctx.output_text}
    prompts = [
        render_prompt(TEMPLATES, ctx.language, "context", {**shown, "statement": s})
        for s in statements
    ]
    return Parts(prompts=prompts, merge=lambda ctx, parts: {"results": parts})


def _score(ctx: StepContext) -> float:
    options: AnswerRelevancyOptions = ctx.options
    if options.scoring == "expected":
        return expected_relevancy_score(
            [v["probabilities"] for v in ctx.analyze_result["results"]],
            uncertainty_weight=options.uncertainty_weight,
            scale=options.scale,
        )
    return relevancy_score(
        ctx.analyze_result["results"],
        uncertainty_weight=options.uncertainty_weight,
        scale=options.scale,
    )


# A reason prompt shows the start of a long answer and this many verdicts, then counts the rest.
REASON_VERDICTS = 24


def _render_reason(ctx: StepContext) -> Any:
    options: AnswerRelevancyOptions = ctx.options
    verdicts = ctx.analyze_result["results"]
    shown = verdicts[:REASON_VERDICTS]
    statements = ctx.preprocess_result["statements"]
    variables = {
        "input": clip(ctx.input_text, REASON_TEXT_CHARS),
        "output": clip(ctx.output_text, min(options.chunk_chars, REASON_TEXT_CHARS)),
        "score": format_score(ctx.score),
        "scale": format_score(options.scale),
        "statements": [clip(statement, REASON_UNIT_CHARS) for statement in statements],
        "verdicts": shown,
        "more_verdicts": len(verdicts) - len(shown),
        "summary": relevancy_summary(verdicts, ctx.language),
    }
    return render_prompt(TEMPLATES, ctx.language, "reason", variables)


def _steps(modes: Modes) -> tuple[Any, Any]:
    """The preprocess and analyze steps for the resolved modes."""
    preprocess: Any = (
        _split_statements
        if modes.extraction == "split"
        else PromptStep(
            _render_preprocess,
            schema=_statements_schema,
            to_result=_statements_result,
        )
    )
    if modes.verdicts == "generate":
        analyze: Any = PromptStep(
            _render_analyze, schema=_analyze_schema, to_result=_analyze_result
        )
    elif modes.models is not None:
        analyze = relevancy_step(modes.models.relevancy, _verdict)
    else:
        analyze = PromptStep(
            _render_label_reads,
            labels=RELEVANCY_LABELS,
            to_result=lambda ctx, scores: _verdict(scores.probabilities),
        )
    return preprocess, analyze


RELEVANCY = ScorerDefinition(
    id=SCORER_ID,
    name="Answer Relevancy",
    description="How well the answer addresses the question: completeness and focus.",
    kind="relevancy",
    options=AnswerRelevancyOptions,
    steps=_steps,
    score=_score,
    reason=_render_reason,
    summary="""Build the answer relevancy scorer.

    Example:
        >>> scorer = create_answer_relevancy_scorer()  # doctest: +SKIP
        >>> scorer.run(input="Capital of France?", output="Paris.").score  # doctest: +SKIP
        1.0
    """,
)

create_answer_relevancy_scorer = scorer_factory(RELEVANCY, "create_answer_relevancy_scorer")
