"""Helpers for users' own test suites (pytest or unittest).

:func:`assert_score` checks one scorer run against bounds and fails with a readable
message. :class:`FakeJudge` is a scripted judge, so a custom scorer can be tested without a
model: it satisfies the ``Judge`` protocol like the real judges do (no inheritance) and
goes through the same shared pieces, so schemas and labels are checked by the same
helpers, JSON answers are validated by the same parser (a scripted answer that does not
fit the schema fails exactly as a model's would), and every call returns one
:class:`Answer` per prompt, as a real judge's does.

Example:
    >>> from offline_scorer.testing import assert_score
    >>> assert_score(scorer, input="Capital of France?", output="Paris.", minimum=0.7)  # doctest: +SKIP
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pydantic import BaseModel

from offline_scorer._exceptions import ConfigurationError, ReplayMissError
from offline_scorer.judges._protocol import (
    LOGPROB_DIGITS,
    Answer,
    CallKind,
    CallLog,
    ItemUsage,
    JudgeBase,
    JudgeCall,
    LabelScores,
    Request,
    parse_json_output,
)
from offline_scorer.pipeline._results import ScoreResult
from offline_scorer.pipeline._scorer import Scorer

__all__ = ["Answer", "FakeJudge", "FakeRequest", "Rule", "assert_score"]


def assert_score(
    scorer: Scorer,
    *,
    input: Any = None,
    output: Any = None,
    ground_truth: Any = None,
    minimum: float | None = None,
    maximum: float | None = None,
) -> ScoreResult:
    """Score one run and fail with a readable message when the score is out of bounds.

    Args:
        scorer: the scorer to run.
        input: the question.
        output: the answer under test.
        ground_truth: the reference answer, for similarity scorers.
        minimum: the lowest acceptable score.
        maximum: the highest acceptable score.

    Returns:
        The result, for further checks.

    Raises:
        AssertionError: the run failed, was not scorable, or the score is out of bounds;
            the message shows the score, the reason and the step results.
    """
    result = scorer.run_batch([{"input": input, "output": output, "ground_truth": ground_truth}])[0]
    problem = None
    if result.status != "scored" or result.score is None:
        problem = f"no score ({result.status}): {result.error or result.not_scorable_reason}"
    elif minimum is not None and result.score < minimum:
        problem = f"score {result.score} is below the minimum {minimum}"
    elif maximum is not None and result.score > maximum:
        problem = f"score {result.score} is above the maximum {maximum}"
    if problem is not None:
        raise AssertionError(_describe(scorer, result, problem))
    return result


def _describe(scorer: Scorer, result: ScoreResult, problem: str) -> str:
    lines = [
        f"{scorer.id}: {problem}",
        f"  reason: {result.reason}",
        f"  output: {result.output!r}",
    ]
    for name in ("preprocess_step_result", "analyze_step_result"):
        value = getattr(result, name)
        if value is not None:
            # default=repr: a step result need not be JSON (label scores are a dataclass).
            shown = json.dumps(value, ensure_ascii=False, default=repr)
            lines.append(f"  {name}: {shown[:1500]}")
    return "\n".join(lines)


# ----------------------------------------------------------------- the scripted judge

JsonScript = Mapping[type[BaseModel] | str, Any] | Callable[..., Any]
"""Per schema (class or class name) an answer, or one function ``(prompt, schema)``."""


@dataclass(frozen=True)
class Rule:
    """A scripted answer for the requests whose last user message matches.

    Args:
        match: a substring of the last user message, or a compiled regular expression
            searched in it.
        answer: the answer (an exception fails the request). Without ``kind`` the answer's
            type says which requests it serves: an exception serves every kind, a ``str``
            text requests, a dict or pydantic object JSON requests, a
            :class:`LabelScores` label requests.
        kind: ``"json"``, ``"text"`` or ``"labels"``; needed for a function answer (called
            like the matching ``FakeJudge`` argument), for raw JSON text and for a dict of
            label log-probabilities.
    """

    match: str | re.Pattern[str]
    answer: Any
    kind: CallKind | None = None

    def serves(self, kind: CallKind, text: str) -> bool:
        """Whether this rule answers a request of ``kind`` whose last user message is ``text``."""
        if self.kind not in (None, kind):
            return False
        if isinstance(self.match, str):
            return self.match in text
        return self.match.search(text) is not None


@dataclass
class FakeRequest:
    """One prompt a :class:`FakeJudge` was asked, as it was asked.

    Attributes:
        kind: ``"json"``, ``"text"`` or ``"labels"``.
        messages: the chat messages (copied).
        schema: the requested schema of a JSON request.
        labels: the allowed labels of a label request.
        call: which call of this judge it came in (0 for the first call).
        index: its position in that call's batch.
    """

    kind: CallKind
    messages: list[dict[str, str]]
    schema: type[BaseModel] | None = None
    labels: tuple[str, ...] | None = None
    call: int = 0
    index: int = 0

    @property
    def last_user_message(self) -> str:
        """The content of the last ``user`` message ("" when there is none)."""
        users = [m["content"] for m in self.messages if m.get("role") == "user"]
        return users[-1] if users else ""


class FakeJudge(JudgeBase):
    """A scripted judge: answers come from the test, no model is loaded.

    For each prompt the first matching ``rules`` entry answers; otherwise the answer for
    the request's kind (``json`` by schema, ``text``, ``labels``); otherwise the prompt
    fails with a :class:`ReplayMissError` that shows it (nothing is ever guessed).

    An answer can be a value, a function of the request (see each argument), an exception
    instance (that prompt fails with it, as a judge's per-prompt failure), or an
    :class:`Answer` wrapping a value with its exact :class:`ItemUsage`. A function that
    raises makes the whole call raise, like a judge whose model cannot run.

    Usage, unless given by an :class:`Answer`: prompt tokens are the characters of the
    messages' contents // 4; generated tokens the characters of the answer (the JSON
    text, or the text) // 4, and 0 for label requests (nothing is decoded).

    Args:
        json: per schema (the class, or its ``__name__``) a dict, a pydantic object or raw
            JSON text, validated against the requested schema like a model's output; or
            ``f(prompt, schema)`` returning one of those, for every schema.
        text: the free-text answer, or ``f(prompt) -> str``. It is returned as is (with
            an assistant prefill, script the full answer, prefill included).
        labels: log-probabilities per label (``{"yes": -0.1, "no": -2.3}``, values <= 0,
            every asked label present), a :class:`LabelScores`, or
            ``f(prompt, labels)`` returning one of those.
        rules: :class:`Rule` objects or ``(match, answer)`` pairs, tried in order before
            the answers above.
        model_id: the model name results record (settable later).
        fingerprint: the fingerprint cache and replay keys use (default
            ``"<model_id>@fake"``; settable later).
        keep_requests: record every prompt in :attr:`requests`; turn off for long runs
            (memory then stays flat).

    Attributes:
        requests: every prompt asked, as :class:`FakeRequest` objects, in order.

    Example:
        >>> from pydantic import BaseModel
        >>> from offline_scorer import PromptStep, create_scorer
        >>> class Tone(BaseModel):
        ...     polite: bool
        >>> judge = FakeJudge(json={Tone: {"polite": True}}, text="It says please.",
        ...                   rules=[("rude", {"polite": False})])
        >>> ask = lambda ctx: [{"role": "user", "content": ctx.output_text}]
        >>> scorer = create_scorer(id="tone", judge=judge,
        ...                        analyze=PromptStep(ask, schema=Tone),
        ...                        generate_score=lambda ctx: float(ctx.analyze_result["polite"]),
        ...                        generate_reason=PromptStep(ask))
        >>> scorer.run(output="Please sit down.").score
        1.0
        >>> scorer.run(output="Sit down, rude one.").score
        0.0
        >>> judge.requests[0].schema is Tone, judge.usage_totals.calls
        (True, 4)
    """

    def __init__(
        self,
        *,
        json: JsonScript | None = None,
        text: Any = None,
        labels: Any = None,
        rules: Sequence[Rule | tuple[str | re.Pattern[str], Any]] = (),
        model_id: str = "fake-judge",
        fingerprint: str | None = None,
        keep_requests: bool = True,
    ):
        self.model_id = model_id
        self.fingerprint = fingerprint or f"{model_id}@fake"
        self.keep_requests = keep_requests
        self.requests: list[FakeRequest] = []
        self._json = json
        self._defaults: dict[CallKind, Any] = {"text": text, "labels": labels}
        self._rules = [_checked_rule(rule) for rule in rules]
        self._log = CallLog()
        self._lock = threading.Lock()
        self._calls = 0

    def answer(self, request: Request) -> list[Answer[Any]]:
        """One scripted answer per prompt of ``request`` (see the class docstring)."""
        asked = self._begin(request)
        started = time.perf_counter()
        # No lock is held while answering: scripted functions may block (tests of threads).
        answers = [Answer.of(*self._answer(item)) for item in asked]
        usages = [answer.usage for answer in answers]
        self._log.add(JudgeCall(request.kind, usages, time.perf_counter() - started))
        return answers

    # ----------------------------------------------------------------- internals

    def _begin(self, request: Request) -> list[FakeRequest]:
        with self._lock:
            call = self._calls
            self._calls += 1
        asked = [
            FakeRequest(
                request.kind,
                [dict(message) for message in prompt],
                schema=request.schemas[index] if request.schemas is not None else None,
                labels=request.labels[index] if request.labels is not None else None,
                call=call,
                index=index,
            )
            for index, prompt in enumerate(request.prompts)
        ]
        if self.keep_requests:
            with self._lock:
                self.requests.extend(asked)
        return asked

    def _answer(self, request: FakeRequest) -> tuple[Any, ItemUsage]:
        script = self._script_for(request)
        if script is None:
            return _miss(request), _usage(request, "")
        value = _call(script, request) if callable(script) else script
        explicit = value.usage if isinstance(value, Answer) else None
        if isinstance(value, Answer):
            value = value.outcome
        result, answer_text = _convert(request, value)
        return result, explicit or _usage(request, answer_text)

    def _script_for(self, request: FakeRequest) -> Any:
        text = request.last_user_message
        for rule in self._rules:
            if rule.serves(request.kind, text):
                return rule.answer
        if request.kind != "json":
            return self._defaults[request.kind]
        if self._json is None or callable(self._json):
            return self._json
        assert request.schema is not None
        by_class = self._json.get(request.schema)
        return by_class if by_class is not None else self._json.get(request.schema.__name__)


def _checked_rule(rule: Rule | tuple[str | re.Pattern[str], Any]) -> Rule:
    """A rule with its kind filled in from its answer's type (a clear error otherwise)."""
    if not isinstance(rule, Rule):
        rule = Rule(*rule)
    if rule.kind is not None:
        return rule
    value = rule.answer.outcome if isinstance(rule.answer, Answer) else rule.answer
    if isinstance(value, BaseException):
        return rule
    if isinstance(value, str):
        return replace(rule, kind="text")
    if isinstance(value, LabelScores):
        return replace(rule, kind="labels")
    if isinstance(value, (Mapping, BaseModel)):
        return replace(rule, kind="json")
    raise ConfigurationError(
        f"FakeJudge rule {rule.match!r}: say which requests a {type(value).__name__} answer "
        "serves with Rule(match, answer, kind='json' | 'text' | 'labels')."
    )


