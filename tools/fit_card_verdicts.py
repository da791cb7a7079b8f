"""Fit a card's verdict models on the evidence AND the judge's own reads.

    .venv/bin/python -m tools.fit_card_verdicts --card qwen2.5-coder-1.5b-instruct --cv
    .venv/bin/python -m tools.fit_card_verdicts --card ... --write   # the card's file

The examples are those ``tools/read_training.py`` read with the card's judge (stored in
``tools/reads/<card>.jsonl``); their evidence is computed as for the embedded card
(``tools/fit_verdicts.py``: the same run-time feature code), their reads become features
with :func:`offline_scorer.toolkit.read_features`. ``--cv`` prints a grouped 5-fold CV
(folds by question or reference) of each feature set - evidence alone (the embedded card's
set), the read alone, both, and with the whole-item read when it was stored - overall and
per source, so what the judge adds is measured before anything is written. ``--write``
writes ``models/<card>.verdicts.json`` with the chosen sets and records its sha256 in the
card's ``[verdicts]`` section. Deterministic: the same reads give the same bytes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.metrics import roc_auc_score

from offline_scorer.toolkit import GatedModel, LogisticModel, read_features, shared_embedder
from tools.fit_verdicts import (
    EMBEDDER,
    L2,
    REL_FEATURES,
    REL_FEATURES_ALL,
    SENTENCE_FEATURES,
    SENTENCE_PAIR_L2,
    SENTENCE_PAIR_SOURCE_WEIGHTS,
    SIM_FEATURES,
    SIM_FEATURES_ALL,
    balanced_weights,
    columns,
    relevancy_matrix,
    sentence_rows,
    similarity_matrix,
    source_weights,
)
from tools.read_training import (
    MATCH_LABELS,
    RELEVANCY_LABELS,
    SIMILARITY_LABELS,
    load_reads,
    pool,
    read_variables,
    reads_path,
)
from tools.verdict_training import (
    REL_CLASSES,
    SEED,
    SIM_CLASSES,
    TRAIN,
    dumps_params,
    fit,
    grouped_cv_proba,
)

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "models"
SCORING = {"relevancy": "expected", "similarity": "expected"}
REL_READ = [f"read_{label}" for label in RELEVANCY_LABELS]
SIM_READ = [f"read_{label}" for label in SIMILARITY_LABELS]
REL_WHOLE = [f"whole_{label}" for label in RELEVANCY_LABELS]
SIM_WHOLE = [f"whole_{label}" for label in SIMILARITY_LABELS]
SIM_MATCH = [f"match_{label}" for label in MATCH_LABELS]
# The judge's cards weigh the training sources their own way. The sentence pairs (sts, and
# their swaps) count, unlike for the embedded card, whose evidence alone learned from them
# that near-duplicates match and lost ranking on short open-QA answers (nq301): the judge's
# read tells a paraphrase from a wrong fact. Community forum answers (cqa) stay out, as for
# the embedded card: their labels judge usefulness, not relevance.
SOURCE_WEIGHTS = {"cqa": 0.0, "sts": 0.5, "sts_swap": 0.25}
# A scorer whose judge read adds nothing in grouped CV can take the embedded card's fitted
# model as it is (fitted on the whole pool, no read, so no judge call at run time).
EMBEDDED_SET = "the embedded card's model"
# A scorer can also take the embedded card's model and the judge's read together: a small
# logistic model of the embedded model's three logits and the read's three features
# (:func:`stacked_on_embedded`), fitted on the examples with a read. The embedded model keeps
# what it learnt from the whole pool (and, for relevancy, the forum comments behind its
# gate), and the read examples only set how much the judge's read moves it. Composed back
# into the embedded model's gated form, it is linear in that model's features and the read,
# so the file holds it as it holds any other model.
STACKED_SET = "the embedded card's model + judge read"
# The stack learns from every read example, the forum comments included (the embedded
# model behind its forum gate was fitted with them).
STACK_SOURCE_WEIGHTS = {**SOURCE_WEIGHTS, "cqa": 1.0}
STACK_L2 = L2
EMBEDDED_FILE = MODELS / "smollm2-135m-instruct.verdicts.json"
# The sets each card ships. The 1.5B card's were chosen on the dev sets (benchmarks/RESULTS.md,
# "A yes/no match read"): for relevancy the read of each statement ranks answers better than
# one read of the whole answer; for similarity one yes/no question about the whole item (does
# the answer say what the reference says, given the question?) does better on every
# similarity dev set, on all rows, than the four-label read of the whole item it replaced, at
# the same cost of one read per item. The 0.5B card (RESULTS.md, "A verdict model for the 0.5B
# card"): its read of a statement adds nothing to relevancy in grouped CV (0.912 with and
# without), so relevancy is the embedded card's model (since 2026-12-05 gated on the answer's
# words, with the forum comments behind the gate), copied, with no judge
# call; for similarity the match read ranks the short-answer dev sets better than the match
# read with a read of every unit pair (CV 0.845 against 0.862), and costs one read per item
# where the pair reads grow with the product of the two texts' units (about 300 reads for
# one long medical answer).
#
# The 1.5B card's relevancy is the embedded card's model too, since 2026-12-06. Its read of
# each statement was fitted on the pool without the forum comments, which the embedded card
# has learnt from since 2026-12-05 (behind its forum gate); at 100 rows of every relevancy
# dev set the embedded card then ranked better on each (MedQuAD 0.7256 against the read's
# 0.6820, TruthfulQA AUC 0.7448 against 0.7346, HaluQuestQA 0.6594 against 0.6350), and the
# forum comments have no reads (3,273 comments, hours of the 1.5B on 2 cores). So the copy,
# which also makes no read (benchmarks/RESULTS.md, "The 1.5B card's relevancy").
SHIPPED = {
    "qwen2.5-coder-1.5b-instruct": {
        "relevancy": EMBEDDED_SET,
        "similarity": "evidence + match read",
    },
    "qwen2.5-coder-0.5b-instruct": {
        "relevancy": EMBEDDED_SET,
        "similarity": "evidence + match read",
    },
}
DEFAULT_CARD = "qwen2.5-coder-1.5b-instruct"
# Cards whose similarity model sends the sentence pairs within its item limits to the
# embedded card's sentence-pair model (copied: :func:`with_sentences`; two sentences of at
# least three words, neither text over twenty words) and only the other verdicts to its own
# model with the match read. The 0.5B card ships that way (2026-12-05; benchmarks/
# RESULTS.md, "A model of sentence pairs"): its read, fitted on short answers, scored the
# paraphrase "The capital of France is Paris." 0.80 and "The capital of Italy is Milan."
# against "Rome is the capital of Italy." 0.40; with the copy 0.88 and 0.28, and on
# every row STS2016 0.657 -> 0.730, every other dev set every score the same (no row of
# theirs is a sentence pair). Copying the wider sentence model instead (2026-12-04) moved
# one MedQuAD answer people rated worst (0.00 -> 0.02). The 1.5B card keeps its own read
# there: with the copy its STS2016 fell 0.7463 -> 0.7351 on every row.
SENTENCES_COPIED = frozenset({"qwen2.5-coder-0.5b-instruct"})
# Cards that judge those sentence pairs with a model of their own: within the item limits,
# the verdicts the embedded card sends to its sentence-pair model go to a model of the
# evidence and the match read fitted on every training example of that kind with a match
# read (:func:`sentence_pair_matrix`: 306 for the 1.5B card, mostly sts_pairs, whose match
# read was taken for every sampled example on 2026-12-07), every other verdict to the card's
# own model as before (the examples with a pair read). Refitting that model on every match
# read instead raised STS2016, evouna and SAS but lowered nq301 (0.7819 -> 0.7719 on every
# row; benchmarks/RESULTS.md, "The match read on every sampled example"), so only the
# sentence pairs, where no row of nq301, SAS, evouna or MedQuAD goes, learn from them.
SENTENCES_OWN = frozenset({"qwen2.5-coder-1.5b-instruct"})
# Its features: the embedded card's sentence-pair set (with the swapped-name features that
# keep "The capital of Italy is Milan." against "Rome is the capital of Italy." low), then
# the match read.
PAIR_FEATURES = [*SENTENCE_FEATURES, *SIM_MATCH]
# Why a card's scorer takes the embedded card's model as it is (the verdict file says so);
# a card not listed: ADDS_NOTHING.
ADDS_NOTHING = "this judge's read added nothing in grouped CV"
COPIED_BECAUSE = {
    "qwen2.5-coder-1.5b-instruct": (
        "it ranks every relevancy dev set better than this judge's read, which was fitted "
        "without the forum comments"
    ),
}
# The match read shows the whole reference and the whole answer, and it was read on short
# texts only (the longest reference of the examples read has 39 words, the longest answer
# 81 for the 1.5B card, 85 for the 0.5B). Fitted there, it pulled long medical answers down (MedQuAD similarity 0.56 on 250
# rows against the embedded card's 0.61, RESULTS.md "A yes/no match read"). So a similarity
# model with the match read is gated on the item's word counts: within the longest texts
# read, the fitted model; past them, the embedded card's similarity model (the evidence
# alone, fitted on the whole pool), and the scorer then makes no read at all.
GATE_FEATURES = {"reference_words": "reference", "answer_words": "output"}


def whole_read(
    reads: dict[tuple[str, str, str], dict[str, float]], scorer: str, example: dict[str, Any]
) -> dict[str, float] | None:
    """An example's whole-item read: stored, or its pair read where both prompts are the
    same (a one-sentence answer, a sentence pair), else None."""
    stored = reads.get((scorer, "whole", example["id"]))
    if stored is None and read_variables("whole", scorer, example) == read_variables(
        "pair", scorer, example
    ):
        return reads.get((scorer, "pair", example["id"]))
    return stored


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def feature_sets(scorer: str, whole: bool, match: bool = False) -> dict[str, list[str]]:
    evidence = REL_FEATURES if scorer == "relevancy" else SIM_FEATURES
    read = REL_READ if scorer == "relevancy" else SIM_READ
    sets = {
        "evidence (the embedded card's set)": evidence,
        "judge read only": read,
        "evidence + judge read": [*evidence, *read],
    }
    if whole:
        extra = REL_WHOLE if scorer == "relevancy" else SIM_WHOLE
        sets["whole-item read only"] = list(extra)
        sets["evidence + whole-item read"] = [*evidence, *extra]
        sets["evidence + judge read + whole-item read"] = [*evidence, *read, *extra]
    if match and scorer == "similarity":
        sets["match read only"] = list(SIM_MATCH)
        sets["evidence + match read"] = [*evidence, *SIM_MATCH]
        sets["evidence + judge read + match read"] = [*evidence, *read, *SIM_MATCH]
        if whole:
            sets["evidence + whole-item read + match read"] = [*evidence, *SIM_WHOLE, *SIM_MATCH]
    return sets


def matrices(
    card: str, train: Path
) -> dict[str, tuple[np.ndarray, np.ndarray, list[str], list[str], list[dict[str, Any]]]]:
    """Per scorer: features (every evidence column, then reads), labels, column names,
    groups and the examples, for the examples whose pair read is stored."""
    reads = load_reads(reads_path(card))
    embedder = shared_embedder(EMBEDDER)
    out = {}
    for scorer, examples in pool(train).items():
        # The embedded card's pool rules: a source weighted 0 is left out.
        kept = [
            e
            for e in examples
            if (scorer, "pair", e["id"]) in reads and SOURCE_WEIGHTS.get(e["source"], 1.0) > 0
        ]
        if not kept:
            log(f"{scorer}: no pair read stored yet in {reads_path(card)}")
            continue
        # Where whole-item reads are stored, every feature set is compared on the examples
        # that have both reads; a card read without them (--kinds pair match) leaves them out
        # rather than keep only the examples whose pair read is one.
        whole = any((scorer, "whole", e["id"]) in reads for e in kept)
        with_whole = [e for e in kept if whole_read(reads, scorer, e) is not None]
        if whole and len(with_whole) < len(kept):
            log(f"{scorer}: {len(with_whole)} of {len(kept)} examples have a whole-item read")
            kept = with_whole
        # Likewise for the match read (similarity's yes/no question).
        with_match = [e for e in kept if (scorer, "match", e["id"]) in reads]
        match = bool(with_match)
        if match and len(with_match) < len(kept):
            log(f"{scorer}: {len(with_match)} of {len(kept)} examples have a match read")
            kept = with_match
        labels = RELEVANCY_LABELS if scorer == "relevancy" else SIMILARITY_LABELS
        if scorer == "relevancy":
            X, y = relevancy_matrix(embedder, kept)
            names = list(REL_FEATURES_ALL)
        else:
            X, y = similarity_matrix(embedder, kept)
            names = list(SIM_FEATURES_ALL)
        extra: list[list[float]] = []
        for e in kept:
            pair = reads[(scorer, "pair", e["id"])]
            row = read_features(labels, [pair[label] for label in labels])
            values = [row[f"read_{label}"] for label in labels]
            if whole:
                item = whole_read(reads, scorer, e) or {}
                row = read_features(labels, [item[label] for label in labels])
                values += [row[f"read_{label}"] for label in labels]
            if match:
                values += match_values(reads, e)
            extra.append(values)
        names += [f"read_{label}" for label in labels]
        if whole:
            names += [f"whole_{label}" for label in labels]
        if match:
            names += list(SIM_MATCH)
        X = np.hstack([X, np.asarray(extra, dtype=np.float64).reshape(len(kept), -1)])
        out[scorer] = (X, y, names, [e["group"] for e in kept], kept)
    return out


def relevancy_stack_data(
    card: str, train: Path
) -> tuple[np.ndarray, np.ndarray, list[str], list[str], list[dict[str, Any]]] | None:
    """The relevancy features (every evidence column, then the statement read), labels,
    column names, groups and examples of every relevancy example with a pair read, the
    forum comments included (None: no relevancy read stored). What :data:`STACKED_SET`
    learns from."""
    reads = load_reads(reads_path(card))
    examples = [
        e
        for e in pool(train)["relevancy"]
        if ("relevancy", "pair", e["id"]) in reads
        and STACK_SOURCE_WEIGHTS.get(e["source"], 1.0) > 0
    ]
    if not examples:
        return None
    X, y = relevancy_matrix(shared_embedder(EMBEDDER), examples)
    values = []
    for e in examples:
        pair = reads[("relevancy", "pair", e["id"])]
        row = read_features(RELEVANCY_LABELS, [pair[label] for label in RELEVANCY_LABELS])
        values.append([row[name] for name in REL_READ])
    X = np.hstack([X, np.asarray(values, dtype=np.float64)])
    return X, y, [*REL_FEATURES_ALL, *REL_READ], [e["group"] for e in examples], examples


def embedded_logits(model: dict[str, Any], X: np.ndarray, names: list[str]) -> np.ndarray:
    """The logits (class order :data:`REL_CLASSES`) the embedded card's relevancy model
    ``model`` gives each row of ``X``, from the model its gates pick for the row."""
    parsed = (GatedModel if model["kind"] == "gated" else LogisticModel).model_validate(model)
    out = np.zeros((len(X), len(REL_CLASSES)))
    for i, row in enumerate(X):
        values = dict(zip(names, row.tolist(), strict=True))
        leaf: Any = parsed
        while isinstance(leaf, GatedModel):
            leaf = leaf.model if leaf.holds(values) else leaf.otherwise
        z = [(values[f] - m) / s for f, m, s in zip(leaf.features, leaf.means, leaf.scales)]
        logits = np.asarray(leaf.weights) @ np.asarray(z) + np.asarray(leaf.intercepts)
        out[i] = [logits[leaf.classes.index(c)] for c in REL_CLASSES]
    return out


STACK_INPUTS = [*(f"embedded_{c}" for c in REL_CLASSES), *REL_READ]


def stack_inputs(data: tuple[Any, ...]) -> np.ndarray:
    """The stack's inputs (:data:`STACK_INPUTS`) for each example of ``data``
    (:func:`relevancy_stack_data`). The embedded model was fitted on these examples'
    evidence among many others: its logits here are in-sample, a little more sure than on
    new answers."""
    X, _y, names, _groups, _examples = data
    E = embedded_logits(embedded_verdicts()["relevancy"], X, names)
    return np.hstack([E, columns(X, names, REL_READ)])


def stacked_on_embedded(data: tuple[Any, ...], l2: float = STACK_L2) -> dict[str, Any]:
    """The embedded card's relevancy model with the judge's statement read stacked on it:
    a logistic model of :data:`STACK_INPUTS` fitted on ``data``, composed into every model
    of the embedded card's gated relevancy (same gates, each model's features plus
    :data:`REL_READ`)."""
    _X, y, _names, _groups, examples = data
    stack = json.loads(
        dumps_params(
            fit(
                stack_inputs(data),
                y,
                STACK_INPUTS,
                REL_CLASSES,
                l2=l2,
                sample_weight=example_weights(y, len(REL_CLASSES), examples, STACK_SOURCE_WEIGHTS),
            )
        )
    )
    return compose_stack(embedded_verdicts()["relevancy"], stack)


def compose_stack(model: dict[str, Any], stack: dict[str, Any]) -> dict[str, Any]:
    """``model`` (logistic or gated) with ``stack`` applied to its logits: for a logistic
    model, stack logit c = sum_k a_ck (z_k - mu_k) / s_k + read terms + b_c, where z_k is
    the model's logit k, linear in its standardised features; so the result is one
    logistic model of the model's features and the read."""
    if model["kind"] == "gated":
        return {
            **model,
            "model": compose_stack(model["model"], stack),
            "otherwise": compose_stack(model["otherwise"], stack),
        }
    order = [model["classes"].index(c) for c in REL_CLASSES]
    W = np.asarray(model["weights"])[order]  # rows in REL_CLASSES order
    b = np.asarray(model["intercepts"])[order]
    k = len(REL_CLASSES)
    mu = np.asarray(stack["means"])
    sd = np.asarray(stack["scales"])
    A = np.asarray(stack["weights"])[:, :k] / sd[:k]  # per unit of each embedded logit
    weights = np.hstack([A @ W, np.asarray(stack["weights"])[:, k:]])
    intercepts = np.asarray(stack["intercepts"]) + A @ (b - mu[:k])
    composed = {
        "kind": "logistic",
        "classes": list(REL_CLASSES),
        "features": [*model["features"], *REL_READ],
        "means": [*model["means"], *stack["means"][k:]],
        "scales": [*model["scales"], *stack["scales"][k:]],
        "weights": weights.tolist(),
        "intercepts": intercepts.tolist(),
        "l2": stack["l2"],
    }
    rounded: dict[str, Any] = json.loads(dumps_params(composed))
    return rounded


