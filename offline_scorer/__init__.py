"""offline-scorer: LLM-as-judge scorers on a local open-weights model, fully offline.

Importing this package is cheap: torch, transformers and outlines load only when a model
is loaded. Importing it also switches the Hugging Face libraries to offline mode.

Example:
    >>> from offline_scorer import create_answer_relevancy_scorer
    >>> scorer = create_answer_relevancy_scorer()  # doctest: +SKIP
    >>> scorer.run(input="What is the capital of France?", output="Paris.").score  # doctest: +SKIP
    1.0
"""

from offline_scorer._offline import force_offline

force_offline()

from offline_scorer._exceptions import (  # noqa: E402
    ConfigurationError,
    ContextLengthError,
    DataError,
    JudgeOutputError,
    ModelLoadError,
    OfflineScorerError,
    ReplayMissError,
    ScorerRunError,
    UnknownModelError,
    UnknownScorerError,
)
from offline_scorer.evals import (  # noqa: E402
    DataItem,
    Dataset,
    EvalItem,
    EvalResult,
    EvalSummary,
    Fields,
    LocalAgent,
    RowProblem,
    RunConfig,
    ScorerSummary,
    Threshold,
    load_dataset,
    run_evals,
)
from offline_scorer.judges import (  # noqa: E402
    DEFAULT_MODEL,
    Answer,
    CachedJudge,
    GenerationSettings,
    ItemUsage,
    Judge,
    JudgeCall,
    JudgeConfig,
    LoadedModel,
    ModelCard,
    RecordingJudge,
    ReplayJudge,
    ResultCache,
    TransformersJudge,
    list_model_cards,
    load_model,
)
from offline_scorer.pipeline import (  # noqa: E402
    NotScorable,
    PromptStep,
    Scorer,
    ScoreResult,
    Skip,
    StepContext,
    StepStats,
    create_scorer,
    not_scorable,
    template_prompt,
)
from offline_scorer.scorers import (  # noqa: E402
    create_answer_relevancy_scorer,
    create_answer_similarity_scorer,
    relevancy_score,
    round_half_up,
    similarity_score,
)
from offline_scorer.scorers._registry import get_scorer, scorer_ids  # noqa: E402

__all__ = [
    "Answer",
    "CachedJudge",
    "ConfigurationError",
    "ContextLengthError",
    "DEFAULT_MODEL",
    "DataError",
    "DataItem",
    "Dataset",
    "EvalItem",
    "EvalResult",
    "EvalSummary",
    "Fields",
    "GenerationSettings",
    "ItemUsage",
    "Judge",
    "JudgeCall",
    "JudgeConfig",
    "JudgeOutputError",
    "LoadedModel",
    "LocalAgent",
    "ModelCard",
    "ModelLoadError",
    "NotScorable",
    "OfflineScorerError",
    "PromptStep",
    "RecordingJudge",
    "ReplayJudge",
    "ReplayMissError",
    "ResultCache",
    "RowProblem",
    "RunConfig",
    "ScoreResult",
    "Scorer",
    "ScorerRunError",
    "ScorerSummary",
    "Skip",
    "StepContext",
    "StepStats",
    "Threshold",
    "TransformersJudge",
    "UnknownModelError",
    "UnknownScorerError",
    "create_answer_relevancy_scorer",
    "create_answer_similarity_scorer",
    "create_scorer",
    "get_scorer",
    "list_model_cards",
    "load_dataset",
    "load_model",
    "not_scorable",
    "relevancy_score",
    "round_half_up",
    "run_evals",
    "scorer_ids",
    "similarity_score",
    "template_prompt",
]
