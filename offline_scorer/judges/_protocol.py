"""The judge protocol: what every judge offers, and the pieces judges share.

A judge has three batch calls. ``generate_json(prompts, schema)`` answers each prompt with
a validated pydantic object; ``generate_text(prompts)`` with a string;
``score_labels(prompts, labels)`` reads, in one forward pass and without decoding, how
likely the model is to continue each prompt with each of a closed set of labels (a
:class:`LabelScores`). Prompts are lists of chat messages (``{"role": ..., "content": ...}``);
a final assistant message is a prefill the model continues.

Every call returns one :class:`Answer` per prompt, in the order of the prompts: the value
or the error that replaced it, and the prompt's own :class:`ItemUsage`. One failed prompt
never hides the others; usage travels with the answer, so threads sharing a judge never
read each other's numbers; :func:`values` gives the plain values (raising the first
error). ``call_log`` keeps only the most recent calls (memory stays flat however long a job
runs); ``usage_totals`` sums them all.

:class:`JudgeBase` turns the three calls into one :class:`Request` for one method,
``answer(request)``: the transformers judge, the replay judge, the result cache, the
recorder and the scripted judge in ``offline_scorer.testing`` each implement only that.
A judge of your own needs no base class: satisfying :class:`Judge` is enough.
"""

from __future__ import annotations

import itertools
import json
import math
import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Generic, Literal, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, ValidationError

from offline_scorer._exceptions import ConfigurationError, JudgeOutputError
from offline_scorer.judges._keys import Prompt, schema_text

T = TypeVar("T", bound=BaseModel)
V = TypeVar("V")
SchemaArg = type[BaseModel] | Sequence[type[BaseModel]]
LabelsArg = Sequence[str] | Sequence[Sequence[str]]
CallKind = Literal["json", "text", "labels"]

CALL_LOG_SIZE = 64
"""How many recent calls a judge's ``call_log`` keeps."""

LOGPROB_DIGITS = 4
"""Label log-probabilities are rounded to this many decimals, so that the last bits of
float arithmetic (which depend on how a batch is padded) never change a result."""


@dataclass(frozen=True)
class ItemUsage:
    """What one prompt of a judge call cost."""

    prompt_tokens: int
    generated_tokens: int
    seconds: float
    cached: bool = False
    truncated: bool = False


NO_USAGE = ItemUsage(0, 0, 0.0)


@dataclass(frozen=True)
class Answer(Generic[V]):
    """One prompt's outcome: its value, or the error that replaced it, and its usage.

    Every judge call returns one ``Answer`` per prompt, whatever went wrong: one failed
    prompt never hides the others' results.
    """

    value: V | None = None
    usage: ItemUsage = NO_USAGE
    error: BaseException | None = None

    @classmethod
    def of(cls, outcome: V | BaseException, usage: ItemUsage = NO_USAGE) -> Answer[V]:
        """An answer from a value or an exception."""
        if isinstance(outcome, BaseException):
            return cls(None, usage, outcome)
        return cls(outcome, usage)

    @property
    def ok(self) -> bool:
        """Whether the prompt got a value."""
        return self.error is None

    @property
    def outcome(self) -> V | BaseException:
        """The value, or the error in its place."""
        return self.error if self.error is not None else self.value  # type: ignore[return-value]

    def get(self) -> V:
        """The value; raises the error when the prompt failed."""
        if self.error is not None:
            raise self.error
        return self.value  # type: ignore[return-value]


def values(answers: Sequence[Answer[V]]) -> list[V]:
    """The values of a call's answers; raises the first error when one prompt failed."""
    return [answer.get() for answer in answers]


def outcomes(answers: Sequence[Answer[V]]) -> list[V | BaseException]:
    """Each answer's value, or its error in its place."""
    return [answer.outcome for answer in answers]


