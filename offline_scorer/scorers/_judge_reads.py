"""Verdict models that also read the judge: its label probabilities as evidence.

A card whose judge follows instructions (the Qwen2.5-Coder cards) ships a verdict model
whose features include the judge's own read of each verdict: the shipped verdict prompt
(``prompts/<scorer>/<language>/verdict.jinja``) for question x statement or reference unit
x answer unit, and the log-probability of each label after it, renormalised over the
labels (``read_<label>``, floored at :data:`LOGPROB_FLOOR`). The fitted regression weighs
them against the lexical and embedding evidence, so the model's knowledge counts where it
helps and the cheap evidence where the model is unsure (``tools/fit_card_verdicts.py``
fits it on train-data reads stored by ``tools/read_training.py``).

Each verdict costs one forward pass over its own tokens (the prompt's system block is
computed once, see ``judges/transformers/_labels.py``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from offline_scorer.judges.embeddings import shared_embedder
from offline_scorer.pipeline._prompts import render_prompt
from offline_scorer.pipeline._steps import Parts, PromptStep, Skip, StepContext
from offline_scorer.scorers._similarity_read import unit_evidence
from offline_scorer.scorers._verdicts import (
    RELEVANCY_LABELS,
    SIMILARITY_LABELS,
    LogisticModel,
    VerdictModels,
    relevancy_evidence,
)

READ_PREFIX = "read_"
# A label the judge all but rules out weighs like this one (the features stay bounded).
LOGPROB_FLOOR = -12.0


def read_features(labels: Sequence[str], logprobs: Sequence[float]) -> dict[str, float]:
    """The judge's read as features: each label's log-probability renormalised over the
    labels (so they do not depend on how likely the judge was to answer with a label at
    all), floored at :data:`LOGPROB_FLOOR`.

    Example:
        >>> read_features(["yes", "no"], [-0.1, -2.4])["read_yes"]
        -0.0955
    """
    top = max(logprobs)
    total = top + math.log(sum(math.exp(value - top) for value in logprobs))
    return {
        f"{READ_PREFIX}{label}": round(max(value - total, LOGPROB_FLOOR), 4)
        for label, value in zip(labels, logprobs, strict=True)
    }


def reads_judge(model: LogisticModel) -> bool:
    """Whether a fitted model needs the judge's reads."""
    return any(name.startswith(READ_PREFIX) for name in model.features)


def relevancy_step(models: VerdictModels, verdict: Callable[[dict[str, float]], Any]) -> Any:
    """The analyze step: one read per statement, combined with the evidence."""
    model = models.models.relevancy

    def render(ctx: StepContext) -> Any:
        statements = ctx.preprocess_result["statements"]
        if not statements:
            return Skip({"results": []})
        prompts = [
            render_prompt(
                "answer-relevancy",
                ctx.language,
                "verdict",
                {"input": ctx.input_text, "statement": statement},
            )
            for statement in statements
        ]
        return Parts(prompts=prompts, merge=merge)

    def merge(ctx: StepContext, parts: list[Any]) -> dict[str, Any]:
        statements = ctx.preprocess_result["statements"]
        evidence = relevancy_evidence(
            shared_embedder(models.embedder), ctx.input_text, statements, ctx.output_text
        )
        results = []
        for features, scores in zip(evidence, parts, strict=True):
            features = {**features, **read_features(scores.labels, scores.logprobs)}
            results.append(verdict(model.probabilities(features)))
        return {"results": results}

    return PromptStep(render, labels=RELEVANCY_LABELS)


def similarity_step(
    models: VerdictModels,
    analysis: Callable[
        [StepContext, list[str], list[str], list[list[dict[str, float]]]], dict[str, Any]
    ],
) -> Any:
    """The analyze step: one read per (reference unit, answer unit), with the evidence;
    ``analysis(context, references, answers, table)`` turns the probability table (one row
    per reference unit, one cell per answer unit) into matches."""
    model = models.models.similarity

    def pairs(ctx: StepContext) -> list[tuple[int, int]]:
        units = ctx.preprocess_result
        return [
            (i, j)
            for i in range(len(units["ground_truth_units"]))
            for j in range(len(units["output_units"]))
        ]

    def render(ctx: StepContext) -> Any:
        units = ctx.preprocess_result
        references, answers = units["ground_truth_units"], units["output_units"]
        if not references or not answers:
            return Skip(analysis(ctx, references, answers, [[] for _ in references]))
        prompts = [
            render_prompt(
                "answer-similarity",
                ctx.language,
                "verdict",
                {"ground_truth_unit": references[i], "output": answers[j]},
            )
            for i, j in pairs(ctx)
        ]
        return Parts(prompts=prompts, merge=merge)

    def merge(ctx: StepContext, parts: list[Any]) -> dict[str, Any]:
        units = ctx.preprocess_result
        references, answers = units["ground_truth_units"], units["output_units"]
        evidence = unit_evidence(models, ctx)
        reads = dict(zip(pairs(ctx), parts, strict=True))
        table = [
            [
                model.probabilities(
                    {**features, **read_features(reads[i, j].labels, reads[i, j].logprobs)}
                )
                for j, features in enumerate(row)
            ]
            for i, row in enumerate(evidence)
        ]
        return analysis(ctx, references, answers, table)

    return PromptStep(render, labels=SIMILARITY_LABELS)
