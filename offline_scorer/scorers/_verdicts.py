"""Verdict models: evidence in, calibrated label probabilities out.

A small judge's own verdicts are close to chance (it says "yes" to almost anything), so
for cards that ship a fitted verdict model the scorers READ verdicts instead of sampling
them: for each verdict (relevancy: question x statement; similarity: reference unit x
answer unit) the evidence - lexical overlap and containment, number and negation
mismatches, answer type, sentence-embedding cosines of the pair and of the whole texts -
goes through a multinomial logistic regression fitted on labelled data
(``tools/fit_verdicts.py``, on ``../shared/train-data/`` only). The result is one
probability per label; the hard verdict is the most probable label.

The fitted parameters are a JSON file next to the model card (never pickle), checked
against the sha256 the card records before use. Everything here is deterministic: an item
alone and inside any batch gives the same probabilities (each text is embedded alone and
probabilities are rounded to :data:`PROBABILITY_DIGITS` decimals).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from offline_scorer._exceptions import ModelLoadError
from offline_scorer._resources import data_folder
from offline_scorer.judges._cards import ModelCard
from offline_scorer.scorers._features import (
    relevancy_features,
    similarity_features_aliases,
    token_f1,
)

FORMAT = "offline-scorer-verdicts/1"
PROBABILITY_DIGITS = 4
RELEVANCY_LABELS = ("yes", "unsure", "no")
SIMILARITY_LABELS = ("exact", "semantic", "partial", "missing")
Scoring = Literal["hard", "expected"]


class Cosine(Protocol):
    """What the verdict models need from a sentence embedder."""

    def cosine(self, first: str, second: str) -> float:
        """Cosine similarity of two texts."""
        ...


class LogisticModel(BaseModel):
    """A multinomial logistic regression over named features (standardised first)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["logistic"]
    classes: list[str] = Field(min_length=2)
    features: list[str] = Field(min_length=1)
    means: list[float]
    scales: list[float]
    weights: list[list[float]]
    intercepts: list[float]
    l2: float

    def model_post_init(self, context: Any) -> None:
        """Check that every array has the size its features and classes say."""
        d, k = len(self.features), len(self.classes)
        if len(self.means) != d or len(self.scales) != d or any(s <= 0 for s in self.scales):
            raise ValueError("means and scales need one positive value per feature")
        if len(self.weights) != k or any(len(row) != d for row in self.weights):
            raise ValueError("weights need one row per class and one column per feature")
        if len(self.intercepts) != k:
            raise ValueError("intercepts need one value per class")

    def probabilities(self, values: Mapping[str, float]) -> dict[str, float]:
        """Label probabilities for one verdict's features (rounded, in class order)."""
        z = [
            (float(values[name]) - mean) / scale
            for name, mean, scale in zip(self.features, self.means, self.scales, strict=True)
        ]
        logits = [
            sum(w * x for w, x in zip(row, z, strict=True)) + b
            for row, b in zip(self.weights, self.intercepts, strict=True)
        ]
        top = max(logits)
        exps = [math.exp(value - top) for value in logits]
        total = sum(exps)
        return {
            label: round(e / total, PROBABILITY_DIGITS)
            for label, e in zip(self.classes, exps, strict=True)
        }


class GateCondition(BaseModel):
    """One condition on the way to a gated model's ``model``: a feature's range (both ends
    included), or ``any_of``, a list of conditions of which at least one must hold."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    feature: str | None = None
    at_least: float | None = None
    at_most: float | None = None
    any_of: list[GateCondition] | None = Field(default=None, min_length=1)

    def model_post_init(self, context: Any) -> None:
        """Check that the condition is a range or a list, not both and not neither."""
        if (self.feature is None) == (self.any_of is None):
            raise ValueError(
                "a gate condition names exactly one of: a feature (with at_least / at_most) "
                "or any_of (a list of conditions)"
            )
        if self.any_of is not None and (self.at_least is not None or self.at_most is not None):
            raise ValueError("a gate condition with any_of takes no range of its own")

    @property
    def features(self) -> list[str]:
        """The features this condition reads."""
        if self.any_of is None:
            return [str(self.feature)]
        return [name for condition in self.any_of for name in condition.features]

    def holds(self, values: Mapping[str, float]) -> bool:
        """Whether one verdict's features meet the condition."""
        if self.any_of is not None:
            return any(condition.holds(values) for condition in self.any_of)
        value = float(values[str(self.feature)])
        low_ok = self.at_least is None or value >= self.at_least
        return low_ok and (self.at_most is None or value <= self.at_most)