def stack_cv(data: tuple[Any, ...]) -> dict[str, Any]:
    """Grouped 5-fold CV AUC of the stack (:func:`stacked_on_embedded`): the embedded
    model's logits alone, the read alone, both; overall and per source."""
    _X, y, _names, groups, examples = data
    sets = {
        "the embedded card's logits": STACK_INPUTS[: len(REL_CLASSES)],
        "judge read only": list(REL_READ),
        STACKED_SET: STACK_INPUTS,
    }
    inputs = (stack_inputs(data), y, STACK_INPUTS, groups, examples)
    return sets_cv("relevancy", inputs, sets, STACK_L2, STACK_SOURCE_WEIGHTS)


def match_values(
    reads: dict[tuple[str, str, str], dict[str, float]], example: dict[str, Any]
) -> list[float]:
    """The match read's feature values (:data:`SIM_MATCH`) of one similarity example."""
    answer = reads[("similarity", "match", example["id"])]
    row = read_features(MATCH_LABELS, [answer[label] for label in MATCH_LABELS])
    return [row[f"read_{label}"] for label in MATCH_LABELS]


def sentence_pair_matrix(
    card: str, train: Path
) -> tuple[np.ndarray, np.ndarray, list[str], list[str], list[dict[str, Any]]] | None:
    """The similarity features (every evidence column, then the match read), labels, column
    names, groups and examples of the training examples with a match read that meet
    :func:`sentence_pair_gate`, whether or not their pair read is stored (None: no match
    read stored). What a :data:`SENTENCES_OWN` card's sentence-pair model learns from."""
    reads = load_reads(reads_path(card))
    examples = [
        e
        for e in pool(train)["similarity"]
        if ("similarity", "match", e["id"]) in reads and SOURCE_WEIGHTS.get(e["source"], 1.0) > 0
    ]
    if not examples:
        return None
    X, y = similarity_matrix(shared_embedder(EMBEDDER), examples)
    values = [match_values(reads, e) for e in examples]
    X = np.hstack([X, np.asarray(values, dtype=np.float64)])
    inside = sentence_rows(X, sentence_pair_gate())
    kept = [e for e, keep in zip(examples, inside, strict=True) if keep]
    return X[inside], y[inside], [*SIM_FEATURES_ALL, *SIM_MATCH], [e["group"] for e in kept], kept


