"""Scorers as pipelines of up to four steps, run stage by stage over a batch of runs.

The steps run in this order: ``preprocess``, ``analyze``, ``generate_score``,
``generate_reason``. A step is a :class:`PromptStep` (the judge answers a rendered prompt,
constrained to a schema or as free text) or a plain function of the :class:`StepContext`.
``run_batch`` sends every pending run's prompt of one stage to the judge in ONE call, then
moves to the next stage; ``run`` is ``run_batch`` of one run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Union

from pydantic import BaseModel

from offline_scorer.judges._keys import Prompt


@dataclass(frozen=True)
class NotScorable:
    """Returned by a step to stop its run without a score; ``reason`` says why."""

    reason: str


def not_scorable(reason: str) -> NotScorable:
    """Mark a run as not scorable, from inside a step.

    Example:
        >>> def preprocess(ctx):
        ...     return not_scorable("no answer given") if not ctx.output_text else {}
    """
    return NotScorable(reason)


@dataclass(frozen=True)
class Skip:
    """Returned by a prompt step's renderer: use ``result`` without asking the judge."""

    result: Any


@dataclass
class StepContext:
    """What a step sees: the run, the scorer options, and the earlier steps' results."""

    run_id: str
    input: Any
    output: Any
    ground_truth: Any
    request_context: dict[str, Any] | None
    input_text: str
    output_text: str
    options: Any
    language: str
    results: dict[str, Any] = field(default_factory=dict)

    @property
    def preprocess_result(self) -> Any:
        """The preprocess step's result (None when the scorer has none)."""
        return self.results.get("preprocess")

    @property
    def analyze_result(self) -> Any:
        """The analyze step's result (None when the scorer has none)."""
        return self.results.get("analyze")

    @property
    def score(self) -> Any:
        """The score computed by ``generate_score`` (available to ``generate_reason``)."""
        return self.results.get("generate_score")


@dataclass(frozen=True)
class Parts:
    """Returned by a prompt step's renderer: several prompts for one run.

    Used to split an input too long for one prompt (e.g. the chunks of a long answer). All
    parts go to the judge in the same call as the other runs' prompts; ``merge`` turns the
    parts' results (in order) into the step's result. A failed part fails the run.

    Attributes:
        prompts: one chat-message list per part.
        merge: ``merge(context, results) -> step result``.
        schemas: one schema per part, or None to use the step's schema for every part.
        labels: for a step that reads labels, one label tuple per part, or None to read the
            step's labels for every part (a step can ask one yes/no question beside its
            verdict reads).
    """

    prompts: list[Prompt]
    merge: Callable[[StepContext, list[Any]], Any]
    schemas: list[type[BaseModel] | None] | None = None
    labels: list[tuple[str, ...]] | None = None

    def __post_init__(self) -> None:
        for name in ("schemas", "labels"):
            given = getattr(self, name)
            if given is not None and len(given) != len(self.prompts):
                raise ValueError(
                    f"Parts has {len(self.prompts)} prompts but {len(given)} {name}: "
                    "give one per prompt, or None."
                )


Renderer = Callable[[StepContext], Prompt | Skip | NotScorable | Parts]
SchemaFor = Union[type[BaseModel], Callable[[StepContext], type[BaseModel]], None]


@dataclass(frozen=True)
class PromptStep:
    """A step answered by the judge.

    Args:
        render: builds the chat messages for one run (or returns :class:`Skip` /
            :class:`NotScorable`).
        schema: the pydantic model the answer must match, or a function building one per
            run; None means a free-text answer.
        to_result: turns the judge's answer into the stored step result (default: the
            validated object as a dict, or the text).
        labels: instead of a schema, a closed set of labels: the judge reads how likely
            each label is as the continuation of the prompt (``Judge.score_labels``, one
            forward pass, no decoding) and the answer is a :class:`LabelScores`.
    """

    render: Renderer
    schema: SchemaFor = None
    to_result: Callable[[StepContext, Any], Any] | None = None
    labels: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.labels is not None and self.schema is not None:
            raise ValueError("A PromptStep takes a schema or labels, not both.")


FunctionStep = Callable[[StepContext], Any]
Step = Union[PromptStep, FunctionStep]
