"""The judge: the only code that asks a model for anything.

A judge has two batch calls. ``generate_json(prompts, schema)`` returns one validated
pydantic object per prompt; ``generate_text(prompts)`` one string per prompt. Prompts are
lists of chat messages (``{"role": ..., "content": ...}``). Results come back in the order
of the prompts. Every implementation (the transformers judge, the replay judge, the result
cache) satisfies the :class:`Judge` protocol without inheriting from anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, ValidationError

from offline_scorer._exceptions import (
    ConfigurationError,
    JudgeOutputError,
)
from offline_scorer.judges._keys import Prompt

if TYPE_CHECKING:
    pass

T = TypeVar("T", bound=BaseModel)
SchemaArg = type[BaseModel] | Sequence[type[BaseModel]]


@dataclass(frozen=True)
class ItemUsage:
    """What one prompt of a judge call cost."""

    prompt_tokens: int
    generated_tokens: int
    seconds: float
    cached: bool = False
    truncated: bool = False


@dataclass
class JudgeCall:
    """One call to a judge: its kind, its items' usage and its wall time."""

    kind: Literal["json", "text"]
    items: list[ItemUsage] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def prompt_tokens(self) -> int:
        """Prompt tokens over all items."""
        return sum(item.prompt_tokens for item in self.items)

    @property
    def generated_tokens(self) -> int:
        """Generated tokens over all items."""
        return sum(item.generated_tokens for item in self.items)


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
        """Every call made so far, oldest first."""
        ...

    def generate_json(
        self,
        prompts: Sequence[Prompt],
        schema: SchemaArg,
        *,
        return_exceptions: bool = False,
    ) -> list[Any]:
        """One validated object of ``schema`` (one schema, or one per prompt) per prompt."""
        ...

    def generate_text(
        self, prompts: Sequence[Prompt], *, return_exceptions: bool = False
    ) -> list[Any]:
        """One free-text answer per prompt."""
        ...


class JudgeWrapper:
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


def finish(results: list[Any], return_exceptions: bool) -> list[Any]:
    """Raise the first error unless the caller asked for errors in the list."""
    if not return_exceptions:
        for result in results:
            if isinstance(result, BaseException):
                raise result
    return results