def example_weights(
    y: np.ndarray,
    classes: int,
    examples: list[dict[str, Any]],
    table: dict[str, float] | None = None,
) -> np.ndarray:
    """Each example's fitting weight: its class balanced, its source weighted by ``table``
    (default :data:`SOURCE_WEIGHTS`)."""
    return balanced_weights(y, classes) * source_weights(
        examples, SOURCE_WEIGHTS if table is None else table
    )


def _score(scorer: str, P: np.ndarray) -> np.ndarray:
    if scorer == "relevancy":
        return P[:, 2] + 0.3 * P[:, 1]  # classes no, unsure, yes
    return P @ np.array([0.0, 0.4, 0.8, 1.2])  # missing, partial, semantic, exact


def _auc(labels: np.ndarray, score: np.ndarray) -> float | None:
    if labels.all() or not labels.any():
        return None
    return round(float(roc_auc_score(labels, score)), 4)


def cross_validation(data: dict[str, Any]) -> dict[str, Any]:
    """Grouped 5-fold CV AUC per feature set, overall and per source."""
    report: dict[str, Any] = {}
    for scorer, matrix in data.items():
        names = matrix[2]
        whole = any(name.startswith("whole_") for name in names)
        match = any(name.startswith("match_") for name in names)
        report[scorer] = sets_cv(scorer, matrix, feature_sets(scorer, whole, match), L2)
    return report


