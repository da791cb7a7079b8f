"""How a built-in scorer extracts, judges and scores, resolved once when it is built.

Three options, each ``auto`` by default and resolved from the judge's model card:

* ``verdicts``: ``read`` - verdict probabilities are read, not sampled: from the card's
  fitted verdict models when it ships them, else from the judge's label log-probabilities
  (one forward pass per verdict, no decoding); ``generate`` - the judge writes each verdict
  and its reason in constrained JSON (the reference's procedure). ``auto`` is ``read`` for a
  card with fitted verdict models and ``generate`` for any other model.
* ``scoring``: ``hard`` - the reference formula over the most probable labels;
  ``expected`` - the same formula over the label probabilities (a graded score that ranks
  better). ``auto`` is the choice recorded in the verdict file, else ``hard``.
* ``extraction``: ``model`` - the judge lists statements and units; ``split`` - a
  deterministic sentence and clause splitter does. ``auto`` follows the card.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from offline_scorer._exceptions import ConfigurationError
from offline_scorer.judges._cards import ModelCard
from offline_scorer.scorers._verdicts import VerdictModels, check_stamp, load_verdict_models

VerdictsMode = Literal["auto", "read", "generate"]
ScoringMode = Literal["auto", "hard", "expected"]
ExtractionMode = Literal["auto", "model", "split"]


@dataclass(frozen=True)
class Modes:
    """The resolved modes of one scorer."""

    verdicts: Literal["read", "generate"]
    scoring: Literal["hard", "expected"]
    extraction: Literal["model", "split"]
    models: VerdictModels | None
    """Fitted verdict models (``verdicts="read"`` on a card that ships them), else None."""


class ModeOptions(BaseModel):
    """The three mode options every built-in scorer has (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    verdicts: VerdictsMode = Field(
        "auto",
        description="read (verdict probabilities from the card's fitted verdict model, or "
        "the judge's label probabilities), generate (the judge writes each verdict and its "
        "reason), or auto (read when the card ships a verdict model).",
    )
    scoring: ScoringMode = Field(
        "auto",
        description="hard (the formula over the most probable labels), expected (the "
        "formula over the label probabilities), or auto (the card's choice, else hard).",
    )
    extraction: ExtractionMode = Field(
        "auto",
        description="model (the judge lists statements and units), split (a sentence "
        "splitter does), or auto (the card's choice).",
    )


def resolve_modes(
    scorer: str,
    card: ModelCard | None,
    options: ModeOptions,
    language: str = "en",
    backend: str | None = None,
) -> Modes:
    """Resolve ``auto`` options against the judge's card (see the module docstring).

    Args:
        scorer: ``relevancy`` or ``similarity`` (which verdict model to read).
        card: the judge's model card (None: a model of your own, a replay or fake judge).
        options: the scorer's validated options.
        language: the language of the prompts and texts.
        backend: the judge's backend, when known (a card's read verdicts are fitted on one).

    Raises:
        ConfigurationError: ``scoring="expected"`` with generated verdicts (they carry no
            probabilities); read verdicts in a language or on a backend their model was
            not fitted for.
    """
    fitted = card is not None and card.verdicts is not None
    verdicts_mode: Literal["read", "generate"] = (
        ("read" if fitted else "generate") if options.verdicts == "auto" else options.verdicts
    )
    models = load_verdict_models(card) if verdicts_mode == "read" and card else None
    if models is not None:
        check_stamp(models.sources[scorer], scorer, models.of(scorer), language, backend)
    if options.scoring == "auto":
        scoring_mode: Literal["hard", "expected"] = models.of(scorer).scoring if models else "hard"
    else:
        scoring_mode = options.scoring
    if scoring_mode == "expected" and verdicts_mode == "generate":
        raise ConfigurationError(
            f"scoring='expected' needs verdict probabilities, and verdicts='generate' has "
            f"none: use verdicts='read' (or scoring='hard') for the {scorer} scorer."
        )
    extraction_mode: Literal["model", "split"] = (
        (card.extraction if card else "model")
        if options.extraction == "auto"
        else options.extraction
    )
    return Modes(verdicts_mode, scoring_mode, extraction_mode, models)
