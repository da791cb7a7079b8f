"""Verdict models that also read the judge: its label probabilities as evidence.

A card whose judge follows instructions (the Qwen2.5-Coder cards) ships a verdict model
whose features include the judge's own reads, of two kinds, each the shipped verdict prompt
(``prompts/<scorer>/<language>/verdict.jinja``) followed by the log-probability of each
label, renormalised over the labels and floored at :data:`LOGPROB_FLOOR`:

* the pair read (``read_<label>``): question x statement, or reference unit x answer unit;
  one forward pass per verdict;
* the whole-item read (``whole_<label>``): question x whole answer, or whole reference x
  whole answer; one forward pass per item, whatever its length, shared by its verdicts;
* the match read (``match_yes``, ``match_no``; similarity): the whole reference against the
  whole answer asked as one yes/no question (``prompts/answer-similarity/<language>/
  match.jinja``: does the answer say the same thing?); one forward pass per item. A small
  judge tells a wrong fact from a paraphrase far better this way than by grading the
  reference's units on four labels.

A model uses any of these kinds; a run reads only what its model uses. A gated similarity
model whose gate reads only item features (``_similarity_read.item_features``: the word
counts of the whole reference and the whole answer) picks one of its two models per item,
and the item is read as that model needs (:func:`for_item`). The fitted regression weighs
them against the lexical and embedding evidence, so the model's knowledge counts where it
helps and the cheap evidence where the model is unsure (``tools/fit_card_verdicts.py``
fits it on train-data reads stored by ``tools/read_training.py``).

Each read costs one forward pass over its own tokens (the prompt's system block is computed
once, see ``judges/transformers/_labels.py``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from offline_scorer.judges.embeddings import shared_embedder
from offline_scorer.pipeline._prompts import render_prompt
from offline_scorer.pipeline._steps import Parts, PromptStep, Skip, StepContext
from offline_scorer.scorers._similarity_read import (
    item_features,
    unit_evidence,
    whole_reference,
)
from offline_scorer.scorers._verdicts import (
    RELEVANCY_LABELS,
    SIMILARITY_LABELS,
    GatedModel,
    VerdictModel,
    VerdictModels,
    relevancy_evidence,
)

READ_PREFIX = "read_"
WHOLE_PREFIX = "whole_"
MATCH_PREFIX = "match_"
MATCH_LABELS = ("yes", "no")
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


def whole_features(
    labels: Sequence[str], logprobs: Sequence[float], prefix: str = WHOLE_PREFIX
) -> dict[str, float]:
    """A whole-item read as features: :func:`read_features` named ``<prefix><label>``
    (``whole_`` for the verdict prompt, ``match_`` for the yes/no question)."""
    return {
        prefix + name.removeprefix(READ_PREFIX): value
        for name, value in read_features(labels, logprobs).items()
    }


def reads_judge(model: VerdictModel) -> bool:
    """Whether a fitted model needs the judge's reads (of any kind)."""
    return _pair_reads(model) or _whole_read(model) or _match_read(model)


def _uses(model: VerdictModel, prefix: str) -> bool:
    return any(name.startswith(prefix) for name in model.features)


def _pair_reads(model: VerdictModel) -> bool:
    return _uses(model, READ_PREFIX)


def _whole_read(model: VerdictModel) -> bool:
    return _uses(model, WHOLE_PREFIX)


def _match_read(model: VerdictModel) -> bool:
    return _uses(model, MATCH_PREFIX)


def for_item(model: VerdictModel, item: dict[str, float]) -> VerdictModel:
    """The model that judges every verdict of an item: for a gated model whose conditions
    read only item features, the one its gate picks; any other model as it is."""
    if isinstance(model, GatedModel) and all(f in item for f in model.features_of_gate):
        return for_item(model.model if model.holds(item) else model.otherwise, item)
    return model


def _split_reads(
    model: VerdictModel, parts: list[Any], labels: Sequence[str]
) -> tuple[list[Any], dict[str, float]]:
    """The pair reads, and the features of the item's whole reads, of a step's parts (the
    whole-item read, then the match read, each when the model uses it, are the last parts)."""
    whole: dict[str, float] = {}
    if _match_read(model):
        *parts, match = parts
        whole = whole_features(MATCH_LABELS, match.logprobs, MATCH_PREFIX)
    if _whole_read(model):
        *parts, item = parts
        whole = {**whole_features(labels, item.logprobs), **whole}
    return parts, whole