@dataclass(frozen=True)
class LabelScores:
    """How likely the model is to continue a prompt with each allowed label.

    Attributes:
        labels: the allowed labels, in the order they were asked for.
        logprobs: per label, the model's log-probability of the label's tokens right after
            the prompt (summed over the label's tokens, rounded to :data:`LOGPROB_DIGITS`).
        hidden: when asked for (``hidden_state=True``), the model's last-layer hidden state
            at the place of the verdict (the prompt's last token), rounded likewise: the
            input of a linear probe.
    """

    labels: tuple[str, ...]
    logprobs: tuple[float, ...]
    hidden: tuple[float, ...] | None = None

    @property
    def probabilities(self) -> dict[str, float]:
        """The label probabilities renormalised over the allowed labels (they sum to 1)."""
        top = max(self.logprobs)
        weights = [math.exp(value - top) for value in self.logprobs]
        total = sum(weights)
        return {label: w / total for label, w in zip(self.labels, weights)}

    @property
    def best(self) -> str:
        """The most likely label (the first one on a tie)."""
        return self.labels[self.logprobs.index(max(self.logprobs))]

    def to_json(self) -> Any:
        """What caches and recordings store: the log-probabilities (and the hidden state)."""
        if self.hidden is None:
            return list(self.logprobs)
        return {"logprobs": list(self.logprobs), "hidden": list(self.hidden)}

    @classmethod
    def from_json(cls, labels: Sequence[str], stored: Any) -> LabelScores:
        """Rebuild from :meth:`to_json` output (checks one value per label)."""
        values = stored["logprobs"] if isinstance(stored, dict) else stored
        hidden = stored.get("hidden") if isinstance(stored, dict) else None
        if len(values) != len(labels):
            raise ValueError(f"{len(values)} stored log-probabilities for {len(labels)} labels")
        return cls(
            tuple(labels),
            tuple(round(float(v), LOGPROB_DIGITS) for v in values),
            None if hidden is None else tuple(round(float(v), LOGPROB_DIGITS) for v in hidden),
        )


_CALL_NUMBERS = itertools.count(1)


@dataclass
class JudgeCall:
    """One call to a judge: its kind, its items' usage and its wall time.

    ``number`` increases with every call made in the process, so a caller can pick out
    the calls made after a given point even though the log keeps only recent calls.
    """

    kind: CallKind
    items: list[ItemUsage] = field(default_factory=list)
    seconds: float = 0.0
    number: int = field(default_factory=lambda: next(_CALL_NUMBERS))

    @property
    def prompt_tokens(self) -> int:
        """Prompt tokens over all items."""
        return sum(item.prompt_tokens for item in self.items)

    @property
    def generated_tokens(self) -> int:
        """Generated tokens over all items."""
        return sum(item.generated_tokens for item in self.items)


@dataclass
class UsageTotals:
    """Running totals over every call a judge made (constant memory)."""

    calls: int = 0
    prompts: int = 0
    prompt_tokens: int = 0
    generated_tokens: int = 0
    cached: int = 0
    seconds: float = 0.0


class CallLog:
    """The recent calls of one judge (at most :data:`CALL_LOG_SIZE`) and running totals."""

    def __init__(self, size: int = CALL_LOG_SIZE):
        self._recent: deque[JudgeCall] = deque(maxlen=size)
        self.totals = UsageTotals()
        self._lock = threading.Lock()

    def add(self, call: JudgeCall) -> None:
        """Record a finished call."""
        with self._lock:
            self._recent.append(call)
            totals = self.totals
            totals.calls += 1
            totals.prompts += len(call.items)
            totals.prompt_tokens += call.prompt_tokens
            totals.generated_tokens += call.generated_tokens
            totals.cached += sum(1 for item in call.items if item.cached)
            totals.seconds += call.seconds

    def recent(self) -> list[JudgeCall]:
        """A copy of the recent calls, oldest first."""
        with self._lock:
            return list(self._recent)


class KeepsCallLog:
    """Gives a judge ``call_log`` and ``usage_totals`` from its ``_log`` (a :class:`CallLog`)."""

    _log: CallLog

    @property
    def call_log(self) -> list[JudgeCall]:
        """The most recent calls (at most :data:`CALL_LOG_SIZE`), oldest first."""
        return self._log.recent()

    @property
    def usage_totals(self) -> UsageTotals:
        """Totals over every call this judge made."""
        return self._log.totals


