"""The result types of ``run_evals``: what reports, the CLI and CI read."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from offline_scorer.pipeline._results import ScoreResult


class Threshold(BaseModel):
    """Bounds on a scorer's mean score; the run passes when the mean lies within them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    minimum: float | None = None
    maximum: float | None = None

    def accepts(self, mean: float | None) -> bool:
        """Whether ``mean`` satisfies the bounds (no mean at all never passes)."""
        if mean is None:
            return False
        if self.minimum is not None and mean < self.minimum:
            return False
        return not (self.maximum is not None and mean > self.maximum)

    def describe(self) -> str:
        """The bounds in words, e.g. ``>= 0.7`` or ``0.2..0.9``."""
        if self.minimum is not None and self.maximum is not None:
            return f"{self.minimum:g}..{self.maximum:g}"
        if self.minimum is not None:
            return f">= {self.minimum:g}"
        return f"<= {self.maximum:g}" if self.maximum is not None else "any"


class RowProblem(BaseModel):
    """A dataset row that could not be used, with where it was and why."""

    model_config = ConfigDict(extra="forbid")

    line: int = Field(description="1-based line (JSONL, CSV) or position (JSON, lists).")
    message: str


class ScorerSummary(BaseModel):
    """Aggregates of one scorer over all items."""

    model_config = ConfigDict(extra="forbid")

    scorer_id: str
    mean: float | None = Field(None, description="Mean over scored items, not rounded.")
    scored: int = 0
    not_scorable: int = 0
    failed: int = 0
    threshold: Threshold | None = None
    passed: bool | None = Field(None, description="Whether the threshold holds (None: none).")
    histogram: list[int] = Field(
        default_factory=list, description="Counts of scores in 10 equal bins from 0 to scale."
    )
    scale: float = 1.0


class EvalItem(BaseModel):
    """One dataset item: its texts, the target's answer and every scorer's result."""

    model_config = ConfigDict(extra="forbid")

    index: int
    item_id: str
    input: Any = None
    output: Any = None
    ground_truth: Any = None
    request_context: dict[str, Any] | None = None
    target_error: str | None = Field(None, description="Set when the target failed here.")
    results: dict[str, ScoreResult] = Field(default_factory=dict)


class EvalSummary(BaseModel):
    """The summary of a whole evaluation."""

    model_config = ConfigDict(extra="forbid")

    total_items: int
    scorers: dict[str, ScorerSummary]
    verdict: Literal["passed", "failed"] | None = None
    model_id: str | None = None
    model_fingerprint: str | None = None
    seconds: float = 0.0
    skipped_rows: list[RowProblem] = Field(default_factory=list)
    interrupted: bool = Field(False, description="Stopped early (Ctrl-C); items are partial.")
    cache_hits: int | None = Field(None, description="Judge answers served from the cache.")
    cache_misses: int | None = Field(None, description="Judge answers the model generated.")


class EvalResult(BaseModel):
    """What ``run_evals`` returns: means per scorer id, the summary and every item."""

    model_config = ConfigDict(extra="forbid")

    scores: dict[str, float | None]
    summary: EvalSummary
    items: list[EvalItem]

    @property
    def passed(self) -> bool:
        """True unless a threshold failed."""
        return self.summary.verdict != "failed"
