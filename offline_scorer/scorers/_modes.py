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
from typing import Any, Literal

from offline_scorer._exceptions import ConfigurationError
from offline_scorer.judges._cards import DEFAULT_MODEL, ModelCard, card_for
from offline_scorer.scorers._verdicts import VerdictModels, load_verdict_models

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


def judge_card(judge: Any, model: str | None) -> ModelCard | None:
    """The model card behind a judge (following wrappers such as the result cache)."""
    if judge is None:
        return card_for(model or DEFAULT_MODEL)
    seen = 0
    while judge is not None and seen < 8:
        card = getattr(judge, "model_card", None)
        if isinstance(card, ModelCard):
            return card
        judge = getattr(judge, "inner", None)
        seen += 1
    return None


def resolve_modes(
    scorer: str,
    judge: Any,
    model: str | None,
    verdicts: str,
    scoring: str,
    extraction: str,
) -> Modes:
    """Resolve ``auto`` options against the judge's card (see the module docstring).

    The values are checked by the scorer's options model before this is called.

    Raises:
        ConfigurationError: ``scoring="expected"`` with generated verdicts (they carry no
            probabilities).
    """
    card = judge_card(judge, model)
    fitted = card is not None and card.verdicts is not None
    verdicts_mode: Literal["read", "generate"] = (
        ("read" if fitted else "generate") if verdicts == "auto" else verdicts  # type: ignore[assignment]
    )
    models = load_verdict_models(card) if verdicts_mode == "read" and card else None
    if scoring == "auto":
        scoring_mode: Literal["hard", "expected"] = (
            models.default_scoring(scorer) if models else "hard"
        )
    else:
        scoring_mode = scoring  # type: ignore[assignment]
    if scoring_mode == "expected" and verdicts_mode == "generate":
        raise ConfigurationError(
            f"scoring='expected' needs verdict probabilities, and verdicts='generate' has "
            f"none: use verdicts='read' (or scoring='hard') for the {scorer} scorer."
        )
    extraction_mode: Literal["model", "split"] = (
        (card.extraction if card else "model") if extraction == "auto" else extraction  # type: ignore[assignment]
    )
    return Modes(verdicts_mode, scoring_mode, extraction_mode, models)
