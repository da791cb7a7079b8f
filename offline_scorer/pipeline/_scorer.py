"""Scorers as pipelines of up to four steps, run stage by stage over a batch of runs.

The steps run in this order: ``preprocess``, ``analyze``, ``generate_score``,
``generate_reason``. A step is a :class:`PromptStep` (the judge answers a rendered prompt,
constrained to a schema or as free text) or a plain function of the :class:`StepContext`.
``run_batch`` sends every pending run's prompt of one stage to the judge in ONE call, then
moves to the next stage; ``run`` is ``run_batch`` of one run.
"""

from __future__ import annotations

import math
import os
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from pydantic import BaseModel

from offline_scorer._exceptions import ConfigurationError, ScorerRunError
from offline_scorer._text import extract_text, ground_truth_text
from offline_scorer.judges._factory import LazyJudge
from offline_scorer.judges._keys import Prompt
from offline_scorer.judges._protocol import ItemUsage, Judge, Request
from offline_scorer.judges._protocol import ask as ask_judge
from offline_scorer.judges._settings import JudgeConfig
from offline_scorer.pipeline import _alternatives
from offline_scorer.pipeline._alternatives import References
from offline_scorer.pipeline._prompts import DEFAULT_LANGUAGE, render_prompt
from offline_scorer.pipeline._results import STEP_ORDER, ScoreResult, StepStats
from offline_scorer.pipeline._steps import (
    FunctionStep,
    NotScorable,
    Parts,
    PromptStep,
    Renderer,
    SchemaFor,
    Skip,
    Step,
    StepContext,
)


@dataclass
class _Run:
    context: StepContext
    result: ScoreResult
    done: bool = False


@dataclass
class _Ask:
    """One prompt to send for one run (one of several when the renderer returned Parts)."""

    state: _Run
    prompt: Prompt
    schema: type[BaseModel] | None
    parts: Parts | None
    labels: tuple[str, ...] | None = None


