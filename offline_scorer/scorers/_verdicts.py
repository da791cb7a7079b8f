"""Verdict models: evidence in, calibrated label probabilities out.

A small judge's own verdicts are close to chance (it says "yes" to almost anything), so
for cards that ship a fitted verdict model the scorers READ verdicts instead of sampling
them: for each verdict (relevancy: question x statement; similarity: reference unit x
answer unit) the evidence - lexical overlap and containment, number and negation
mismatches, answer type, sentence-embedding cosines of the pair and of the whole texts -
goes through one multinomial logistic regression per card and scorer, fitted on labelled
data (``tools/fit.py``, on ``../shared/train-data/`` only). For a card whose judge follows
instructions, the judge's own read of the whole item, the verdict's statement or unit named
in it, is one more input (``_judge_reads.py``). The result is one probability per label;
the hard verdict is the most probable label.

The fitted parameters are a JSON file next to the model card (never pickle), checked
against the sha256 the card records before use, and stamped with what the inputs depend on
(language, prompt templates, backend and dtype of the reads, the training pool): a run
that differs is refused with the difference named. A scorer whose model is another
card's names that card (``same_as``) instead of a copy. Everything here is deterministic: an item
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
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from offline_scorer._exceptions import ConfigurationError, ModelLoadError
from offline_scorer._resources import data_folder
from offline_scorer.judges._cards import ModelCard, get_model_card
from offline_scorer.scorers._features import (
    RELEVANCY_INPUTS,
    SIMILARITY_INPUTS,
    lexical_inputs,
)

FORMAT = "offline-scorer-verdicts/2"
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


class ReadSpec(BaseModel):
    """The judge's read a verdict model takes as inputs: one prompt template, its labels.

    Each verdict's read is the template rendered for that verdict, then the log-probability
    of each label right after it, renormalised over the labels (``read_<label>`` inputs).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    template: str
    """``<scorer>/<step>``: ``prompts/<scorer>/<language>/<step>.jinja``."""
    labels: list[str] = Field(min_length=2)


class Stamp(BaseModel):
    """What a verdict model's inputs depend on, as it was fitted; a run that differs in
    language, prompts or backend is refused (:func:`check_stamp`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    language: str
    """The language of the texts it was fitted on (its lexical inputs are English)."""
    prompts: dict[str, str]
    """sha256 of each prompt template its read renders (path under ``prompts/``)."""
    backend: str | None
    """The backend the judge's reads were made with (None: the model reads no judge)."""
    dtype: str | None
    """The weights' dtype of those reads (None: no judge read)."""
    pool: str
    """sha256 of the training pool's manifest (the train-data files and their sha256)."""


class ScorerModel(BaseModel):
    """One scorer's verdict model as a verdict file holds it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: LogisticModel
    scoring: Scoring
    embedder: str | None
    """The sentence-embedding card behind ``cos`` / ``answer_cos`` (None: no such input)."""
    read: ReadSpec | None
    stamp: Stamp
    fit: dict[str, Any]
    """How it was fitted: the declared configuration, the examples, the grouped CV table."""

    @property
    def inputs(self) -> list[str]:
        """The names of its inputs, in order."""
        return self.model.features


class SameAs(BaseModel):
    """A scorer whose model is another card's, referenced rather than copied."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    same_as: str
    """The card whose verdict file holds the model."""


class VerdictFile(BaseModel):
    """The content of a card's verdict file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal["offline-scorer-verdicts/2"]
    card: str
    relevancy: ScorerModel | SameAs
    similarity: ScorerModel | SameAs


@dataclass(frozen=True)
class VerdictModels:
    """A card's verdict models, loaded, checked, references followed."""

    card: str
    relevancy: ScorerModel
    similarity: ScorerModel
    sources: dict[str, str]
    """Per scorer, the card whose file holds its model."""

    def of(self, scorer: str) -> ScorerModel:
        """The model of ``relevancy`` or ``similarity``."""
        return self.relevancy if scorer == "relevancy" else self.similarity


def load_verdict_models(card: ModelCard) -> VerdictModels | None:
    """The verdict models of ``card`` (None when it ships none).

    Raises:
        ModelLoadError: a file is missing, does not match its card's sha256, is not a valid
            verdict file, or a prompt its reads depend on changed since the fit (the
            message says which and what to do).
    """
    if card.verdicts is None:
        return None
    file = _load(card.name, card.verdicts.file, card.verdicts.sha256)
    models: dict[str, ScorerModel] = {}
    sources: dict[str, str] = {}
    for scorer in ("relevancy", "similarity"):
        entry = getattr(file, scorer)
        if isinstance(entry, SameAs):
            other = _referenced(card.name, entry.same_as)
            entry, sources[scorer] = other.of(scorer), other.sources[scorer]
        else:
            sources[scorer] = card.name
        _check_prompts(card.name, scorer, entry)
        models[scorer] = entry
    return VerdictModels(card.name, models["relevancy"], models["similarity"], sources)


def _referenced(card_name: str, other: str) -> VerdictModels:
    found = load_verdict_models(get_model_card(other)) if other != card_name else None
    if found is None:
        raise ModelLoadError(
            f"The verdict file of model card '{card_name}' refers to the models of card "
            f"'{other}', which ships none; reinstall offline-scorer or refit "
            f"(python -m tools.fit --card {card_name})."
        )
    return found


