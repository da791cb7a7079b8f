"""Evaluating datasets: data loading, ``run_evals``, the local agent, and the Ray backend."""

from offline_scorer.evals._agent import LocalAgent
from offline_scorer.evals._config import RunConfig
from offline_scorer.evals._data import DataItem, Dataset, Fields, load_dataset
from offline_scorer.evals._run import run_evals
from offline_scorer.evals._types import (
    EvalItem,
    EvalResult,
    EvalSummary,
    RowProblem,
    ScorerSummary,
    Threshold,
)

__all__ = [
    "DataItem",
    "Dataset",
    "EvalItem",
    "EvalResult",
    "EvalSummary",
    "Fields",
    "LocalAgent",
    "RowProblem",
    "RunConfig",
    "ScorerSummary",
    "Threshold",
    "load_dataset",
    "run_evals",
]
