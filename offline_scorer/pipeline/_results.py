"""The result of one scorer run."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

STEP_ORDER = ("preprocess", "analyze", "generate_score", "generate_reason")

Status = Literal["scored", "not_scorable", "failed"]


class StepStats(BaseModel):
    """What one step of one run cost."""

    model_config = ConfigDict(extra="forbid")

    seconds: float = 0.0
    prompt_tokens: int = 0
    generated_tokens: int = 0
    model_call: bool = Field(False, description="Whether the judge was asked (cache hits count).")
    cached: bool = Field(False, description="Whether the answer came from a cache or recording.")
    truncated: bool = Field(False, description="Free text cut at its token budget.")


class ReferenceOutcome(BaseModel):
    """How a run scored against one of its alternative references."""

    model_config = ConfigDict(extra="forbid")

    ground_truth: str
    status: Status
    score: float | None = None
    error: str | None = None


class ScoreResult(BaseModel):
    """Everything about one scorer run: score, reason and the transcript of every step.

    ``status`` is ``scored`` (``score`` set), ``not_scorable`` (a step declared the run not
    scorable; ``not_scorable_reason`` says why) or ``failed`` (``error`` starts with
    ``Scorer run failed:`` and names ``failed_step``; results of the steps that completed
    are kept). ``score`` is never a silent default: it is None unless the run was scored.
    """

    model_config = ConfigDict(extra="forbid")

    run_id: str
    scorer_id: str
    scorer_options: dict[str, Any] = Field(default_factory=dict)
    status: Status
    score: float | None = None
    reason: str | None = None
    not_scorable_reason: str | None = None
    error: str | None = None
    failed_step: str | None = None
    input: Any = None
    output: Any = None
    ground_truth: Any = None
    reference_index: int | None = Field(
        None,
        description="With several references: which one (0-based) the score, the step "
        "results and the reason come from, the best-scoring one.",
    )
    references: list[ReferenceOutcome] | None = Field(
        None, description="With several references: the outcome against each, in order."
    )
    request_context: dict[str, Any] | None = None
    preprocess_prompt: list[dict[str, str]] | None = None
    preprocess_step_result: Any = None
    analyze_prompt: list[dict[str, str]] | None = None
    analyze_step_result: Any = None
    generate_reason_prompt: list[dict[str, str]] | None = None
    model_id: str | None = None
    model_fingerprint: str | None = None
    language: str | None = None
    steps: dict[str, StepStats] = Field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Whether the run produced a score."""
        return self.status == "scored"