def relevancy_step(models: VerdictModels, verdict: Callable[[dict[str, float]], Any]) -> Any:
    """The analyze step: the reads the model uses (one per statement, one of the whole
    answer), combined with the evidence."""
    model = models.models.relevancy

    def render(ctx: StepContext) -> Any:
        statements = ctx.preprocess_result["statements"]
        if not statements:
            return Skip({"results": []})
        shown = statements if _pair_reads(model) else []
        if _whole_read(model):
            shown = [*shown, ctx.output_text]
        prompts = [
            render_prompt(
                "answer-relevancy",
                ctx.language,
                "verdict",
                {"input": ctx.input_text, "statement": statement},
            )
            for statement in shown
        ]
        return Parts(prompts=prompts, merge=merge)

    def merge(ctx: StepContext, parts: list[Any]) -> dict[str, Any]:
        statements = ctx.preprocess_result["statements"]
        evidence = relevancy_evidence(
            shared_embedder(models.embedder), ctx.input_text, statements, ctx.output_text
        )
        reads, whole = _split_reads(model, parts, RELEVANCY_LABELS)
        results = []
        for index, features in enumerate(evidence):
            if reads:
                scores = reads[index]
                features = {**features, **read_features(scores.labels, scores.logprobs)}
            results.append(verdict(model.probabilities({**features, **whole})))
        return {"results": results}

    return PromptStep(render, labels=RELEVANCY_LABELS)


def similarity_step(
    models: VerdictModels,
    analysis: Callable[
        [StepContext, list[str], list[str], list[list[dict[str, float]]]], dict[str, Any]
    ],
) -> Any:
    """The analyze step: the reads the model uses (one per (reference unit, answer unit),
    one of the whole reference against the whole answer), with the evidence;
    ``analysis(context, references, answers, table)`` turns the probability table (one row
    per reference unit, one cell per answer unit) into matches."""
    gated = models.models.similarity

    def chosen(ctx: StepContext) -> tuple[dict[str, float], VerdictModel]:
        """The item's features and the model that judges it."""
        item = item_features(ctx.ground_truth, ctx.output_text)
        return item, for_item(gated, item)

    def pairs(ctx: StepContext, model: VerdictModel) -> list[tuple[int, int]]:
        if not _pair_reads(model):
            return []
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
        _, model = chosen(ctx)
        prompts = [
            render_prompt(
                "answer-similarity",
                ctx.language,
                "verdict",
                {"ground_truth_unit": references[i], "output": answers[j]},
            )
            for i, j in pairs(ctx, model)
        ]
        reference = whole_reference(ctx.ground_truth)
        if _whole_read(model):
            shown = {"ground_truth_unit": reference, "output": ctx.output_text}
            prompts.append(render_prompt("answer-similarity", ctx.language, "verdict", shown))
        labels: list[tuple[str, ...]] = [SIMILARITY_LABELS] * len(prompts)
        if _match_read(model):
            shown = {
                "question": ctx.input_text,
                "reference": reference,
                "output": ctx.output_text,
            }
            prompts.append(render_prompt("answer-similarity", ctx.language, "match", shown))
            labels.append(MATCH_LABELS)
        if not prompts:  # the gate chose a model that reads nothing: no judge call
            return Skip(merge(ctx, []))
        return Parts(prompts=prompts, merge=merge, labels=labels)

    def merge(ctx: StepContext, parts: list[Any]) -> dict[str, Any]:
        units = ctx.preprocess_result
        references, answers = units["ground_truth_units"], units["output_units"]
        evidence = unit_evidence(models, ctx)
        item, model = chosen(ctx)
        pair_parts, whole = _split_reads(model, parts, SIMILARITY_LABELS)
        whole = {**item, **whole}
        reads = dict(zip(pairs(ctx, model), pair_parts, strict=True))

        def features(i: int, j: int, cell: dict[str, float]) -> dict[str, float]:
            if (i, j) in reads:
                cell = {**cell, **read_features(reads[i, j].labels, reads[i, j].logprobs)}
            return {**cell, **whole}

        table = [
            [model.probabilities(features(i, j, cell)) for j, cell in enumerate(row)]
            for i, row in enumerate(evidence)
        ]
        return analysis(ctx, references, answers, table)

    return PromptStep(render, labels=SIMILARITY_LABELS)
