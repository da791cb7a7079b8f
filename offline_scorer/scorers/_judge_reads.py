"""The analyze step of a card's verdict model: its inputs, the judge's read among them.

One verdict model per card and scorer (``_verdicts.ScorerModel``) turns each verdict's
inputs into label probabilities. Most inputs are cheap evidence (``_features.py``, the
sentence-embedding cosines); a model with a ``read`` also takes the judge's own label
probabilities, ``read_<label>``, from one prompt per verdict that shows the whole item and
names the part under judgment:

* relevancy (``prompts/answer-relevancy/<language>/context.jinja``): the question, the
  whole answer, then the statement to judge;
* similarity (``prompts/answer-similarity/<language>/match.jinja``): the question, the whole
  reference, the whole answer (does the answer say what the reference says?), then, when
  the reference has several units, the unit to judge; a one-unit reference is asked as the
  whole item, so its read is the item's.

The part under judgment comes last, in a message of its own, so every read of one item
starts with the same tokens, which the judge computes once per item
(``judges/transformers/_labels.py``): a further statement costs its own few tokens. A model
without a read makes no judge call.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from offline_scorer.judges.embeddings import shared_embedder
from offline_scorer.pipeline._prompts import render_prompt
from offline_scorer.pipeline._steps import Parts, PromptStep, Skip, StepContext
from offline_scorer.scorers._verdicts import (
    RELEVANCY_LABELS,
    SIMILARITY_LABELS,
    Cosine,
    ScorerModel,
    relevancy_inputs,
    similarity_inputs,
)

READ_PREFIX = "read_"
# A label the judge all but rules out weighs like this one (the inputs stay bounded).
LOGPROB_FLOOR = -12.0


def read_features(labels: Sequence[str], logprobs: Sequence[float]) -> dict[str, float]:
    """The judge's read as inputs: each label's log-probability renormalised over the
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


def embedder_of(model: ScorerModel) -> Cosine | None:
    """The sentence embedder the model's cosines need (None when it reads none)."""
    return shared_embedder(model.embedder) if model.embedder else None


def _template(model: ScorerModel) -> tuple[str, str]:
    assert model.read is not None
    scorer, step = model.read.template.split("/")
    return scorer, step


def relevancy_step(model: ScorerModel, verdict: Callable[[dict[str, float]], Any]) -> Any:
    """The analyze step: one verdict per statement from the model's inputs (one judge read
    per statement when the model takes the read)."""

    def render(ctx: StepContext) -> Any:
        statements = ctx.preprocess_result["statements"]
        if not statements:
            return Skip({"results": []})
        if model.read is None:
            return Skip(merge(ctx, []))
        scorer, step = _template(model)
        shown = {"input": ctx.input_text, "output": ctx.output_text}
        prompts = [
            render_prompt(scorer, ctx.language, step, {**shown, "statement": statement})
            for statement in statements
        ]
        return Parts(prompts=prompts, merge=merge)

    def merge(ctx: StepContext, parts: list[Any]) -> dict[str, Any]:
        statements = ctx.preprocess_result["statements"]
        rows = relevancy_inputs(
            model.inputs, embedder_of(model), ctx.input_text, statements, ctx.output_text
        )
        for row, read in zip(rows, parts, strict=False):
            row.update(read_features(read.labels, read.logprobs))
        return {"results": [verdict(model.model.probabilities(row)) for row in rows]}

    labels = tuple(model.read.labels) if model.read else RELEVANCY_LABELS
    return PromptStep(render, labels=labels)


def similarity_step(
    model: ScorerModel,
    reference_text: Callable[[Any], str],
    aliases: Callable[[str], list[str]],
    analysis: Callable[
        [StepContext, list[str], list[str], list[list[dict[str, float]]]], dict[str, Any]
    ],
) -> Any:
    """The analyze step: the probability table (one row per reference unit, one cell per
    answer unit) from the model's inputs, one judge read per reference unit when the model
    takes the read; ``analysis(context, references, answers, table)`` turns it into matches.
    ``reference_text`` gives the whole reference as the read shows it, ``aliases`` a unit's
    alternatives."""

    def render(ctx: StepContext) -> Any:
        units = ctx.preprocess_result
        references, answers = units["ground_truth_units"], units["output_units"]
        if not references or not answers:
            return Skip(analysis(ctx, references, answers, [[] for _ in references]))
        if model.read is None:
            return Skip(merge(ctx, []))
        scorer, step = _template(model)
        shown = {
            "question": ctx.input_text,
            "reference": reference_text(ctx.ground_truth),
            "output": ctx.output_text,
        }
        # A one-unit reference is judged as the whole item (no unit named).
        named = references if len(references) > 1 else [""]
        prompts = [
            render_prompt(scorer, ctx.language, step, {**shown, "unit": unit}) for unit in named
        ]
        return Parts(prompts=prompts, merge=merge)

    def merge(ctx: StepContext, parts: list[Any]) -> dict[str, Any]:
        units = ctx.preprocess_result
        references, answers = units["ground_truth_units"], units["output_units"]
        groups = [aliases(unit) or [unit] for unit in references]
        table = similarity_inputs(model.inputs, embedder_of(model), groups, answers)
        if parts:  # one read per reference unit (a one-unit reference: the whole item)
            for row, read in zip(table, parts, strict=True):
                extra = read_features(read.labels, read.logprobs)
                for cell in row:
                    cell.update(extra)
        probabilities = [[model.model.probabilities(cell) for cell in row] for row in table]
        return analysis(ctx, references, answers, probabilities)

    labels = tuple(model.read.labels) if model.read else SIMILARITY_LABELS
    return PromptStep(render, labels=labels)
