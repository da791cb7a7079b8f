"""Ablation on the judge sample (judge_cache.npz from judge.py): grouped CV by question.

    flock /tmp/heavy.lock /work/main/.venv/bin/python judge_ablation.py
Feature sets: lexical | +MiniLM | +judge logprobs | +probe (OOF probe on the 576-d hidden state)
| judge only | probe only. Writes results/judge_ablation.json.
"""

from __future__ import annotations

import json

import numpy as np

from common import LAB, roc_auc
from evaluate import (REL_LEX, SIM_LEX, SIM_POINTS, UW, Emb, class_weights, rel_matrix, select,
                      sim_matrix)
from examples import REL_CLASSES, SIM_CLASSES, relevancy_examples, similarity_examples
from fit import grouped_cv_proba


def probe_oof(H, y, groups, classes, l2):
    names = [f"h{i}" for i in range(H.shape[1])]
    P = grouped_cv_proba(H, y, groups, names, classes, l2=l2, sample_weight=class_weights(y, len(classes)))
    P = np.clip(P, 1e-6, 1)
    return np.log(P[:, 1:]) - np.log(P[:, :1]), P


def main():
    z = np.load(LAB / "judge_cache.npz")
    emb = Emb()
    out = {}
    # ---------------- relevancy
    rel = relevancy_examples()
    idx = z["rel_idx"]
    ex = [rel[i] for i in idx]
    X, names = rel_matrix([(e["question"], e["statement"]) for e in ex], emb, [e["answer"] for e in ex])
    y = np.array([REL_CLASSES.index(e["label"]) for e in ex])
    g = [e["group"] for e in ex]
    lp = z["rel_lp"]                                   # columns: no, unsure, yes
    yes = (y == 2).astype(float)
    res = {"n": len(y), "counts": np.bincount(y).tolist(),
           "auc_logprob_margin(yes-no)": roc_auc(list(yes), list(lp[:, 2] - lp[:, 0])),
           "auc_logprob_expected": roc_auc(list(yes), list(np.exp(lp[:, 2]) + UW * np.exp(lp[:, 1]))),
           "judge_argmax_share": np.bincount(lp.argmax(1), minlength=3).tolist()}
    feats = {"lp_yes_no": lp[:, 2] - lp[:, 0], "lp_unsure_no": lp[:, 1] - lp[:, 0]}
    for l2 in (10.0, 100.0):
        pr, P = probe_oof(z["rel_h"], y, g, REL_CLASSES, l2)
        res[f"auc_probe_only_l2={l2}"] = roc_auc(list(yes), list(P[:, 2] + UW * P[:, 1]))
        feats[f"probe{l2}"] = pr
    best_l2 = max((10.0, 100.0), key=lambda l: res[f"auc_probe_only_l2={l}"])
    base = {"lexical": select(X, names, REL_LEX), "lexical+minilm": select(X, names, REL_LEX + ["cos"]),
            "lexical+minilm+ctx": select(X, names, REL_LEX + ["cos", "answer_cos"])}
    J = np.stack([feats["lp_yes_no"], feats["lp_unsure_no"]], 1)
    Pr = feats[f"probe{best_l2}"]
    sets = dict(base)
    sets["lexical+minilm+judge_lp"] = np.hstack([base["lexical+minilm"], J])
    sets["lexical+minilm+probe"] = np.hstack([base["lexical+minilm"], Pr])
    sets["lexical+minilm+judge_lp+probe"] = np.hstack([base["lexical+minilm"], J, Pr])
    sets["lexical+minilm+ctx+judge_lp+probe"] = np.hstack([base["lexical+minilm+ctx"], J, Pr])
    sets["judge_lp_only"] = J
    for k, M in sets.items():
        P = grouped_cv_proba(M, y, g, [f"f{i}" for i in range(M.shape[1])], REL_CLASSES, l2=1.0,
                             sample_weight=class_weights(y, 3))
        res[f"cv_auc[{k}]"] = roc_auc(list(yes), list(P[:, 2] + UW * P[:, 1]))
    out["relevancy"] = res
    # ---------------- similarity
    sim = similarity_examples()
    idx = z["sim_idx"]
    ex = [sim[i] for i in idx]
    X, names = sim_matrix([(e["aliases"], e["answer_unit"]) for e in ex], emb)
    y = np.array([SIM_CLASSES.index(e["label"]) for e in ex])
    g = [e["group"] for e in ex]
    lp = z["sim_lp"]                                   # missing, partial, semantic, exact
    keep = y != 1                                      # AUC: match (semantic/exact) vs missing
    pos = (y[keep] >= 2).astype(float)

    def auc(score):
        return roc_auc(list(pos), list(np.asarray(score)[keep]))

    res = {"n": len(y), "counts": np.bincount(y, minlength=4).tolist(),
           "auc_logprob_expected_points": auc(np.exp(lp) @ SIM_POINTS),
           "auc_logprob_margin(sem+exact-missing)": auc(np.logaddexp(lp[:, 2], lp[:, 3]) - lp[:, 0]),
           "judge_argmax_share": np.bincount(lp.argmax(1), minlength=4).tolist()}
    feats = {}
    for l2 in (10.0, 100.0):
        pr, P = probe_oof(z["sim_h"], y, g, SIM_CLASSES, l2)
        res[f"auc_probe_only_l2={l2}"] = auc(P @ SIM_POINTS)
        feats[f"probe{l2}"] = pr
    best_l2 = max((10.0, 100.0), key=lambda l: res[f"auc_probe_only_l2={l}"])
    J = lp[:, 1:] - lp[:, :1]
    Pr = feats[f"probe{best_l2}"]
    base = {"lexical": select(X, names, SIM_LEX), "lexical+minilm": select(X, names, SIM_LEX + ["cos"])}
    sets = dict(base)
    sets["lexical+minilm+judge_lp"] = np.hstack([base["lexical+minilm"], J])
    sets["lexical+minilm+probe"] = np.hstack([base["lexical+minilm"], Pr])
    sets["lexical+minilm+judge_lp+probe"] = np.hstack([base["lexical+minilm"], J, Pr])
    sets["judge_lp_only"] = J
    for k, M in sets.items():
        P = grouped_cv_proba(M, y, g, [f"f{i}" for i in range(M.shape[1])], SIM_CLASSES, l2=1.0,
                             sample_weight=class_weights(y, 4))
        res[f"cv_auc[{k}]"] = auc(P @ SIM_POINTS)
    out["similarity"] = res
    (LAB / "results" / "judge_ablation.json").write_text(json.dumps(out, indent=1))
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
