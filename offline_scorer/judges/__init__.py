"""Judges: the only code that touches a model.

The :class:`Judge` protocol, model cards and resolution, generation settings, cache and
replay keys, the result cache, record/replay, the judge factory, and one sub-folder per
backend (``transformers/``). Importing this package never imports torch.
"""

from offline_scorer.judges._cache import CachedJudge, ResultCache
from offline_scorer.judges._cards import DEFAULT_MODEL, ModelCard, list_model_cards, resolve_model
from offline_scorer.judges._factory import BACKENDS, shared_judge
from offline_scorer.judges._keys import Prompt
from offline_scorer.judges._protocol import ItemUsage, Judge, JudgeCall, JudgeWrapper
from offline_scorer.judges._replay import RecordingJudge, ReplayJudge
from offline_scorer.judges._settings import GenerationSettings
from offline_scorer.judges.transformers import LoadedModel, TransformersJudge, load_model

__all__ = [
    "BACKENDS",
    "CachedJudge",
    "DEFAULT_MODEL",
    "GenerationSettings",
    "ItemUsage",
    "Judge",
    "JudgeCall",
    "JudgeWrapper",
    "LoadedModel",
    "ModelCard",
    "Prompt",
    "RecordingJudge",
    "ReplayJudge",
    "ResultCache",
    "TransformersJudge",
    "list_model_cards",
    "load_model",
    "resolve_model",
    "shared_judge",
]
