"""Judges: the only code that touches a model.

The :class:`Judge` protocol, model cards and resolution, generation settings, cache and
replay keys, the result cache, record/replay, the judge factory, and one sub-folder per
backend (``transformers/``). Importing this package never imports torch.
"""

from offline_scorer.judges._cache import CachedJudge, ResultCache
from offline_scorer.judges._cards import DEFAULT_MODEL, ModelCard, list_model_cards, resolve_model
from offline_scorer.judges._factory import BACKENDS, build_judge, shared_judge
from offline_scorer.judges._keys import Prompt
from offline_scorer.judges._protocol import (
    Answer,
    ItemUsage,
    Judge,
    JudgeBase,
    JudgeCall,
    JudgeWrapper,
    LabelScores,
    Request,
    outcomes,
    values,
)
from offline_scorer.judges._replay import RecordingJudge, ReplayJudge
from offline_scorer.judges._settings import GenerationSettings, JudgeConfig
from offline_scorer.judges.transformers import LoadedModel, TransformersJudge, load_model

__all__ = [
    "Answer",
    "BACKENDS",
    "CachedJudge",
    "DEFAULT_MODEL",
    "GenerationSettings",
    "ItemUsage",
    "Judge",
    "JudgeBase",
    "JudgeCall",
    "JudgeConfig",
    "JudgeWrapper",
    "LabelScores",
    "LoadedModel",
    "ModelCard",
    "Prompt",
    "RecordingJudge",
    "ReplayJudge",
    "Request",
    "ResultCache",
    "TransformersJudge",
    "build_judge",
    "list_model_cards",
    "load_model",
    "outcomes",
    "resolve_model",
    "shared_judge",
    "values",
]