class GatedModel(BaseModel):
    """Two verdict models over the same labels, one chosen per verdict by its features.

    A verdict that meets every condition of ``when`` goes to ``model``, any other to
    ``otherwise``. Either may be a gated model itself: the embedded card's sentence model
    sits behind a second gate for pairs of short sentences (``SENTENCE_PAIR_GATE``), and the
    0.5B card copies that pair model in front of its own within its item limits
    (``tools/fit_card_verdicts.with_sentences``). Uses:

    * the Qwen cards' similarity (``tools/fit_card_verdicts.py``): the match read was fitted
      on short texts, so a gate on the item's ``reference_words`` and ``answer_words``
      sends longer ones to a model without the read (the embedded card's); a gate on item
      features only picks one model per item, so the scorer skips the read the other model
      does not use (``_judge_reads.for_item``);
    * the embedded card's similarity (``tools/fit_verdicts.py``, ``SENTENCE_GATE``) judges
      two whole sentences of a short item (a paraphrase, a swapped name) apart from a short
      reference inside a longer answer: one linear model over both learned from the
      short-answer pool that an answer as long as its reference is only a partial match.
      Its conditions mix a verdict's features (``min_tokens``, ``len_ratio``, ``ref_list``,
      ``sentence_words``, the first two each ``any_of`` itself or two short sentences) and
      the item's, so it picks a model per verdict. Behind it, two sentences of at most
      twenty words a side go to a model fitted on such pairs alone, the rest to the
      sentence model;
    * the embedded card's relevancy (``tools/fit_verdicts.py``, ``FORUM_GATE``): an answer
      of at least three words (``answer_words``, an item feature) goes to a model fitted
      with the forum comments of train-data and the answer's length (``answer_len``); a
      shorter one to the model fitted without them. The 0.5B card copies both.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["gated"]
    when: list[GateCondition] = Field(min_length=1)
    model: Annotated[LogisticModel | GatedModel, Field(discriminator="kind")]
    otherwise: Annotated[LogisticModel | GatedModel, Field(discriminator="kind")]

    def model_post_init(self, context: Any) -> None:
        """Check that both models name the same labels in the same order."""
        if self.model.classes != self.otherwise.classes:
            raise ValueError("the two models of a gated model need the same classes")

    @property
    def classes(self) -> list[str]:
        """The labels, in the models' order."""
        return self.model.classes

    @property
    def features(self) -> list[str]:
        """Every feature either model or a condition reads (each once)."""
        names = [*self.model.features, *self.otherwise.features]
        return list(dict.fromkeys([*names, *self.features_of_gate]))

    @property
    def features_of_gate(self) -> list[str]:
        """The features the conditions of ``when`` read (each once)."""
        return list(dict.fromkeys(f for c in self.when for f in c.features))

    def holds(self, values: Mapping[str, float]) -> bool:
        """Whether these features meet every condition (the verdict goes to ``model``)."""
        return all(condition.holds(values) for condition in self.when)

    def probabilities(self, values: Mapping[str, float]) -> dict[str, float]:
        """Label probabilities for one verdict's features, from the model the gate picks."""
        return (self.model if self.holds(values) else self.otherwise).probabilities(values)


GatedModel.model_rebuild()

VerdictModel = Annotated[LogisticModel | GatedModel, Field(discriminator="kind")]
"""A fitted verdict model as a verdict file holds it (``kind`` says which)."""