def sets_cv(
    scorer: str,
    matrix: tuple[Any, ...],
    sets: dict[str, list[str]],
    l2: float,
    weights: dict[str, float] | None = None,
) -> dict[str, Any]:
    """Grouped 5-fold CV AUC of each feature set of ``sets`` on ``matrix`` (features,
    labels, column names, groups, examples), fitted with penalty ``l2`` and the sources
    weighted by ``weights`` (default :data:`SOURCE_WEIGHTS`); overall and per source."""
    X, y, names, groups, examples = matrix
    classes = REL_CLASSES if scorer == "relevancy" else SIM_CLASSES
    labels = np.isin(y, (2,) if scorer == "relevancy" else (2, 3))
    sources = np.array([e["source"] for e in examples])
    report: dict[str, Any] = {"examples": len(y)}
    for tag, chosen in sets.items():
        P = grouped_cv_proba(
            columns(X, names, chosen),
            y,
            groups,
            chosen,
            classes,
            l2=l2,
            sample_weight=example_weights(y, len(classes), examples, weights),
        )
        report[tag] = _by_source(scorer, P, labels, sources)
    return report


def _by_source(
    scorer: str, P: np.ndarray, labels: np.ndarray, sources: np.ndarray
) -> dict[str, float | None]:
    """ROC AUC of out-of-fold probabilities, overall and per source."""
    score = _score(scorer, P)
    by_source = {
        source: _auc(labels[sources == source], score[sources == source])
        for source in sorted(set(sources))
    }
    return {"all": _auc(labels, score), **by_source}