class Scorer:
    """A named pipeline of steps sharing one judge. Build it with :func:`create_scorer`."""

    def __init__(
        self,
        *,
        id: str,
        name: str,
        description: str,
        judge: Judge | Callable[[], Judge] | None,
        steps: Mapping[str, Step],
        options: BaseModel | None = None,
        language: str = DEFAULT_LANGUAGE,
        needs_ground_truth: bool = False,
        references: References | None = None,
    ):
        self.id = id
        self.references = references
        self.needs_ground_truth = needs_ground_truth
        self.name = name
        self.description = description
        self.options = options
        self.language = language
        self.steps = dict(steps)
        self._judge_source = judge
        self._judge: Judge | None = None if callable(judge) and not _is_judge(judge) else judge  # type: ignore[assignment]

    @property
    def judge(self) -> Judge:
        """The judge (built on first use when the scorer was given a model reference)."""
        if self._judge is None:
            if self._judge_source is None:
                raise ConfigurationError(f"Scorer '{self.id}' has prompt steps but no judge.")
            self._judge = self._judge_source()  # type: ignore[operator]
        return self._judge

    @property
    def judge_config(self) -> JudgeConfig | None:
        """The configuration that rebuilds this scorer's judge (None for a judge that was
        not built from one, such as a replay or fake judge)."""
        source = self._judge_source
        if isinstance(source, LazyJudge):
            return source.config
        config = getattr(source, "config", None)
        return config if isinstance(config, JudgeConfig) else None

    def options_dict(self) -> dict[str, Any]:
        """The options this scorer runs with, as a plain dict."""
        return self.options.model_dump() if self.options is not None else {}

    def run(
        self,
        *,
        input: Any = None,
        output: Any = None,
        ground_truth: Any = None,
        run_id: str | None = None,
        request_context: dict[str, Any] | None = None,
    ) -> ScoreResult:
        """Score one run.

        Returns:
            The result; its status is ``scored`` or ``not_scorable``.

        Raises:
            ScorerRunError: a step failed (``Scorer run failed: ...``, with partial results).
            TypeError: ``input`` or ``output`` is not an accepted shape.
        """
        request = {
            "input": input,
            "output": output,
            "ground_truth": ground_truth,
            "run_id": run_id,
            "request_context": request_context,
        }
        result = self.run_batch([request])[0]
        if result.status == "failed":
            raise ScorerRunError(
                result.error or "Scorer run failed",
                step=result.failed_step or "?",
                partial=result.model_dump(),
            )
        return result

    def run_batch(self, runs: Iterable[Mapping[str, Any]]) -> list[ScoreResult]:
        """Score many runs, one judge call per stage for the whole batch.

        Each run is a mapping with ``input``, ``output`` and optionally ``ground_truth``,
        ``run_id`` and ``request_context``. A run whose step fails is returned with status
        ``failed``; the other runs of the batch keep going. When the scorer was built with
        ``references``, a run with several alternative references is scored against each
        and keeps the best (``reference_index`` and ``references`` in its result).

        Raises:
            TypeError: a run's ``input`` or ``output`` is not an accepted shape (checked for
                every run before any model call).
        """
        members, groups = _alternatives.expand(list(runs), self.references)
        states = [self._start(position, run) for position, run in members]
        for step_name in STEP_ORDER:
            if step_name == "generate_reason":
                # Only the best of a run's alternative references is explained.
                _alternatives.drop_losers(groups, states)
            step = self.steps.get(step_name)
            pending = [state for state in states if not state.done]
            if step is None or not pending:
                continue
            if isinstance(step, PromptStep):
                self._prompt_stage(step_name, step, pending)
            else:
                self._function_stage(step_name, step, pending)
        for state in states:
            if not state.done:
                state.result.status = "scored"
                state.result.score = state.context.results.get("generate_score")
        return _alternatives.results(groups, states)

    # ----------------------------------------------------------------- stages

    def _start(self, position: int, run: Mapping[str, Any]) -> _Run:
        if not isinstance(run, Mapping):
            raise TypeError(f"run {position}: expected a dict, got {type(run).__name__}.")
        run_id = str(run.get("run_id") or uuid.uuid4())
        context = StepContext(
            run_id=run_id,
            input=run.get("input"),
            output=run.get("output"),
            ground_truth=run.get("ground_truth"),
            request_context=run.get("request_context"),
            input_text=extract_text(
                run.get("input"), side="input", field=f"runs[{position}].input"
            ),
            output_text=extract_text(
                run.get("output"), side="output", field=f"runs[{position}].output"
            ),
            options=self.options,
            language=self.language,
        )
        result = ScoreResult(
            run_id=run_id,
            scorer_id=self.id,
            scorer_options=self.options_dict(),
            status="failed",  # until the run completes
            input=context.input,
            output=context.output,
            ground_truth=context.ground_truth,
            request_context=context.request_context,
            language=self.language,
        )
        return _Run(context, result)

    def _prompt_stage(self, name: str, step: PromptStep, pending: list[_Run]) -> None:
        asking: list[_Ask] = []
        for state in pending:
            started = time.perf_counter()
            try:
                rendered = step.render(state.context)
                if isinstance(rendered, (Skip, NotScorable)):
                    self._settle(name, state, rendered, started)
                    continue
                parts = rendered if isinstance(rendered, Parts) else None
                prompts: list[Prompt] = parts.prompts if parts else [cast(Prompt, rendered)]
                schemas = (
                    list(parts.schemas)
                    if parts and parts.schemas is not None
                    else [_schema_for(step.schema, state.context)] * len(prompts)
                )
            except Exception as error:
                self._fail(name, state, error)
                continue
            recorded = [dict(m) for prompt in prompts for m in prompt]
            setattr(state.result, f"{name}_prompt", recorded)
            labels = (
                list(parts.labels)
                if parts and parts.labels is not None
                else [step.labels] * len(prompts)
            )
            asking.extend(
                _Ask(state, prompt, schema, parts, label)
                for prompt, schema, label in zip(prompts, schemas, labels, strict=True)
            )
        if asking:
            self._ask_judge(name, step, asking)

    def _ask_judge(self, name: str, step: PromptStep, asking: list[_Ask]) -> None:
        prompts = [ask.prompt for ask in asking]
        try:
            judge = self.judge
            if step.labels is not None:
                request = Request.label_read(prompts, [ask.labels or step.labels for ask in asking])
            elif asking[0].schema is not None:
                request = Request.json(prompts, [ask.schema for ask in asking])  # type: ignore[misc]
            else:
                request = Request.text(prompts)
            answers = ask_judge(judge, request)
        except Exception as error:
            for ask in asking:
                if not ask.state.done:
                    self._fail(name, ask.state, error)
            return
        values = [answer.outcome for answer in answers]
        usages = [answer.usage for answer in answers]
        grouped: dict[int, list[tuple[_Ask, Any, ItemUsage]]] = {}
        for ask, answer, usage in zip(asking, values, usages, strict=True):
            grouped.setdefault(id(ask.state), []).append((ask, answer, usage))
        for group in grouped.values():
            self._take_answers(name, step, judge, group)

    def _take_answers(
        self, name: str, step: PromptStep, judge: Judge, group: list[tuple[_Ask, Any, ItemUsage]]
    ) -> None:
        state, parts = group[0][0].state, group[0][0].parts
        state.result.model_id = judge.model_id
        state.result.model_fingerprint = judge.fingerprint
        usages = [item for _, _, item in group]
        state.result.steps[name] = StepStats(
            seconds=sum(u.seconds for u in usages),
            prompt_tokens=sum(u.prompt_tokens for u in usages),
            generated_tokens=sum(u.generated_tokens for u in usages),
            model_call=True,
            cached=all(u.cached for u in usages),
            truncated=any(u.truncated for u in usages),
        )
        failure = next((a for _, a, _ in group if isinstance(a, BaseException)), None)
        if failure is not None:
            self._fail(name, state, failure)
            return
        try:
            values = [
                step.to_result(state.context, answer) if step.to_result else _plain(answer)
                for _, answer, _ in group
            ]
            value = parts.merge(state.context, values) if parts else values[0]
        except Exception as error:
            self._fail(name, state, error)
            return
        self._store(name, state, value)

    def _function_stage(self, name: str, step: FunctionStep, pending: list[_Run]) -> None:
        for state in pending:
            started = time.perf_counter()
            try:
                value = step(state.context)
                if name == "generate_score" and not isinstance(value, NotScorable):
                    value = _check_score(value)
            except Exception as error:
                self._fail(name, state, error)
                continue
            self._settle(name, state, value, started)

    # ----------------------------------------------------------------- bookkeeping

    def _settle(self, name: str, state: _Run, value: Any, started: float) -> None:
        state.result.steps[name] = StepStats(seconds=time.perf_counter() - started)
        if isinstance(value, NotScorable):
            state.result.status = "not_scorable"
            state.result.not_scorable_reason = value.reason
            state.done = True
            return
        self._store(name, state, value.result if isinstance(value, Skip) else value)

    def _store(self, name: str, state: _Run, value: Any) -> None:
        state.context.results[name] = value
        if name in ("preprocess", "analyze"):
            setattr(state.result, f"{name}_step_result", value)
        elif name == "generate_score":
            state.result.score = value
        elif name == "generate_reason":
            state.result.reason = value if isinstance(value, str) else str(value)

    def _fail(self, name: str, state: _Run, error: BaseException) -> None:
        state.result.status = "failed"
        state.result.score = None
        state.result.failed_step = name
        state.result.error = (
            f"Scorer run failed: step '{name}' of scorer '{self.id}' (run {state.context.run_id}): "
            f"{type(error).__name__}: {error}"
        )
        state.done = True