@runtime_checkable
class Judge(Protocol):
    """What every judge offers. See the module docstring."""

    @property
    def model_id(self) -> str:
        """Short name of the model (a card name or a file/directory name)."""
        ...

    @property
    def fingerprint(self) -> str:
        """Identity of the exact weights, used in cache and replay keys."""
        ...

    @property
    def call_log(self) -> list[JudgeCall]:
        """The most recent calls (at most :data:`CALL_LOG_SIZE`), oldest first."""
        ...

    def generate_json(self, prompts: Sequence[Prompt], schema: SchemaArg) -> list[Answer[Any]]:
        """One validated object of ``schema`` (one schema, or one per prompt) per prompt."""
        ...

    def generate_text(self, prompts: Sequence[Prompt]) -> list[Answer[str]]:
        """One free-text answer per prompt."""
        ...

    def score_labels(
        self, prompts: Sequence[Prompt], labels: LabelsArg, *, hidden_state: bool = False
    ) -> list[Answer[LabelScores]]:
        """One :class:`LabelScores` per prompt over ``labels`` (one list, or one per prompt).

        With ``hidden_state`` each result also carries the hidden state at the verdict's
        place (judges that cannot give one leave it None).
        """
        ...


@dataclass(frozen=True)
class Request:
    """One judge call as data: its kind, its prompts and, per prompt, what it asks for.

    The three calls of the protocol become one ``Request`` in :class:`JudgeBase`, so a judge
    or a wrapper (cache, recorder, replay, fake) implements one method,
    :meth:`JudgeBase.answer`, instead of restating each call.
    """

    kind: CallKind
    prompts: Sequence[Prompt]
    schemas: Sequence[type[BaseModel]] | None = None
    """``json``: one schema per prompt."""
    labels: Sequence[tuple[str, ...]] | None = None
    """``labels``: one label tuple per prompt."""
    hidden_state: bool = False

    @classmethod
    def json(cls, prompts: Sequence[Prompt], schema: SchemaArg) -> Request:
        """A ``generate_json`` call (one schema, or one per prompt)."""
        return cls("json", prompts, schemas=schemas_per_prompt(schema, len(prompts)))

    @classmethod
    def text(cls, prompts: Sequence[Prompt]) -> Request:
        """A ``generate_text`` call."""
        return cls("text", prompts)

    @classmethod
    def label_read(
        cls, prompts: Sequence[Prompt], labels: LabelsArg, hidden_state: bool = False
    ) -> Request:
        """A ``score_labels`` call (one label list, or one per prompt)."""
        per_prompt = labels_per_prompt(labels, len(prompts))
        return cls("labels", prompts, labels=per_prompt, hidden_state=hidden_state)

    def __len__(self) -> int:
        return len(self.prompts)

    def subset(self, indexes: Sequence[int]) -> Request:
        """The same request for some of its prompts, in the order of ``indexes``."""
        return replace(
            self,
            prompts=[self.prompts[i] for i in indexes],
            schemas=None if self.schemas is None else [self.schemas[i] for i in indexes],
            labels=None if self.labels is None else [self.labels[i] for i in indexes],
        )

    def key_text(self, index: int) -> str | None:
        """What prompt ``index`` asks for, as it enters cache and replay keys: the schema's
        JSON text, the label list, or None for free text."""
        if self.schemas is not None:
            return schema_text(self.schemas[index])
        if self.labels is not None:
            return label_request_text(self.labels[index], self.hidden_state)
        return None

    def stored(self, value: Any) -> Any:
        """How a value is stored in caches and recordings (None: not storable)."""
        if isinstance(value, BaseModel):
            return value.model_dump_json()
        if isinstance(value, LabelScores):
            return value.to_json()
        return value if isinstance(value, str) else None

    def restore(self, index: int, stored: Any) -> Any:
        """Prompt ``index``'s value from what :meth:`stored` kept (an error when a stored
        JSON answer no longer fits its schema)."""
        if self.schemas is not None:
            return parse_json_output(stored, self.schemas[index], index=index)
        if self.labels is not None:
            return LabelScores.from_json(self.labels[index], stored)
        return stored


class JudgeBase(KeepsCallLog):
    """The three protocol calls, each turned into a :class:`Request` for :meth:`answer`."""

    def generate_json(self, prompts: Sequence[Prompt], schema: SchemaArg) -> list[Answer[Any]]:
        """One validated object of ``schema`` (one schema, or one per prompt) per prompt.

        A prompt whose JSON could not be produced gets a :class:`JudgeOutputError` (or a
        :class:`ContextLengthError`) as its answer's ``error``.
        """
        return self.answer(Request.json(prompts, schema))

    def generate_text(self, prompts: Sequence[Prompt]) -> list[Answer[str]]:
        """One free-text answer per prompt."""
        return self.answer(Request.text(prompts))

    def score_labels(
        self, prompts: Sequence[Prompt], labels: LabelsArg, *, hidden_state: bool = False
    ) -> list[Answer[LabelScores]]:
        """One :class:`LabelScores` per prompt over ``labels`` (one list, or one per prompt)."""
        return self.answer(Request.label_read(prompts, labels, hidden_state))

    def answer(self, request: Request) -> list[Answer[Any]]:
        """One answer per prompt of ``request``, in order (the one method to implement)."""
        raise NotImplementedError