def print_report(report: dict[str, Any]) -> None:
    for scorer, rows in report.items():
        tags = [tag for tag in rows if tag != "examples"]
        columns_ = list(rows[tags[0]])
        print(f"\n{scorer} ({rows['examples']} examples), grouped 5-fold CV ROC AUC\n")
        print("| feature set | " + " | ".join(columns_) + " |")
        print("|---|" + "---:|" * len(columns_))
        for tag in tags:
            cells = ["-" if v is None else f"{v:.3f}" for v in rows[tag].values()]
            print(f"| {tag} | " + " | ".join(cells) + " |")


def embedded_verdicts() -> dict[str, Any]:
    """The embedded card's verdict file (:data:`EMBEDDED_SET` copies its models)."""
    loaded: dict[str, Any] = json.loads(EMBEDDED_FILE.read_text(encoding="utf-8"))
    return loaded


def longest(examples: list[dict[str, Any]], shown: str) -> int:
    """The most words of one side (``reference`` or ``output``) of these similarity
    examples, as the match read shows it and as the scorer counts it."""
    return max(len(read_variables("match", "similarity", e)[shown].split()) for e in examples)


def gated_on_length(
    fitted: dict[str, Any], examples: list[dict[str, Any]], sentences: bool = False
) -> dict[str, Any]:
    """A similarity model with the match read, gated (:data:`GATE_FEATURES`): itself up to
    the longest reference and answer read, the embedded card's similarity model past them.

    The embedded card's model is itself gated: whole sentences of a short item go to its
    sentence model. Its short-item limits lie within these, so past them it uses its
    short-answer model (``otherwise``) for every verdict, and that is the model copied.
    With ``sentences`` (:data:`SENTENCES_COPIED`), within the limits the sentence pairs the
    embedded card sends to its sentence-pair model go to that model (:func:`with_sentences`).
    """
    when = [
        {"feature": feature, "at_most": float(longest(examples, shown))}
        for feature, shown in GATE_FEATURES.items()
    ]
    within = with_sentences(fitted) if sentences else fitted
    return {"kind": "gated", "when": when, "model": within, "otherwise": past_the_gate(when)}