def create_scorer(
    *,
    id: str,
    name: str | None = None,
    description: str = "",
    judge: Judge | Callable[[], Judge] | None = None,
    model: str | JudgeConfig | None = None,
    preprocess: Step | None = None,
    analyze: Step | None = None,
    generate_score: FunctionStep | None = None,
    generate_reason: Step | None = None,
    options: BaseModel | None = None,
    language: str = DEFAULT_LANGUAGE,
    needs_ground_truth: bool = False,
    references: References | None = None,
) -> Scorer:
    """Build a scorer from up to four steps.

    Args:
        id: the scorer id recorded in every result.
        name: a human name (defaults to the id).
        description: what the scorer measures.
        judge: the judge for prompt steps, or a function building it on first use.
        model: instead of ``judge``, a model reference (card name, HF directory, .gguf)
            or a :class:`JudgeConfig`;
            scorers with the same model share one loaded judge.
        preprocess: optional first step (prompt step or function).
        analyze: optional second step (prompt step or function).
        generate_score: required; a pure function returning a number or
            :func:`not_scorable`.
        generate_reason: optional last step (prompt step or function).
        options: the scorer's options (recorded in each result).
        language: prompt language passed to the steps.
        needs_ground_truth: every run needs a ground truth (lets ``run_evals`` and the CLI
            refuse a dataset without one before any model loads).
        references: a function of a run's ground truth returning its alternative
            references (a list of strings), or None for a single reference; a run with
            alternatives is scored against each and keeps the best.

    Raises:
        ConfigurationError: ``generate_score`` is missing, or a prompt step has no judge.

    Example:
        >>> scorer = create_scorer(id="length", generate_score=lambda ctx: len(ctx.output_text))
        >>> scorer.run(input="q", output="four").score
        4.0
    """
    if generate_score is None or isinstance(generate_score, PromptStep):
        raise ConfigurationError(
            f"Scorer '{id}' needs a generate_score step: a plain function that computes the "
            "score from the earlier step results."
        )
    steps: dict[str, Step] = {"generate_score": generate_score}
    for step_name, step in (
        ("preprocess", preprocess),
        ("analyze", analyze),
        ("generate_reason", generate_reason),
    ):
        if step is None:
            continue
        if not isinstance(step, PromptStep) and not callable(step):
            raise ConfigurationError(
                f"Scorer '{id}': step '{step_name}' must be a PromptStep or a function."
            )
        steps[step_name] = step
    if model is not None:
        if judge is not None:
            raise ConfigurationError(f"Scorer '{id}': pass either judge= or model=, not both.")
        judge = LazyJudge(JudgeConfig.from_options(model))
    if judge is None and any(isinstance(s, PromptStep) for s in steps.values()):
        raise ConfigurationError(
            f"Scorer '{id}' has prompt steps but no judge; pass judge= (a Judge, e.g. "
            "TransformersJudge() or ReplayJudge(path))."
        )
    return Scorer(
        id=id,
        name=name or id,
        description=description,
        judge=judge,
        steps=steps,
        options=options,
        language=language,
        needs_ground_truth=needs_ground_truth,
        references=references,
    )