def _call(script: Callable[..., Any], request: FakeRequest) -> Any:
    if request.kind == "json":
        return script(request.messages, request.schema)
    if request.kind == "labels":
        return script(request.messages, request.labels)
    return script(request.messages)


def _convert(request: FakeRequest, value: Any) -> tuple[Any, str]:
    """The result a real judge would give for this scripted value, and the answer's text."""
    if isinstance(value, BaseException):
        return value, ""
    if request.kind == "labels":
        assert request.labels is not None
        return _label_scores(value, request.labels, request.index), ""
    if request.kind == "text":
        if isinstance(value, str):
            return value, value
        return _wrong_type(request, value, "a str"), ""
    assert request.schema is not None
    if isinstance(value, BaseModel):
        raw = value.model_dump_json()
    elif isinstance(value, Mapping):
        raw = json.dumps(value, ensure_ascii=False)
    elif isinstance(value, str):
        raw = value
    else:
        return _wrong_type(request, value, "a dict, a pydantic object or JSON text"), ""
    return parse_json_output(raw, request.schema, index=request.index), raw


def _label_scores(value: Any, labels: tuple[str, ...], index: int) -> Any:
    if isinstance(value, LabelScores):
        if value.labels != labels:
            return ConfigurationError(
                f"FakeJudge: scripted LabelScores for {list(value.labels)}, asked {list(labels)}."
            )
        return value
    if not isinstance(value, Mapping):
        return ConfigurationError(
            f"FakeJudge: a label answer is a dict of log-probabilities or a LabelScores, "
            f"not {type(value).__name__} (prompt {index})."
        )
    missing = [label for label in labels if label not in value]
    if missing:
        return ConfigurationError(f"FakeJudge: no scripted log-probability for {missing}.")
    logprobs = tuple(float(value[label]) for label in labels)
    if not all(math.isfinite(v) and v <= 0 for v in logprobs):
        return ConfigurationError(
            f"FakeJudge: label log-probabilities must be finite and <= 0, got {dict(value)} "
            "(for a probability p, pass math.log(p))."
        )
    return LabelScores(labels, tuple(round(v, LOGPROB_DIGITS) for v in logprobs))


def _wrong_type(request: FakeRequest, value: Any, expected: str) -> ConfigurationError:
    return ConfigurationError(
        f"FakeJudge: a {request.kind} answer must be {expected}, not {type(value).__name__} "
        f"(prompt {request.index})."
    )


def _miss(request: FakeRequest) -> ReplayMissError:
    asked = {"json": f"schema {getattr(request.schema, '__name__', '?')}", "text": "free text"}
    wanted = asked.get(request.kind) or f"labels {list(request.labels or ())}"
    return ReplayMissError(
        f"FakeJudge has no scripted answer for prompt {request.index} ({request.kind} "
        f"request, {wanted}); add one with json=, text=, labels= or a rule. Last user "
        f"message: {request.last_user_message[:300]!r}",
        index=request.index,
    )


def _usage(request: FakeRequest, answer_text: str) -> ItemUsage:
    prompt_chars = sum(len(message.get("content", "")) for message in request.messages)
    return ItemUsage(prompt_chars // 4, len(answer_text) // 4, 0.0)
