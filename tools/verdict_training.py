"""Training data and fitting for the verdict models (used by tools/fit.py).

Examples come from ``../shared/train-data/`` only (never eval-data), built deterministically
(seeded ``random.Random``, sorted inputs):

* relevancy (question x statement -> yes / unsure / no): haluquestqa sentences outside the
  expert-marked irrelevant spans (yes) and inside them (unsure); the unit of a correct
  NQ answer that carries the reference (yes); refusals (no); a statement from an answer to
  an unrelated question (no) and from the nearest other question (unsure, a hard negative).
* similarity (reference aliases x answer unit -> exact / semantic / partial / missing):
  evouna and nq301 answers judged correct (exact when an alias appears, else semantic) or
  incorrect (missing), and SQuAD answer pairs graded 2 / 1 / 0 (exact or semantic /
  partial / missing).
* whole sentences (:func:`sts_similarity_examples`): SemEval STS pairs, the 0-5 score cut
  into bands (:data:`STS_BANDS`), so that a reworded sentence with the same content is a
  match; plus copies of the equivalent pairs with one shared name swapped for another
  (missing), so that one with a changed entity is not.
* forum comments (:func:`cqa_relevancy_examples`): SemEval-2016 CQA, Good / Potentially
  useful / Bad -> yes / unsure / no.

The fit is a multinomial logistic regression with the first class as the reference (its
weights and intercept fixed at 0, as the scorers read it), on standardised features, with
per-example weights and an L2 penalty of strength ``l2`` on the other classes' weights
(``1e-8`` on their intercepts): the penalised negative log-likelihood, its gradient and
Hessian are written out here; ``scipy.optimize.minimize`` (trust-exact) minimises it and
``scipy.optimize.root`` (hybr) then solves gradient = 0 to the last digits (loss values are
too coarse there). Deterministic: the same data gives byte-identical JSON.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import minimize, root
from scipy.special import logsumexp

from offline_scorer.toolkit import (
    REFUSAL,
    aliases_of,
    containment,
    content_tokens,
    normalize_tokens,
    split_answer,
    split_reference,
    token_f1,
)

TRAIN = Path("../shared/train-data")


def load(root: Path, name: str) -> list[dict[str, Any]]:
    """The rows of one dataset folder."""
    with (root / name / "data.jsonl").open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


SEED = 20240607
RESTATED_QUESTIONS = 400
REL_CLASSES = ["no", "unsure", "yes"]
SIM_CLASSES = ["missing", "partial", "semantic", "exact"]


def qkey(q: str) -> str:
    return " ".join(normalize_tokens(q or ""))


def _overlaps(sentence: str, spans: list[str]) -> bool:
    s = " ".join(normalize_tokens(sentence))
    for span in spans:
        p = " ".join(normalize_tokens(span))
        if not p:
            continue
        if p in s or s in p:
            return True
        # partial overlap: most of the sentence's tokens inside the span
        st, pt = set(s.split()), set(p.split())
        if st and len(st & pt) / len(st) >= 0.6:
            return True
    return False


def best_unit(aliases: list[str], units: list[str]) -> str:
    """Heuristic best answer unit for a reference (used only to build training pairs)."""

    def key(u):
        return max(containment(a, u) + token_f1(u, a) for a in aliases)

    return max(units, key=lambda u: (key(u), -units.index(u)))


def contains_alias(aliases: list[str], unit: str) -> bool:
    u = " " + " ".join(normalize_tokens(unit)) + " "
    return any(
        (" " + " ".join(normalize_tokens(a)) + " ") in u for a in aliases if normalize_tokens(a)
    )


def _qa_rows(train: Path):
    rows = load(train, "evouna_nq") + load(train, "nq301_openqa_eval")
    rows.sort(key=lambda r: r["id"])
    return rows


def relevancy_examples(
    train: Path = TRAIN, max_qa_questions: int = 1500, per_answer: int = 4
) -> list[dict]:
    """Question x statement examples labelled yes / unsure / no."""
    rng = random.Random(SEED)
    out: list[dict] = []
    # ---- haluquestqa: yes = sentences outside irrelevant spans; unsure = inside
    hq = sorted(load(train, "haluquestqa_relevance"), key=lambda r: r["id"])
    for r in hq:
        spans = (r["meta"] or {}).get("irrelevant_spans") or []
        sents = split_answer(r["output"])
        good = [s for s in sents if not _overlaps(s, spans)]
        bad = [s for s in sents if _overlaps(s, spans)]
        rng.shuffle(good)
        for s in good[:per_answer]:
            out.append(
                dict(
                    group=qkey(r["input"]),
                    question=r["input"],
                    statement=s,
                    label="yes",
                    source="hq_clean",
                    answer=r["output"],
                )
            )
        for s in bad:
            out.append(
                dict(
                    group=qkey(r["input"]),
                    question=r["input"],
                    statement=s,
                    label="unsure",
                    source="hq_irrelevant_span",
                    answer=r["output"],
                )
            )
    # ---- QA sets: yes = the unit of a correct answer that carries the reference
    by_q: dict[str, list[dict]] = defaultdict(list)
    for r in _qa_rows(train):
        by_q[qkey(r["input"])].append(r)
    questions = sorted(by_q)
    rng.shuffle(questions)
    questions = sorted(questions[:max_qa_questions])
    answer_stmt: dict[str, str] = {}
    refusals: list[tuple[str, str]] = []
    for q in questions:
        rows = by_q[q]
        for r in rows:
            units = split_answer(r["output"])
            for u in units:
                if REFUSAL.search(u):
                    refusals.append((q, u, r["output"]))
        correct = [r for r in rows if r["human_score"] == 1.0]
        if not correct:
            continue
        r = correct[rng.randrange(len(correct))]
        units = [u for u in split_answer(r["output"]) if not REFUSAL.search(u)]
        if not units:
            continue
        s = best_unit(aliases_of(r["ground_truth"], r.get("ground_truths")), units)
        answer_stmt[q] = (s, r["output"])
        out.append(
            dict(
                group=q,
                question=rows[0]["input"],
                statement=s,
                label="yes",
                source="qa_correct",
                answer=r["output"],
            )
        )
    # ---- no: refusal / error statements (SPEC: error message -> no)
    rng.shuffle(refusals)
    for q, u, a in refusals[:300]:
        out.append(
            dict(
                group=q,
                question=by_q[q][0]["input"],
                statement=u,
                label="no",
                source="qa_refusal",
                answer=a,
            )
        )
    # ---- hq statements + QA statements pooled for negatives
    pool = [(qkey(r["input"]), r["input"], s) for r in hq for s in split_answer(r["output"])[:3]]
    stmt_answer = {
        (qkey(r["input"]), s): r["output"] for r in hq for s in split_answer(r["output"])[:3]
    }
    pool += [(q, by_q[q][0]["input"], s) for q, (s, _) in sorted(answer_stmt.items())]
    stmt_answer.update({(q, s): a for q, (s, a) in answer_stmt.items()})
    qtexts = sorted({(g, qt) for g, qt, _ in pool})
    # ---- no: statement from an answer to a random unrelated question (low overlap)
    for g, qt in qtexts:
        qt_tokens = set(content_tokens(qt))
        for _ in range(5):
            og, _oq, s = pool[rng.randrange(len(pool))]
            if og != g and len(qt_tokens & set(content_tokens(s))) == 0:
                out.append(
                    dict(
                        group=g,
                        question=qt,
                        statement=s,
                        label="no",
                        source="offtopic",
                        answer=stmt_answer[(og, s)],
                    )
                )
                break
    # ---- unsure: the question restated as the answer (on the topic, answers nothing)
    restated = list(qtexts)
    rng.shuffle(restated)
    for g, qt in sorted(restated[:RESTATED_QUESTIONS]):
        statement = qt.strip()
        if rng.random() < 0.5:
            statement = statement[:1].lower() + statement[1:]
        out.append(
            dict(
                group=g,
                question=qt,
                statement=statement,
                label="unsure",
                source="restated_question",
                answer=statement,
            )
        )
    # ---- unsure (hard negatives): statement from the nearest OTHER question (token Jaccard)
    inv: dict[str, list[int]] = defaultdict(list)
    qtok = [set(content_tokens(qt)) for _, qt in qtexts]
    for i, toks in enumerate(qtok):
        for t in toks:
            inv[t].append(i)
    stmts_by_g: dict[str, list[str]] = defaultdict(list)
    for g, _, s in pool:
        stmts_by_g[g].append(s)
    for i, (g, qt) in enumerate(qtexts):
        cand: dict[int, int] = defaultdict(int)
        for t in qtok[i]:
            if len(inv[t]) > 200:  # skip very common tokens
                continue
            for j in inv[t]:
                if j != i:
                    cand[j] += 1
        best, best_s = None, 0.0
        for j, c in sorted(cand.items()):
            jac = c / len(qtok[i] | qtok[j])
            # > 0.5: probably the same question reworded (its answer would be a "yes")
            if best_s < jac <= 0.5 and qtexts[j][0] != g:
                best, best_s = j, jac
        if best is None or best_s < 0.2:
            continue
        og = qtexts[best][0]
        s = max(stmts_by_g[og], key=lambda x: (len(set(content_tokens(x)) & qtok[i]), x))
        out.append(
            dict(
                group=g,
                question=qt,
                statement=s,
                label="unsure",
                source="nn_other_question",
                answer=stmt_answer[(og, s)],
            )
        )
    return out


def similarity_examples(train: Path = TRAIN, max_evouna: int = 3000) -> list[dict]:
    """Reference aliases x answer unit examples labelled exact / semantic / partial / missing."""
    rng = random.Random(SEED + 1)
    out: list[dict] = []
    ev = sorted(load(train, "evouna_nq"), key=lambda r: r["id"])
    pos = [r for r in ev if r["human_score"] == 1.0]
    neg = [r for r in ev if r["human_score"] == 0.0]
    rng.shuffle(pos)
    rng.shuffle(neg)
    half = max_evouna // 2
    chosen = sorted(pos[:half] + neg[: max_evouna - half], key=lambda r: r["id"])
    chosen += sorted(load(train, "nq301_openqa_eval"), key=lambda r: r["id"])
    for r in chosen:
        aliases = aliases_of(r["ground_truth"], r.get("ground_truths"))
        units = split_answer(r["output"])
        if not aliases or not units:
            continue
        u = best_unit(aliases, units)
        if r["human_score"] == 1.0:
            label = "exact" if contains_alias(aliases, u) else "semantic"
        else:
            label = "missing"
        out.append(
            dict(
                group="q:" + qkey(r["input"]),
                aliases=aliases,
                answer_unit=u,
                label=label,
                source=r["id"].split("-")[0],
                reference=r["ground_truth"] or "",
                answer=r["output"] or "",
                question=r["input"] or "",
            )
        )
    for r in sorted(load(train, "sas_squad"), key=lambda r: r["id"]):
        ref, ans = r["ground_truth"] or "", r["output"] or ""
        if not ref.strip() or not ans.strip():
            continue
        s = r["human_score"]
        if s == 2.0:
            label = "exact" if normalize_tokens(ref) == normalize_tokens(ans) else "semantic"
        elif s == 1.0:
            label = "partial"
        else:
            label = "missing"
        out.append(
            dict(
                group="r:" + qkey(ref),
                aliases=[ref],
                answer_unit=ans,
                label=label,
                source="sas",
                reference=ref,
                answer=ans,
            )
        )
    return out


# STS 0-5 -> match type (the SemEval guidelines: 5 completely equivalent; 4 mostly, only
# unimportant details differ; 3 roughly, some important detail differs or is missing; 2
# not equivalent but sharing some details; 1 only the same topic; 0 unrelated). Points as
# a share of exact (1, 0.67, 0.33, -0.13) follow score / 5. The bands between the ranges
# are left out: their pairs sit between two labels and would only blur the boundary.
STS_BANDS = (
    (4.6, 5.0, "exact"),
    (3.6, 4.4, "semantic"),
    (2.0, 3.2, "partial"),
    (0.0, 1.2, "missing"),
)
# STS has few pairs that differ only in one entity, and rates those 2-3 (sharing details),
# where a grader gives no credit ("Milan" for "Rome"). So each equivalent pair (exact or
# semantic) with a name both sides share also gives a swapped copy: that name in the answer
# replaced by a name of another pair's reference, labelled missing.
_NAME = re.compile(r"\b[A-Z][a-z]{2,}\b")


def _swapped(example: dict, names: list[str], rng: random.Random) -> dict | None:
    answer = example["answer_unit"]
    reference_words = set(normalize_tokens(example["reference"]))
    shared = [w for w in _NAME.findall(answer) if w.lower() in reference_words]
    shared = [w for w in shared if w.lower() not in STOP_NAMES]
    if not shared:
        return None
    name = shared[rng.randrange(len(shared))]
    other = names[rng.randrange(len(names))]
    if other.lower() in reference_words or other.lower() in normalize_tokens(answer):
        return None
    unit = re.sub(rf"\b{name}\b", other, answer)
    return dict(example, answer_unit=unit, answer=unit, label="missing", source="sts_swap")


STOP_NAMES = frozenset(["the", "this", "that", "there", "these", "those", "what", "when"])


def sts_label(score: float) -> str | None:
    """The match type of an STS score, or None in a band left out."""
    for low, high, label in STS_BANDS:
        if low <= score <= high:
            return label
    return None


def sts_similarity_examples(train: Path = TRAIN) -> list[dict]:
    """Whole-sentence reference x answer examples from SemEval STS pairs (sts_pairs).

    Kept only where the scorer sees the pair as one reference unit and one answer unit (as
    most STS pairs are), so the features are those of the run-time verdict; labels from
    :data:`STS_BANDS`, then the equivalent pairs' name-swapped copies (``sts_swap``,
    missing) after them.
    """
    out: list[dict] = []
    for r in sorted(load(train, "sts_pairs"), key=lambda r: r["id"]):
        label = sts_label(float(r["human_score"]))
        references = split_reference(r["ground_truth"])
        units = split_answer(r["output"])
        if label is None or len(references) != 1 or len(units) != 1:
            continue
        out.append(
            dict(
                group="sts:" + qkey(r["ground_truth"]),
                aliases=aliases_of(references[0]) or [references[0]],
                answer_unit=units[0],
                label=label,
                grade=float(r["human_score"]),
                source="sts",
                reference=r["ground_truth"],
                answer=r["output"],
            )
        )
    rng = random.Random(SEED + 3)
    names = sorted({w for e in out for w in _NAME.findall(e["reference"])} - {""})
    names = [w for w in names if w.lower() not in STOP_NAMES]
    swapped = [_swapped(e, names, rng) for e in out if e["label"] in ("exact", "semantic")]
    return out + [e for e in swapped if e is not None]


CQA_LABELS = {"Good": "yes", "PotentiallyUseful": "unsure", "Bad": "no"}


def cqa_relevancy_examples(train: Path = TRAIN) -> list[dict]:
    """Forum question x comment statement examples (semeval2016_cqa_train).

    The label is the comment's: Good -> yes, PotentiallyUseful -> unsure, Bad -> no. The
    scorer averages its statements' verdicts, so each comment gives one example: one of its
    statements drawn at random (seeded), an unbiased draw of the statements the average runs
    over; the whole comment is the statement's context (``answer_cos``).
    """
    rng = random.Random(SEED + 2)
    out: list[dict] = []
    for r in sorted(load(train, "semeval2016_cqa_train"), key=lambda r: r["id"]):
        units = split_answer(r["output"])
        if not units or r["human_label"] not in CQA_LABELS:
            continue
        out.append(
            dict(
                group="cqa:" + r["meta"]["question_id"],
                question=r["input"],
                statement=units[rng.randrange(len(units))],
                label=CQA_LABELS[r["human_label"]],
                source="cqa",
                answer=r["output"],
            )
        )
    return out


# ------------------------------------------------------------------ fitting


def _softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def _standardise(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    means = X.mean(axis=0)
    scales = X.std(axis=0)
    scales = np.where(scales < 1e-9, 1.0, scales)
    return means, scales


# The fit ends with a gradient norm below GTOL (tests/test_tools.py checks the gradient on
# small problems). Minimisers that compare loss values stall near 1e-8: there a step changes
# the loss (about 1e3) by less than its rounding error. The last digits therefore come from
# solving gradient = 0 with its Jacobian, the Hessian, which needs no loss values.
GTOL = 1e-10
MAX_ITER = 1_000
# The intercepts carry a tiny penalty (as they always have): it keeps the Hessian positive
# definite when a class is separable, without changing any written digit.
INTERCEPT_L2 = 1e-8


def penalised_loss(
    theta: np.ndarray, Z: np.ndarray, y: np.ndarray, weights: np.ndarray, reg: np.ndarray
) -> tuple[float, np.ndarray, np.ndarray]:
    """The objective the verdict models minimise, its gradient and its Hessian.

    ``theta`` holds, flattened, one row ``(weights..., intercept)`` for each class but the
    first, whose logit is fixed at 0 (the reference class); ``Z`` is the standardised
    features with a last column of ones, ``reg`` the penalty of each column. The loss is
    ``sum_i w_i * -log p(y_i | z_i) + 1/2 * sum_k sum_j reg_j * theta_kj^2``.
    """
    n, D = Z.shape
    free = theta.reshape(-1, D)
    m = free.shape[0]
    logits = np.hstack([np.zeros((n, 1)), Z @ free.T])
    log_p = logits - logsumexp(logits, axis=1, keepdims=True)
    penalty = reg * free
    loss = -float(weights @ log_p[np.arange(n), y]) + 0.5 * float((penalty * free).sum())
    P = np.exp(log_p[:, 1:])  # probabilities of the free classes
    Y = y[:, None] == np.arange(1, m + 1)
    gradient = ((P - Y) * weights[:, None]).T @ Z + penalty
    # d2 loss / d theta_a d theta_b = Z' diag(w * p_a * (delta_ab - p_b)) Z (+ reg when a == b)
    curvature = weights[:, None, None] * (P[:, :, None] * np.eye(m) - P[:, :, None] * P[:, None, :])
    hessian = np.einsum("nab,ni,nj->aibj", curvature, Z, Z, optimize=True).reshape(m * D, m * D)
    hessian += np.diag(np.tile(reg, m))
    return loss, gradient.reshape(-1), hessian


def fit(
    X: np.ndarray,
    y: np.ndarray,
    feature_names: list[str],
    classes: list[str],
    l2: float = 1.0,
    sample_weight: np.ndarray | None = None,
) -> dict:
    """A multinomial logistic regression of ``y`` (class indices) on ``X``, as a params dict.

    The first class is the reference: its weights and intercept are 0. The other classes'
    rows minimise :func:`penalised_loss` on standardised features with ``reg = l2`` on the
    weights and :data:`INTERCEPT_L2` on the intercepts: ``scipy.optimize.minimize``
    (``trust-exact``, exact Hessian) from 0, then ``scipy.optimize.root`` (``hybr``) on the
    gradient with the Hessian as its Jacobian, to a gradient norm below :data:`GTOL`.
    """
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.int64)
    n, d = X.shape
    K = len(classes)
    missing = sorted(set(range(K)) - set(y.tolist()))
    if missing:
        raise ValueError(f"fit: no example of class {[classes[i] for i in missing]}")
    w = np.ones(n) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    means, scales = _standardise(X)
    Z = np.hstack([(X - means) / scales, np.ones((n, 1))])  # last column: the intercept
    reg = np.append(np.full(d, float(l2)), INTERCEPT_L2)
    cache: dict[bytes, tuple[float, np.ndarray, np.ndarray]] = {}

    def evaluate(theta: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        key = theta.tobytes()  # minimize asks for loss, gradient and Hessian separately
        if key not in cache:
            cache.clear()
            cache[key] = penalised_loss(theta, Z, y, w, reg)
        return cache[key]

    zeros = np.zeros((K - 1) * (d + 1))
    minimised = minimize(
        lambda theta: evaluate(theta)[0],
        zeros,
        jac=lambda theta: evaluate(theta)[1],
        hess=lambda theta: evaluate(theta)[2],
        method="trust-exact",
        options={"gtol": GTOL, "maxiter": MAX_ITER},
    )
    # Convex: the minimum is the one point where the gradient is 0. MINPACK's hybrid method
    # solves that from the minimiser's point to the rounding error of the gradient.
    result = root(
        lambda theta: evaluate(theta)[1],
        minimised.x,
        jac=lambda theta: evaluate(theta)[2],
        method="hybr",
        options={"xtol": 1e-15},
    )
    gradient_norm = float(np.linalg.norm(evaluate(result.x)[1]))
    if not np.isfinite(gradient_norm) or gradient_norm > GTOL:
        raise RuntimeError(
            f"fit: the solver stopped with gradient norm {gradient_norm:.3g} > {GTOL:g} "
            f"({minimised.message}; {result.message})"
        )
    theta = result.x.reshape(K - 1, d + 1)
    weights = np.vstack([np.zeros((1, d)), theta[:, :d]])
    intercepts = np.concatenate([[0.0], theta[:, d]])
    return {
        "kind": "logistic",
        "classes": list(classes),
        "features": list(feature_names),
        "means": means.tolist(),
        "scales": scales.tolist(),
        "weights": weights.tolist(),
        "intercepts": intercepts.tolist(),
        "l2": l2,
    }


def predict_proba(params: dict, X: np.ndarray) -> np.ndarray:
    X = np.asarray(X, dtype=np.float64)
    Zs = (X - np.asarray(params["means"])) / np.asarray(params["scales"])
    logits = Zs @ np.asarray(params["weights"]).T + np.asarray(params["intercepts"])
    return _softmax(logits)


def fold_of(group: str, folds: int) -> int:
    return int(hashlib.sha1(str(group).encode()).hexdigest(), 16) % folds


def grouped_cv_proba(X, y, groups, feature_names, classes, l2=1.0, folds=5, sample_weight=None):
    """Out-of-fold probabilities; folds assigned by a hash of the group (question)."""
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y)
    fold = np.array([fold_of(g, folds) for g in groups])
    P = np.zeros((len(y), len(classes)))
    for k in range(folds):
        tr, te = fold != k, fold == k
        if not te.any():
            continue
        sw = None if sample_weight is None else np.asarray(sample_weight)[tr]
        p = fit(X[tr], y[tr], feature_names, classes, l2=l2, sample_weight=sw)
        P[te] = predict_proba(p, X[te])
    return P


def _round(obj):
    if isinstance(obj, float):
        return float(f"{obj:.6g}") if np.isfinite(obj) else obj
    if isinstance(obj, list):
        return [_round(v) for v in obj]
    if isinstance(obj, dict):
        return {k: _round(v) for k, v in obj.items()}
    return obj


def dumps_params(params: dict) -> str:
    return json.dumps(_round(params), sort_keys=True, indent=1) + "\n"