def template_prompt(
    scorer: str, step: str, *, folder: str | os.PathLike[str] | None = None
) -> Renderer:
    """A prompt renderer from a template file ``<folder>/<scorer>/<language>/<step>.jinja``.

    The template sees ``input``, ``output`` and ``ground_truth`` (as text), ``options``,
    ``request_context`` and ``results`` (the earlier steps' results by step name).

    Example:
        >>> step = PromptStep(template_prompt("tone", "analyze", folder="my_prompts"),
        ...                   schema=ToneVerdict)  # doctest: +SKIP
    """

    def render(ctx: StepContext) -> Prompt:
        variables = {
            "input": ctx.input_text,
            "output": ctx.output_text,
            "ground_truth": ground_truth_text(ctx.ground_truth) or "",
            "options": ctx.options.model_dump() if isinstance(ctx.options, BaseModel) else {},
            "request_context": ctx.request_context or {},
            "results": dict(ctx.results),
        }
        return render_prompt(scorer, ctx.language, step, variables, folder=folder)

    return render


def _is_judge(value: Any) -> bool:
    return hasattr(value, "generate_json") and hasattr(value, "generate_text")


def _schema_for(schema: SchemaFor, context: StepContext) -> type[BaseModel] | None:
    """The schema of one run: a fixed model, one built by a factory, or None (free text)."""
    if schema is None or (isinstance(schema, type) and issubclass(schema, BaseModel)):
        return schema
    factory = cast(Callable[[StepContext], type[BaseModel]], schema)
    return factory(context)


def _plain(answer: Any) -> Any:
    return answer.model_dump() if isinstance(answer, BaseModel) else answer


def _check_score(value: Any) -> float:

    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"generate_score must return a number, got {type(value).__name__}.")
    if not math.isfinite(value):
        raise ValueError(f"generate_score returned {value}, which is not a finite number.")
    return float(value)
