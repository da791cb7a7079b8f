"""The transformers backend: loading (with GGUF conversion), the Outlines constraint, the judge.

Importing it is cheap; torch, transformers and outlines load on first use.
"""

from offline_scorer.judges.transformers._judge import TransformersJudge
from offline_scorer.judges.transformers._loading import LoadedModel, load_model

__all__ = ["LoadedModel", "TransformersJudge", "load_model"]