def with_sentences(fitted: dict[str, Any]) -> dict[str, Any]:
    """``fitted`` behind a gate for sentence pairs: a verdict the embedded card sends to its
    model of sentence pairs (both sides end as sentences do, of at least three words, and
    neither text is over twenty words: its sentence gate, then its pair gate) goes to that
    model (copied), any other to ``fitted``. Longer phrases that the embedded card sends to
    its sentence model ("the founding of new Protestant churches") stay with ``fitted``:
    sent there too, sas_squad fell 0.002 at 100 rows with the 0.5B card (0.7597 -> 0.7577);
    so did longer sentences (one MedQuAD answer people rated worst, 0.00 -> 0.02)."""
    inner = embedded_verdicts()["similarity"]["model"]
    return {
        "kind": "gated",
        "when": sentence_pair_gate(),
        "model": inner["model"],
        "otherwise": fitted,
    }


def past_the_gate(when: list[dict[str, Any]]) -> dict[str, Any]:
    """The embedded card's similarity model for the items past the item limits ``when``."""
    embedded: dict[str, Any] = embedded_verdicts()["similarity"]
    if embedded.get("kind") != "gated":
        return embedded
    ours = {c["feature"]: c["at_most"] for c in when}
    theirs = {c["feature"]: c.get("at_most") for c in embedded["when"] if c.get("feature") in ours}
    if set(theirs) != set(ours) or any(
        limit is None or limit > ours[f] for f, limit in theirs.items()
    ):
        raise SystemExit(
            f"the embedded card's sentence gate {embedded['when']} does not keep within this "
            f"card's item limits {when}: past them it would not be one model to copy"
        )
    otherwise: dict[str, Any] = embedded["otherwise"]
    return otherwise


def sentence_pair_gate() -> list[dict[str, Any]]:
    """The conditions under which the embedded card's similarity sends a verdict to its
    sentence-pair model (as :func:`with_sentences` copies them)."""
    embedded: dict[str, Any] = embedded_verdicts()["similarity"]
    inner = embedded.get("model", {})
    if embedded.get("kind") != "gated" or inner.get("kind") != "gated":
        raise SystemExit("the embedded card's similarity model has no sentence-pair model")
    return [*inner["when"], *[c for c in embedded["when"] if "feature" in c]]


def _fit_json(
    X: np.ndarray,
    y: np.ndarray,
    names: list[str],
    features: list[str],
    examples: list[dict[str, Any]],
    classes: list[str],
    weights: dict[str, float] | None = None,
    l2: float = L2,
) -> dict[str, Any]:
    """A logistic model of ``features`` (the JSON the file holds), the classes balanced and
    the sources weighted by ``weights`` (default :data:`SOURCE_WEIGHTS`)."""
    fitted: dict[str, Any] = json.loads(
        dumps_params(
            fit(
                columns(X, names, features),
                y,
                features,
                classes,
                l2=l2,
                sample_weight=example_weights(y, len(classes), examples, weights),
            )
        )
    )
    return fitted


def own_sentence_pairs(fitted: dict[str, Any], pairs: tuple[Any, ...]) -> dict[str, Any]:
    """``fitted`` behind :func:`sentence_pair_gate`, with a model of :data:`PAIR_FEATURES`
    fitted on the sentence pairs ``pairs`` (:func:`sentence_pair_matrix`) in front of it
    (:data:`SENTENCES_OWN`), weighted and penalised as the embedded card's sentence-pair
    model is."""
    X, y, names, _groups, examples = pairs
    model = _fit_json(
        X,
        y,
        names,
        PAIR_FEATURES,
        examples,
        SIM_CLASSES,
        SENTENCE_PAIR_SOURCE_WEIGHTS,
        SENTENCE_PAIR_L2,
    )
    return {"kind": "gated", "when": sentence_pair_gate(), "model": model, "otherwise": fitted}


