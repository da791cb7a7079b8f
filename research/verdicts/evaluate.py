"""Train the verdict models on train-data and evaluate the scorer end to end on eval-data.

    flock /tmp/heavy.lock /work/main/.venv/bin/python evaluate.py [--judge judge_cache.npz]

Steps: build examples (examples.py) -> features (features.py + MiniLM cosine from embed.py,
cached in emb_cache.npz) -> grouped CV ablation (fit.py) -> final fits written to params/*.json
-> eval-data: split answers/references (splitter.py), per-statement / per-unit verdict
probabilities, SPEC score with hard labels and the expected version, Spearman + AUC vs human
labels next to the baselines. Results: results/eval.json and results/eval.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from common import (EVAL, LAB, REL_SETS, SIM_SETS, auc_for, load, rel_baselines, roc_auc,
                    sim_baselines, spearman)
from examples import REL_CLASSES, SIM_CLASSES, relevancy_examples, similarity_examples
from features import relevancy_features, similarity_features_aliases
from fit import dumps_params, fit, grouped_cv_proba, predict_proba, write_params
from splitter import reference_groups, split_answer

UW = 0.3                                        # uncertainty_weight
SIM_POINTS = np.array([-0.15, 0.4, 0.8, 1.2])   # missing, partial, semantic, exact (defaults)
SIM_NORM = 1.2

PARAMS = LAB / "params"
RESULTS = LAB / "results"


def log(*a):
    print(*a, file=sys.stderr, flush=True)


class Emb:
    def __init__(self):
        from embed import CachedEmbedder
        self.e = CachedEmbedder(LAB / "emb_cache.npz")

    def prefetch(self, texts):
        self.e.encode(sorted(set(texts)))
        self.e.save()

    def vec(self, texts):
        return self.e.encode(list(texts))

    def cos(self, a, b):
        va, vb = self.vec(a), self.vec(b)
        return (va * vb).sum(1)


# ------------------------------------------------------------------ featurisation

def rel_matrix(pairs, emb, answers=None):
    """pairs: list of (question, statement); answers: the full answer each statement came from
    (adds feature answer_cos = cos(question, full answer), the statement's context)."""
    cos = emb.cos([q or "" for q, _ in pairs], [s for _, s in pairs]) if pairs else []
    dicts = [relevancy_features(q or "", s, float(c)) for (q, s), c in zip(pairs, cos)]
    if answers is not None and pairs:
        acos = emb.cos([q or "" for q, _ in pairs], [a or "" for a in answers])
        for d, c in zip(dicts, acos):
            d["answer_cos"] = float(c)
    names = list(dicts[0]) if dicts else []
    return np.array([[d[n] for n in names] for d in dicts]), names


def sim_matrix(pairs, emb):
    """pairs: list of (aliases, answer_unit)."""
    flat_a, flat_u, spans = [], [], []
    for aliases, u in pairs:
        spans.append((len(flat_a), len(aliases)))
        flat_a += aliases
        flat_u += [u] * len(aliases)
    cos = emb.cos(flat_a, flat_u) if flat_a else []
    dicts = [similarity_features_aliases(al, u, [float(c) for c in cos[s:s + n]])
             for (al, u), (s, n) in zip(pairs, spans)]
    names = list(dicts[0]) if dicts else []
    return np.array([[d[n] for n in names] for d in dicts]), names


def select(X, names, keep):
    idx = [names.index(k) for k in keep]
    return X[:, idx]


def class_weights(y, K):
    counts = np.bincount(y, minlength=K).astype(float)
    w = len(y) / (K * np.maximum(counts, 1))
    return w[y]


# ------------------------------------------------------------------ scoring (SPEC formulas)

def rel_scores(P):
    """P: (n_statements, 3) over [no, unsure, yes] -> (hard, expected)."""
    if len(P) == 0:
        return 0.0, 0.0
    hard_lab = P.argmax(1)
    hard = np.mean(np.where(hard_lab == 2, 1.0, np.where(hard_lab == 1, UW, 0.0)))
    exp = np.mean(P[:, 2] + UW * P[:, 1])
    return round(float(hard), 2), float(exp)


def sim_scores(P_units):
    """P_units: list over reference units of (n_answer_units, 4) probabilities."""
    if not P_units:
        return 0.0, 0.0
    hard_pts, exp_pts = 0.0, 0.0
    for P in P_units:
        e = P @ SIM_POINTS
        j = int(np.argmax(e))               # best answer unit: max expected points
        exp_pts += e[j]
        hard_pts += SIM_POINTS[int(np.argmax(P[j]))]
    n = len(P_units)
    hard = min(max(hard_pts / (n * SIM_NORM), 0.0), 1.0)
    exp = min(max(exp_pts / (n * SIM_NORM), 0.0), 1.0)
    return round(hard, 2), float(exp)


# ------------------------------------------------------------------ training

def rel_cv_report(y, P, groups_src):
    yes = (y == 2).astype(float)
    score = P[:, 2] + UW * P[:, 1]
    out = {"auc_yes_vs_rest": roc_auc(list(yes), list(score))}
    for src in ("nn_other_question", "hq_irrelevant_span", "offtopic"):
        m = np.array([s == src for s in groups_src]) | (y == 2)
        out[f"auc_yes_vs_{src}"] = roc_auc(list(yes[m]), list(score[m]))
    out["acc"] = float((P.argmax(1) == y).mean())
    return out


def sim_cv_report(y, P, srcs):
    e = P @ SIM_POINTS
    out = {"acc": float((P.argmax(1) == y).mean())}
    for src in ("evouna", "nq301", "sas", "pair"):
        m = np.array([s == src for s in srcs])
        pos = (y[m] >= 2).astype(float) if src != "sas" else (y[m] >= 1).astype(float)
        out[f"auc_{src}"] = roc_auc(list(pos), list(e[m]))
    return out


REL_LEX = ["tok_f1", "cont_ba", "len_ratio", "num_miss_ab", "num_miss_ba", "neg_mismatch", "q_cov",
           "novel", "restates_q", "type_match", "refusal", "stmt_len", "has_num"]
SIM_LEX = ["tok_f1", "cont_ab", "cont_ba", "len_ratio", "num_miss_ab", "num_miss_ba", "neg_mismatch",
           "exact", "ref_len"]


def train(emb, l2=1.0, extra_rel=None, extra_sim=None):
    t0 = time.perf_counter()
    rel = relevancy_examples()
    sim = similarity_examples()
    emb.prefetch([e["question"] for e in rel] + [e["statement"] for e in rel]
                 + [a for e in sim for a in e["aliases"]] + [e["answer_unit"] for e in sim])
    emb.prefetch([e["answer"] for e in rel])
    Xr, rn = rel_matrix([(e["question"], e["statement"]) for e in rel], emb, [e["answer"] for e in rel])
    yr = np.array([REL_CLASSES.index(e["label"]) for e in rel])
    gr = [e["group"] for e in rel]
    Xs, sn = sim_matrix([(e["aliases"], e["answer_unit"]) for e in sim], emb)
    ys = np.array([SIM_CLASSES.index(e["label"]) for e in sim])
    gs = [e["group"] for e in sim]
    log(f"features built in {time.perf_counter() - t0:.1f}s")
    report = {"counts": {
        "relevancy": {c: int((yr == i).sum()) for i, c in enumerate(REL_CLASSES)},
        "relevancy_sources": {s: sum(e["source"] == s for e in rel) for s in sorted({e["source"] for e in rel})},
        "similarity": {c: int((ys == i).sum()) for i, c in enumerate(SIM_CLASSES)},
        "similarity_sources": {s: sum(e["source"] == s for e in sim) for s in sorted({e["source"] for e in sim})},
    }, "cv": {}}
    models = {}
    for tag, cols in (("lexical", REL_LEX), ("lexical+minilm", REL_LEX + ["cos"]), ("minilm_only", ["cos"]),
                      ("lexical+minilm+ctx", REL_LEX + ["cos", "answer_cos"])):
        X = select(Xr, rn, cols)
        P = grouped_cv_proba(X, yr, gr, cols, REL_CLASSES, l2=l2, sample_weight=class_weights(yr, 3))
        report["cv"][f"relevancy/{tag}"] = rel_cv_report(yr, P, [e["source"] for e in rel])
        models[f"relevancy_{tag}"] = fit(X, yr, cols, REL_CLASSES, l2=l2, sample_weight=class_weights(yr, 3))
    for tag, cols in (("lexical", SIM_LEX), ("lexical+minilm", SIM_LEX + ["cos"]), ("minilm_only", ["cos"])):
        X = select(Xs, sn, cols)
        P = grouped_cv_proba(X, ys, gs, cols, SIM_CLASSES, l2=l2, sample_weight=class_weights(ys, 4))
        report["cv"][f"similarity/{tag}"] = sim_cv_report(ys, P, [e["source"] for e in sim])
        models[f"similarity_{tag}"] = fit(X, ys, cols, SIM_CLASSES, l2=l2, sample_weight=class_weights(ys, 4))
    PARAMS.mkdir(exist_ok=True)
    for k, p in models.items():
        write_params(p, PARAMS / f"{k}.json")
    # determinism check: refit -> byte-identical JSON
    again = fit(select(Xs, sn, SIM_LEX + ["cos"]), ys, SIM_LEX + ["cos"], SIM_CLASSES, l2=l2,
                sample_weight=class_weights(ys, 4))
    report["deterministic_json"] = dumps_params(again) == (PARAMS / "similarity_lexical+minilm.json").read_text()
    return models, report


# ------------------------------------------------------------------ evaluation

def eval_relevancy(name, models, emb):
    rows = load(EVAL, name)
    stmts = [split_answer(r["output"]) for r in rows]
    emb.prefetch([r["input"] or "" for r in rows] + [s for ss in stmts for s in ss]
                 + [r["output"] or "" for r in rows])
    pairs = [(r["input"] or "", s) for r, ss in zip(rows, stmts) for s in ss]
    X, names = rel_matrix(pairs, emb, [r["output"] or "" for r, ss in zip(rows, stmts) for s in ss])
    human = [r["human_score"] for r in rows]
    methods = {}
    for b in rel_baselines(rows[0]):
        methods[b] = [rel_baselines(r)[b] for r in rows]
    methods["MiniLM cos(q, answer)"] = list(emb.cos([r["input"] or "" for r in rows],
                                                   [r["output"] or "" for r in rows]))
    for tag in ("lexical", "lexical+minilm", "lexical+minilm+ctx"):
        p = models[f"relevancy_{tag}"]
        P = predict_proba(p, select(X, names, p["features"])) if len(X) else np.zeros((0, 3))
        hard, exp, k = [], [], 0
        for ss in stmts:
            h, e = rel_scores(P[k:k + len(ss)])
            k += len(ss)
            hard.append(h)
            exp.append(e)
        methods[f"verdict[{tag}] hard"] = hard
        methods[f"verdict[{tag}] expected"] = exp
    return {m: {"spearman": spearman(v, human), "auc": auc_for("rel", name, human, v)}
            for m, v in methods.items()}, len(rows), len(pairs)


def eval_similarity(name, models, emb):
    rows = load(EVAL, name)
    groups = [reference_groups(r["ground_truth"], r.get("ground_truths")) for r in rows]
    units = [split_answer(r["output"]) for r in rows]
    emb.prefetch([a for g in groups for u in g for a in u] + [u for us in units for u in us]
                 + [r["output"] or "" for r in rows] + [r["ground_truth"] or "" for r in rows])
    pairs, index = [], []
    for gi, (g, us) in enumerate(zip(groups, units)):
        for ri, aliases in enumerate(g):
            for u in us:
                pairs.append((aliases, u))
                index.append((gi, ri))
    X, names = sim_matrix(pairs, emb)
    human = [r["human_score"] for r in rows]
    methods = {}
    for b in sim_baselines(rows[0]):
        methods[b] = [sim_baselines(r)[b] for r in rows]
    methods["MiniLM cos(ref, answer)"] = list(emb.cos([r["ground_truth"] or "" for r in rows],
                                                     [r["output"] or "" for r in rows]))
    for tag in ("lexical", "lexical+minilm"):
        p = models[f"similarity_{tag}"]
        P = predict_proba(p, select(X, names, p["features"]))
        per_row: list[dict[int, list]] = [dict() for _ in rows]
        for (gi, ri), pr in zip(index, P):
            per_row[gi].setdefault(ri, []).append(pr)
        hard, exp = [], []
        for d in per_row:
            h, e = sim_scores([np.array(d[k]) for k in sorted(d)])
            hard.append(h)
            exp.append(e)
        methods[f"verdict[{tag}] hard"] = hard
        methods[f"verdict[{tag}] expected"] = exp
    return {m: {"spearman": spearman(v, human), "auc": auc_for("sim", name, human, v)}
            for m, v in methods.items()}, len(rows), len(pairs)


def fmt(x):
    return "n/a" if x is None else f"{x:.3f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--l2", type=float, default=1.0)
    args = ap.parse_args()
    RESULTS.mkdir(exist_ok=True)
    emb = Emb()
    t0 = time.perf_counter()
    models, report = train(emb, l2=args.l2)
    report["train_seconds"] = time.perf_counter() - t0
    log(json.dumps(report["cv"], indent=1))
    report["eval"] = {}
    lines = ["| scorer | dataset | rows | pairs | method | Spearman | AUC |", "|---|---|---:|---:|---|---:|---:|"]
    for kind, sets, fn in (("similarity", SIM_SETS, eval_similarity), ("relevancy", REL_SETS, eval_relevancy)):
        for name in sets:
            t1 = time.perf_counter()
            res, n, npairs = fn(name, models, emb)
            report["eval"][f"{kind}/{name}"] = {"rows": n, "pairs": npairs, "seconds": time.perf_counter() - t1,
                                                "methods": res}
            for m, v in res.items():
                lines.append(f"| {kind} | {name} | {n} | {npairs} | {m} | {fmt(v['spearman'])} | {fmt(v['auc'])} |")
            log(f"{kind}/{name} done in {time.perf_counter() - t1:.1f}s")
    emb.e.save()
    (RESULTS / "eval.json").write_text(json.dumps(report, indent=1, sort_keys=True))
    (RESULTS / "eval.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
