"""One builder for the built-in scorers: options, judge, modes and steps in one place.

A built-in scorer is a :class:`ScorerDefinition` (its id, names, options model, steps and
formula). :func:`scorer_factory` turns a definition into its public ``create_*_scorer``
function, whose keyword arguments, defaults and docstring come from the options model: an
option is written once, in that model, and every other place (factories, the registry,
the CLI's help, reports) reads it from there.
"""

from __future__ import annotations

import inspect
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from offline_scorer._exceptions import ConfigurationError
from offline_scorer.judges._factory import LazyJudge
from offline_scorer.judges._protocol import Judge
from offline_scorer.judges._settings import LOAD_OPTIONS, GenerationSettings, JudgeConfig
from offline_scorer.pipeline._alternatives import References
from offline_scorer.pipeline._prompts import DEFAULT_LANGUAGE, check_language
from offline_scorer.pipeline._scorer import Scorer, create_scorer
from offline_scorer.pipeline._steps import PromptStep, StepContext
from offline_scorer.scorers._modes import ModeOptions, Modes, resolve_modes

JudgeSource = Judge | LazyJudge


@dataclass(frozen=True)
class ScorerDefinition:
    """What makes one built-in scorer: everything but its judge and option values."""

    id: str
    """The full id recorded in results (``answer-relevancy-scorer``)."""
    name: str
    description: str
    kind: Literal["relevancy", "similarity"]
    """Which fitted verdict model the scorer reads."""
    options: type[ModeOptions]
    """The options model: the one source of every option's name, default and meaning."""
    steps: Callable[[Modes], tuple[Any, Any]]
    """The preprocess and analyze steps for the resolved modes."""
    score: Callable[[StepContext], Any]
    reason: Callable[[StepContext], Any]
    """Renders the reason prompt."""
    summary: str
    """The factory's docstring before its generated Args section."""
    needs_ground_truth: Callable[[Any], bool] = lambda options: False
    references: Callable[[Any], References | None] = lambda options: None


def build_options(options_class: type[BaseModel], scorer_id: str, values: dict[str, Any]) -> Any:
    """Validate options; a bad one raises ConfigurationError (a ValueError) naming it."""
    try:
        return options_class(**values)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in issue['loc'])}={issue.get('input')!r}: {issue['msg']}"
            for issue in error.errors()
        )
        raise ConfigurationError(f"Invalid option for {scorer_id}: {problems}") from None


def judge_source(
    judge: Judge | None, model: str | JudgeConfig | None, **settings: Any
) -> JudgeSource:
    """The judge a scorer uses: the one given, or the shared judge of a configuration.

    Raises:
        ConfigurationError: both ``judge`` and ``model`` (or judge settings) were given.
    """
    if judge is not None:
        if model is not None or settings:
            raise ConfigurationError(
                "Pass either judge= (a ready judge) or model= and judge settings, not both."
            )
        return judge
    return LazyJudge(JudgeConfig.from_options(model, **settings))


def source_card(source: JudgeSource) -> Any:
    """The model card behind a judge source (None for judges without one)."""
    if isinstance(source, LazyJudge):
        return source.config.card
    return getattr(source, "model_card", None)


def source_backend(source: JudgeSource) -> str | None:
    """The backend a judge source runs on, when it says (None for replay and fake judges)."""
    if isinstance(source, LazyJudge):
        return source.config.backend
    return getattr(source, "backend", None)