def sentence_pair_cv(pairs: tuple[Any, ...]) -> dict[str, Any]:
    """Grouped 5-fold CV AUC of the sentence-pair models (the embedded card's features,
    the match read, both), weighted and penalised as :func:`own_sentence_pairs` fits."""
    sets = {
        "evidence (the embedded card's sentence-pair set)": SENTENCE_FEATURES,
        "match read only": list(SIM_MATCH),
        "evidence + match read": PAIR_FEATURES,
    }
    return sets_cv("similarity", pairs, sets, SENTENCE_PAIR_L2, SENTENCE_PAIR_SOURCE_WEIGHTS)


def fitted_models(
    data: dict[str, Any],
    chosen: dict[str, list[str] | None],
    gate: bool = True,
    sentences: bool = False,
    pairs: tuple[Any, ...] | None = None,
    stack: tuple[Any, ...] | None = None,
) -> dict[str, Any]:
    """Each scorer's verdict model (the JSON the file holds) on the chosen features; where
    the chosen set is None (:data:`EMBEDDED_SET`), the embedded card's model, copied; where
    it is :data:`STACK_INPUTS` (:data:`STACKED_SET`), the embedded card's relevancy model
    with the read stacked on it, fitted on ``stack`` (:func:`relevancy_stack_data`). With
    ``gate``, a similarity model that uses the match read is gated on the texts' lengths
    (:func:`gated_on_length`; with ``sentences``, the sentence pairs within the limits go to
    the embedded card's sentence-pair model; with ``pairs``, the sentence pairs with a match
    read, to a model of the same features fitted on them, :func:`own_sentence_pairs`)."""
    fitted = {}
    for scorer, (X, y, names, _groups, examples) in data.items():
        classes = REL_CLASSES if scorer == "relevancy" else SIM_CLASSES
        features = chosen[scorer]
        if features is None:
            fitted[scorer] = embedded_verdicts()[scorer]
            continue
        if features == STACK_INPUTS:
            if stack is None:
                raise SystemExit(f"{STACKED_SET!r}: no relevancy read stored to fit it on")
            fitted[scorer] = stacked_on_embedded(stack)
            continue
        fitted[scorer] = _fit_json(X, y, names, features, examples, classes)
        if gate and scorer == "similarity" and any(f.startswith("match_") for f in features):
            if pairs is not None:
                fitted[scorer] = own_sentence_pairs(fitted[scorer], pairs)
            fitted[scorer] = gated_on_length(fitted[scorer], examples, sentences)
    return fitted


def named_set(scorer: str, name: str) -> list[str] | None:
    """The feature columns of the set called ``name`` (None: :data:`EMBEDDED_SET`)."""
    if name == EMBEDDED_SET:
        return None
    if name == STACKED_SET and scorer == "relevancy":
        return list(STACK_INPUTS)
    named = feature_sets(scorer, True, True)
    if name not in named:
        raise SystemExit(
            f"fit_card_verdicts: no {scorer} feature set {name!r}; "
            f"choose one of {sorted([*named, EMBEDDED_SET, STACKED_SET])}"
        )
    return named[name]


def shipped_sets(card: str) -> dict[str, list[str] | None]:
    """The feature columns of the sets ``card`` ships (:data:`SHIPPED`)."""
    return {scorer: named_set(scorer, name) for scorer, name in SHIPPED[card].items()}