class VerdictModelSet(BaseModel):
    """The content of a card's verdict file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal["offline-scorer-verdicts/1"]
    judge: str
    embedder: str
    scoring: dict[str, Scoring]
    relevancy: VerdictModel
    similarity: VerdictModel
    training: dict[str, Any]
    slice_check: dict[str, Any]


@dataclass(frozen=True)
class VerdictModels:
    """A loaded, checked verdict file."""

    models: VerdictModelSet
    path: Path
    sha256: str

    @property
    def embedder(self) -> str:
        """The sentence-embedding card the features need."""
        return self.models.embedder

    def default_scoring(self, scorer: str) -> Scoring:
        """The scoring the agreement figures chose for ``scorer`` (relevancy, similarity)."""
        return self.models.scoring.get(scorer, "hard")


def load_verdict_models(card: ModelCard) -> VerdictModels | None:
    """The verdict models of ``card`` (None when it ships none).

    Raises:
        ModelLoadError: the file is missing, does not match the card's sha256, or is not a
            valid verdict file (the message says which and what to do).
    """
    if card.verdicts is None:
        return None
    return _load(card.name, card.verdicts.file, card.verdicts.sha256)


@lru_cache(maxsize=8)
def _load(card_name: str, file: str, expected_sha256: str) -> VerdictModels:
    path = data_folder("models") / file
    if not path.is_file():
        raise ModelLoadError(
            f"The verdict models of model card '{card_name}' ({path}) are missing from the "
            "installation; reinstall offline-scorer, or pass verdicts='generate'."
        )
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != expected_sha256:
        raise ModelLoadError(
            f"The verdict models of model card '{card_name}' ({path}) do not match the "
            f"sha256 in the card (found {digest[:16]}..., expected {expected_sha256[:16]}...): "
            "the file was changed or damaged. Reinstall offline-scorer, or rerun "
            "tools/fit_verdicts.py and update the card's sha256."
        )
    try:
        models = VerdictModelSet.model_validate(json.loads(data.decode("utf-8")))
    except (ValueError, ValidationError) as error:
        raise ModelLoadError(
            f"The verdict file {path} of model card '{card_name}' is not a valid "
            f"{FORMAT} file: {error}"
        ) from None
    return VerdictModels(models, path, digest)


# ------------------------------------------------------------------ evidence


def relevancy_evidence(
    embedder: Cosine, question: str, statements: Sequence[str], answer: str
) -> list[dict[str, float]]:
    """The features of each (question, statement) verdict.

    ``cos`` is the embedding cosine of question and statement, ``answer_cos`` that of the
    question and the whole answer (the statement's context); ``answer_words`` counts the
    whole answer's words (split on white space) and ``answer_len`` is its log (1 + words):
    the embedded card's relevancy gate and the model behind it read them.
    """
    answer_cos = embedder.cosine(question, answer)
    words = float(len(answer.split()))
    rows = []
    for statement in statements:
        features = relevancy_features(question, statement, embedder.cosine(question, statement))
        features["answer_cos"] = answer_cos
        features["answer_words"] = words
        features["answer_len"] = math.log1p(words)
        rows.append(features)
    return rows


def similarity_evidence(
    embedder: Cosine,
    groups: Sequence[Sequence[str]],
    units: Sequence[str],
    reference: str,
    answer: str,
) -> list[list[dict[str, float]]]:
    """The features of each (reference unit, answer unit) pair, per reference unit.

    A reference unit may have several aliases: the pair's features are those of the
    best-matching alias. ``text_cos`` and ``text_f1`` compare the whole reference and answer
    (embedding cosine, token F1): the context of every pair.
    """
    text_cos = embedder.cosine(reference, answer)
    text_f1 = token_f1(answer, reference)
    table = []
    for aliases in groups:
        row = []
        for unit in units:
            cosines = [embedder.cosine(alias, unit) for alias in aliases]
            features = similarity_features_aliases(list(aliases), unit, cosines)
            features["text_cos"] = text_cos
            features["text_f1"] = text_f1
            row.append(features)
        table.append(row)
    return table


def ordered(probabilities: Mapping[str, float], labels: Sequence[str]) -> dict[str, float]:
    """Probabilities in display order (most favourable label first)."""
    return {label: probabilities[label] for label in labels}


def best_label(probabilities: Mapping[str, float], labels: Sequence[str]) -> str:
    """The most probable label; ties go to the label listed first in ``labels``."""
    return max(labels, key=lambda label: (probabilities[label], -labels.index(label)))