@lru_cache(maxsize=8)
def _load(card_name: str, file: str, expected_sha256: str) -> VerdictFile:
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
            "the file was changed or damaged. Reinstall offline-scorer, or refit with "
            f"python -m tools.fit --card {card_name} (it updates the card's sha256)."
        )
    try:
        return VerdictFile.model_validate(json.loads(data.decode("utf-8")))
    except (ValueError, ValidationError) as error:
        raise ModelLoadError(
            f"The verdict file {path} of model card '{card_name}' is not a valid "
            f"{FORMAT} file: {error}"
        ) from None


def template_sha256(name: str) -> str | None:
    """sha256 of a shipped prompt template (``<scorer>/<language>/<step>.jinja``), or None
    when there is no such file."""
    path = data_folder("prompts") / name
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def _check_prompts(card_name: str, scorer: str, model: ScorerModel) -> None:
    for name, expected in model.stamp.prompts.items():
        found = template_sha256(name)
        if found != expected:
            state = "is missing" if found is None else "changed"
            raise ModelLoadError(
                f"The {scorer} verdict model of card '{card_name}' reads the judge with the "
                f"prompt template {name}, which {state} since the model was fitted (its "
                "reads would no longer mean what the model learnt). Restore the template, "
                f"or re-read the training examples and refit: python -m tools.read_training "
                f"--card {card_name}, then python -m tools.fit --card {card_name}."
            )


def check_stamp(
    card_name: str, scorer: str, model: ScorerModel, language: str, backend: str | None
) -> None:
    """Refuse a run whose language or judge backend differs from what ``model`` was fitted
    with (the prompts are checked when the file loads).

    Raises:
        ConfigurationError: the message names the difference and what to do.
    """
    stamp = model.stamp
    if language != stamp.language:
        raise ConfigurationError(
            f"The {scorer} verdict model of card '{card_name}' was fitted on "
            f"{stamp.language!r} texts (its lexical inputs and prompts are of that language), "
            f"so it cannot judge language={language!r}. Pass verdicts='generate' (the judge "
            f"writes each verdict from the {language!r} prompts), or fit a verdict model for "
            f"{language!r} (python -m tools.fit)."
        )
    if model.read is not None and backend is not None and backend != stamp.backend:
        raise ConfigurationError(
            f"The {scorer} verdict model of card '{card_name}' was fitted on reads made by the "
            f"{stamp.backend!r} backend, and this judge runs on {backend!r}: reads differ "
            f"between backends. Use backend={stamp.backend!r}, or re-read the training "
            "examples with this backend and refit (python -m tools.read_training, then "
            "python -m tools.fit)."
        )


# ------------------------------------------------------------------ inputs


def relevancy_inputs(
    names: Sequence[str],
    embedder: Cosine | None,
    question: str,
    statements: Sequence[str],
    answer: str,
) -> list[dict[str, float]]:
    """The inputs ``names`` of each (question, statement) verdict, but the judge's read:
    lexical inputs, ``cos`` (question x statement), ``answer_cos`` (question x whole
    answer) and ``answer_len`` (log of 1 + the answer's words), each only if named."""
    shared: dict[str, float] = {}
    if "answer_cos" in names:
        shared["answer_cos"] = _embedder(embedder).cosine(question, answer)
    if "answer_len" in names:
        shared["answer_len"] = math.log1p(len(answer.split()))
    rows = []
    for statement in statements:
        row = lexical_inputs(RELEVANCY_INPUTS, names, question, statement)
        if "cos" in names:
            row["cos"] = _embedder(embedder).cosine(question, statement)
        rows.append({**row, **shared})
    return rows


def similarity_inputs(
    names: Sequence[str],
    embedder: Cosine | None,
    groups: Sequence[Sequence[str]],
    units: Sequence[str],
) -> list[list[dict[str, float]]]:
    """The inputs ``names`` of each (reference unit, answer unit) pair, per reference unit,
    but the judge's read. A reference unit with several aliases is compared through the
    alias that matches best (containment, token F1 and, when named, the cosine)."""
    wanted = [*names, "cont_ab", "tok_f1"]
    table = []
    for aliases in groups:
        row = []
        for unit in units:
            scored = []
            for alias in aliases or [""]:
                values = lexical_inputs(SIMILARITY_INPUTS, wanted, alias, unit)
                if "cos" in names:
                    values["cos"] = _embedder(embedder).cosine(alias, unit)
                scored.append(values)
            best = max(
                range(len(scored)),
                key=lambda i: (
                    scored[i]["cont_ab"] + scored[i]["tok_f1"] + scored[i].get("cos", 0.0),
                    -i,
                ),
            )
            row.append({name: scored[best][name] for name in names if name in scored[best]})
        table.append(row)
    return table


def _embedder(embedder: Cosine | None) -> Cosine:
    if embedder is None:
        raise ConfigurationError("This verdict model reads an embedding cosine: pass an embedder.")
    return embedder


def ordered(probabilities: Mapping[str, float], labels: Sequence[str]) -> dict[str, float]:
    """Probabilities in display order (most favourable label first)."""
    return {label: probabilities[label] for label in labels}


def best_label(probabilities: Mapping[str, float], labels: Sequence[str]) -> str:
    """The most probable label; ties go to the label listed first in ``labels``."""
    return max(labels, key=lambda label: (probabilities[label], -labels.index(label)))
