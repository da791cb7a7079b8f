"""The scorer pipeline: steps, :class:`Scorer`, :func:`create_scorer`, prompts and results."""

from offline_scorer.pipeline._results import ScoreResult, StepStats
from offline_scorer.pipeline._scorer import Scorer, create_scorer, template_prompt
from offline_scorer.pipeline._steps import (
    NotScorable,
    Parts,
    PromptStep,
    Skip,
    StepContext,
    not_scorable,
)

__all__ = [
    "NotScorable",
    "Parts",
    "PromptStep",
    "ScoreResult",
    "Scorer",
    "Skip",
    "StepContext",
    "StepStats",
    "create_scorer",
    "not_scorable",
    "template_prompt",
]
