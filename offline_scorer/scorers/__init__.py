"""The built-in scorers."""

from offline_scorer.scorers._answer_relevancy import (
    AnswerRelevancyOptions,
    create_answer_relevancy_scorer,
    relevancy_score,
)
from offline_scorer.scorers._answer_similarity import (
    AnswerSimilarityOptions,
    create_answer_similarity_scorer,
)
from offline_scorer.scorers._common import round_half_up
from offline_scorer.scorers._similarity_score import similarity_score

__all__ = [
    "AnswerRelevancyOptions",
    "AnswerSimilarityOptions",
    "create_answer_relevancy_scorer",
    "create_answer_similarity_scorer",
    "relevancy_score",
    "round_half_up",
    "similarity_score",
]