def build_scorer(
    definition: ScorerDefinition,
    *,
    model: str | JudgeConfig | None = None,
    judge: Judge | None = None,
    language: str = DEFAULT_LANGUAGE,
    **values: Any,
) -> Scorer:
    """Build a built-in scorer: validate its options, find its judge, resolve its modes.

    Raises:
        ConfigurationError: an unknown or invalid option (the message names it), an
            unknown language, or both ``judge`` and ``model``.
    """
    fields = definition.options.model_fields
    chosen = {k: v for k, v in values.items() if k in fields}
    settings = {k: v for k, v in values.items() if k not in fields}
    # A name that is neither an option nor a judge setting goes to the options model, whose
    # error names it (extra="forbid").
    options = build_options(definition.options, definition.id, chosen | _unknown(settings))
    check_language(language)
    source = judge_source(judge, model, **settings)
    modes = resolve_modes(
        definition.kind, source_card(source), options, language, source_backend(source)
    )
    options = options.model_copy(
        update={
            "verdicts": modes.verdicts,
            "scoring": modes.scoring,
            "extraction": modes.extraction,
        }
    )
    preprocess, analyze = definition.steps(modes)
    return create_scorer(
        id=definition.id,
        name=definition.name,
        description=definition.description,
        judge=source,
        preprocess=preprocess,
        analyze=analyze,
        generate_score=definition.score,
        generate_reason=PromptStep(definition.reason),
        options=options,
        language=language,
        needs_ground_truth=definition.needs_ground_truth(options),
        references=definition.references(options),
    )


def _unknown(settings: dict[str, Any]) -> dict[str, Any]:
    """The names that are neither options nor judge settings."""
    known = set(LOAD_OPTIONS) | {"backend"} | set(GenerationSettings.model_fields)
    return {k: v for k, v in settings.items() if k not in known}


def scorer_factory(definition: ScorerDefinition, name: str) -> Callable[..., Scorer]:
    """The public ``create_*_scorer`` function of a definition.

    Its signature (shown by ``help()`` and editors that read ``inspect.signature``) and its
    docstring's Args section are generated from the options model.
    """

    def factory(
        *,
        model: str | JudgeConfig | None = None,
        judge: Judge | None = None,
        language: str = DEFAULT_LANGUAGE,
        **options: Any,
    ) -> Scorer:
        return build_scorer(definition, model=model, judge=judge, language=language, **options)

    factory.__name__ = factory.__qualname__ = name
    factory.__doc__ = _factory_doc(definition)
    factory.__signature__ = _factory_signature(definition.options)  # type: ignore[attr-defined]
    return factory


def _factory_signature(options: type[BaseModel]) -> inspect.Signature:
    keyword = inspect.Parameter.KEYWORD_ONLY
    parameters = [
        inspect.Parameter("model", keyword, default=None, annotation="str | JudgeConfig | None"),
        inspect.Parameter("judge", keyword, default=None, annotation="Judge | None"),
        inspect.Parameter("language", keyword, default=DEFAULT_LANGUAGE, annotation="str"),
    ]
    for field_name, field in options.model_fields.items():
        annotation = inspect.formatannotation(field.annotation)
        parameters.append(
            inspect.Parameter(field_name, keyword, default=field.default, annotation=annotation)
        )
    parameters.append(
        inspect.Parameter("judge_settings", inspect.Parameter.VAR_KEYWORD, annotation="Any")
    )
    return inspect.Signature(parameters, return_annotation="Scorer")


def _factory_doc(definition: ScorerDefinition) -> str:
    lines = [
        inspect.cleandoc(definition.summary),
        "",
        "Args:",
        "    model: a model card name, HF model directory or .gguf file, or a",
        "        :class:`JudgeConfig` (default: the embedded model). Scorers built with the",
        "        same configuration share one loaded judge.",
        "    judge: a ready judge instead of ``model`` (e.g. a ReplayJudge in tests).",
        "    language: prompt and reason language, ``en`` or ``fr``.",
    ]
    for field_name, field in definition.options.model_fields.items():
        text = f"{field_name}: {field.description} Default: {field.default!r}."
        lines += textwrap.wrap(text, 88, initial_indent="    ", subsequent_indent="        ")
    lines += [
        "    **judge_settings: with ``model``, the judge's load options and generation",
        "        settings (``device``, ``dtype``, ``threads``, ``batch_size``,",
        "        ``max_new_tokens_json``, ...; see :class:`JudgeConfig`).",
        "",
        "Raises:",
        "    ConfigurationError: an unknown or out-of-range option (the message names it; it",
        "        is a ValueError), an unknown language, or both ``judge`` and ``model``.",
    ]
    return "\n".join(lines)
