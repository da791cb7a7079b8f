"""Every error offline-scorer raises on purpose, in one tree.

::

    OfflineScorerError                 base of everything below
    ├── ConfigurationError (ValueError) bad options or settings given by the caller
    │   └── UnknownScorerError (KeyError) no scorer registered under that id
    ├── UnknownModelError (KeyError)   no model card with that name
    ├── ModelLoadError                 weights missing, unsafe, corrupt or wrong checksum
    ├── ContextLengthError (ValueError) a prompt does not fit in the model's context window
    ├── JudgeOutputError               the model's output could not become a valid object
    │   └── ReplayMissError (KeyError) a replay judge has no recording for a request
    ├── ScorerRunError                 one scorer run failed ("Scorer run failed: ...")
    └── DataError (ValueError)         a dataset row or file cannot be used

Errors from torch, transformers, outlines and pydantic are translated into these at the
judge and model boundaries and re-raised ``from`` the original exception, so the original
traceback stays available for debugging.
"""

from __future__ import annotations


class OfflineScorerError(Exception):
    """Base class of every error raised on purpose by offline-scorer."""


class ConfigurationError(OfflineScorerError, ValueError):
    """An option or setting given by the caller is invalid."""


class UnknownScorerError(ConfigurationError, KeyError):
    """No scorer is registered under the requested id."""

    def __str__(self) -> str:
        # KeyError quotes its message; keep it readable.
        return str(self.args[0]) if self.args else ""


class UnknownModelError(OfflineScorerError, KeyError):
    """The model reference is neither a known model card nor an existing path."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class ModelLoadError(OfflineScorerError):
    """Model weights could not be found, verified or loaded."""


class ContextLengthError(OfflineScorerError, ValueError):
    """A prompt is longer than the model's context window allows."""


class JudgeOutputError(OfflineScorerError):
    """The judge's output for one prompt could not be turned into a valid result.

    Attributes:
        index: position of the prompt in the batch it was sent with, when known.
        raw_output: what the model generated, when there was any.
    """

    def __init__(self, message: str, *, index: int | None = None, raw_output: str | None = None):
        super().__init__(message)
        self.index = index
        self.raw_output = raw_output


class ReplayMissError(JudgeOutputError, KeyError):
    """A replay judge was asked for a request it has no recording of."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class ScorerRunError(OfflineScorerError):
    """A scorer run failed; the message starts with ``Scorer run failed:``.

    Attributes:
        step: name of the step that failed.
        partial: the results of the steps that completed before the failure.
    """

    def __init__(self, message: str, *, step: str, partial: dict[str, object] | None = None):
        super().__init__(message)
        self.step = step
        self.partial = partial or {}


class DataError(OfflineScorerError, ValueError):
    """A dataset file or row cannot be used."""