def write(
    card: str,
    data: dict[str, Any],
    chosen: dict[str, list[str] | None],
    cv: Any,
    gate: bool = True,
    out: Path | None = None,
    pairs: tuple[Any, ...] | None = None,
    stack: tuple[Any, ...] | None = None,
) -> None:
    """Write the card's verdict file (or ``out``, leaving the card as it is); ``pairs``: the
    sentence pairs of a :data:`SENTENCES_OWN` card (:func:`sentence_pair_matrix`);
    ``stack``: the relevancy examples a :data:`STACKED_SET` is fitted on."""
    fitted = fitted_models(data, chosen, gate, card in SENTENCES_COPIED, pairs, stack)
    counts: dict[str, dict[str, int]] = defaultdict(dict)
    copied = {}
    for scorer, (_X, y, _names, _groups, _examples) in data.items():
        classes = REL_CLASSES if scorer == "relevancy" else SIM_CLASSES
        if chosen[scorer] is None:
            counts[scorer] = embedded_verdicts()["training"]["examples"][scorer]
            copied[scorer] = (
                f"models/{EMBEDDED_FILE.name} (tools/fit_verdicts.py), copied: "
                f"{COPIED_BECAUSE.get(card, ADDS_NOTHING)}, so no read is made"
            )
            continue
        if chosen[scorer] == STACK_INPUTS and stack is not None:
            counts[scorer] = {c: int((stack[1] == i).sum()) for i, c in enumerate(classes)}
            copied[scorer] = (
                f"models/{EMBEDDED_FILE.name} (tools/fit_verdicts.py) with this judge's "
                "read of each statement stacked on it: a logistic model of its logits and "
                "the read, fitted on the relevancy examples read (the forum comments "
                "included) and composed into each of its models"
            )
            continue
        counts[scorer] = {c: int((y == i).sum()) for i, c in enumerate(classes)}
        if scorer == "similarity" and pairs is not None:
            counts["sentence pairs"] = {
                c: int((pairs[1] == i).sum()) for i, c in enumerate(SIM_CLASSES)
            }
        if fitted[scorer].get("kind") == "gated":
            limits = " or ".join(
                f"{c['at_most']:.0f} {c['feature'].replace('_', ' ')}"
                for c in fitted[scorer]["when"]
            )
            copied[scorer] = (
                f"past {limits} (the longest texts read): models/{EMBEDDED_FILE.name} "
                "(tools/fit_verdicts.py), copied, no read made"
            )
            if pairs is not None:
                copied[scorer] += (
                    "; within them, the sentence pairs the embedded card sends to its "
                    "sentence-pair model: a model of the same features fitted on the "
                    "training examples of that kind with a match read"
                )
            if card in SENTENCES_COPIED:
                copied[scorer] += (
                    "; within them, the sentence pairs it sends to its sentence-pair model: "
                    "that model, copied"
                )
    header = json.loads(reads_path(card).read_text(encoding="utf-8").splitlines()[0])
    document = {
        "format": "offline-scorer-verdicts/1",
        "judge": card,
        "embedder": EMBEDDER,
        "scoring": SCORING,
        "relevancy": fitted["relevancy"],
        "similarity": fitted["similarity"],
        "training": {
            "script": "tools/fit_card_verdicts.py",
            "reads": f"tools/reads/{card}.jsonl (tools/read_training.py, {header['dtype']})",
            "data": "../shared/train-data; never eval-data",
            "seed": SEED,
            "l2": L2,
            "class_weights": "balanced",
            "source_weights": dict(sorted(SOURCE_WEIGHTS.items())),
            "examples": counts,
            "grouped_cv_auc": cv,
            **({"copied": copied} if copied else {}),
        },
        "slice_check": {},
    }
    text = json.dumps(document, sort_keys=True, indent=1) + "\n"
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    if out is not None:
        out.write_text(text, encoding="utf-8")
        print(f"wrote {out} (sha256 {digest}); the card is unchanged")
        return
    out = MODELS / f"{card}.verdicts.json"
    out.write_text(text, encoding="utf-8")
    card_file = MODELS / f"{card}.toml"
    toml = card_file.read_text(encoding="utf-8")
    section = f'[verdicts]\nfile = "{out.name}"\nsha256 = "{digest}"\n'
    if "[verdicts]" in toml:
        toml = re.sub(r'(\[verdicts\][^\[]*?sha256 = ")[0-9a-f]*(")', rf"\g<1>{digest}\2", toml)
    else:
        head, sep, tail = toml.partition("\n[source]")
        toml = f"{head.rstrip()}\n\n{section}{sep}{tail}"
    card_file.write_text(toml, encoding="utf-8")
    print(f"wrote {out} (sha256 {digest}) and its sha256 in {card_file}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--card", default=DEFAULT_CARD)
    parser.add_argument("--train", type=Path, default=TRAIN)
    parser.add_argument("--cv", action="store_true", help="print the grouped-CV ablation")
    parser.add_argument("--write", action="store_true", help="write the card's verdict file")
    parser.add_argument(
        "--relevancy-features",
        default=None,
        help="the feature set --write fits for relevancy (a row name of the --cv table); "
        "default: the card's shipped set",
    )
    parser.add_argument(
        "--similarity-features",
        default=None,
        help="the feature set --write fits for similarity (a row name of the --cv table); "
        "default: the card's shipped set",
    )
    parser.add_argument(
        "--no-reference-gate",
        action="store_true",
        help="--write the similarity model with the match read for texts of every length "
        "(as shipped before the gate)",
    )
    parser.add_argument(
        "--out", type=Path, default=None, help="--write to this file, leaving the card as it is"
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    data = matrices(args.card, args.train)
    log(
        f"{', '.join(f'{s}: {len(d[1])} examples' for s, d in data.items())} "
        f"({time.perf_counter() - started:.0f} s)"
    )
    pairs = sentence_pair_matrix(args.card, args.train) if args.card in SENTENCES_OWN else None
    shipped = SHIPPED.get(args.card, SHIPPED[DEFAULT_CARD])
    relevancy_set = args.relevancy_features or shipped["relevancy"]
    stack = relevancy_stack_data(args.card, args.train) if relevancy_set == STACKED_SET else None
    report = cross_validation(data) if args.cv or args.write else None
    if report is not None and pairs is not None:
        # The sentence pairs' model, on every such example with a match read.
        report["sentence pairs"] = sentence_pair_cv(pairs)
    if report is not None and stack is not None:
        # The stack on the embedded card's relevancy, on every relevancy example read.
        report["relevancy stacked on the embedded card's model"] = stack_cv(stack)
    if report is not None:
        print_report(report)
    if args.write:
        wanted = {
            "relevancy": relevancy_set,
            "similarity": args.similarity_features or shipped["similarity"],
        }
        chosen = {scorer: named_set(scorer, name) for scorer, name in wanted.items()}
        write(args.card, data, chosen, report, not args.no_reference_gate, args.out, pairs, stack)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