def ask(judge: Judge, request: Request) -> list[Answer[Any]]:
    """Send ``request`` to any judge: through :meth:`JudgeBase.answer` when it has one,
    else through the protocol call of the request's kind."""
    if isinstance(judge, JudgeBase):
        return judge.answer(request)
    if request.kind == "json":
        assert request.schemas is not None
        return judge.generate_json(request.prompts, request.schemas)
    if request.kind == "labels":
        assert request.labels is not None
        return judge.score_labels(
            request.prompts, request.labels, hidden_state=request.hidden_state
        )
    return judge.generate_text(request.prompts)


class JudgeWrapper(JudgeBase):
    """Base of judges that wrap another judge (cache, recorder): same model identity."""

    inner: Judge

    @property
    def model_id(self) -> str:
        """The inner judge's model name."""
        return self.inner.model_id

    @property
    def fingerprint(self) -> str:
        """The inner judge's fingerprint."""
        return self.inner.fingerprint

    @property
    def model_card(self) -> Any:
        """The inner judge's model card (None when it has none)."""
        return getattr(self.inner, "model_card", None)

    @property
    def config(self) -> Any:
        """The inner judge's configuration (None when it was not built from one)."""
        return getattr(self.inner, "config", None)

    @property
    def settings(self) -> Any:
        """The inner judge's generation settings (None when it has none)."""
        return getattr(self.inner, "settings", None)


def schemas_per_prompt(schema: SchemaArg, count: int) -> list[type[BaseModel]]:
    """Expand a single schema to one per prompt, or check a list has one per prompt."""
    if isinstance(schema, type):
        return [schema] * count
    schemas = list(schema)
    if len(schemas) != count:
        raise ConfigurationError(
            f"generate_json got {count} prompts but {len(schemas)} schemas; pass one schema "
            "or exactly one per prompt."
        )
    return schemas


def parse_json_output(
    text: str, schema: type[T], *, index: int | None = None
) -> T | JudgeOutputError:
    """Validate a model's JSON text against ``schema``; an error object when it fails."""
    try:
        return schema.model_validate_json(text)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in issue['loc']) or '<root>'}: {issue['msg']}"
            for issue in error.errors()[:5]
        )
        failure = JudgeOutputError(
            f"The judge's JSON does not match schema {schema.__name__}: {problems}. "
            f"Output was: {text[:300]!r}",
            index=index,
            raw_output=text,
        )
        failure.__cause__ = error
        return failure


def labels_per_prompt(labels: LabelsArg, count: int) -> list[tuple[str, ...]]:
    """Expand one label list to one per prompt, or check a list of lists has one per prompt.

    Raises:
        ConfigurationError: no labels, a repeated or empty label, or a count mismatch.
    """
    per_prompt: list[tuple[str, ...]]
    if labels and all(isinstance(label, str) for label in labels):
        per_prompt = [tuple(str(label) for label in labels)] * count
    else:
        per_prompt = [tuple(str(label) for label in item) for item in labels]
        if len(per_prompt) != count:
            raise ConfigurationError(
                f"score_labels got {count} prompts but {len(per_prompt)} label lists; pass one "
                "list of labels or exactly one per prompt."
            )
    for item in per_prompt:
        if len(item) < 2 or len(set(item)) != len(item) or not all(item):
            raise ConfigurationError(
                f"score_labels needs at least two distinct non-empty labels; got {list(item)}."
            )
    return per_prompt


def label_request_text(labels: Sequence[str], hidden_state: bool = False) -> str:
    """How a label request enters cache and replay keys (in place of a JSON schema)."""
    suffix = "+hidden" if hidden_state else ""
    return "labels" + suffix + ":" + json.dumps(list(labels), ensure_ascii=False)
