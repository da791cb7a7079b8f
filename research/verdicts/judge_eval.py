"""Does the judge's evidence help on eval-data? Runs the judge on truthfulqa_informativeness
(relevancy) and sts2016_answer_answer (similarity) pairs, and compares, with models fitted on
the SAME 300-example train sample: lexical+MiniLM(+ctx) vs the same + judge logprobs + probe.

    flock /tmp/heavy.lock /work/main/.venv/bin/python judge_eval.py
"""

from __future__ import annotations

import json
import time

import numpy as np

from common import EVAL, LAB, auc_for, load, spearman
from evaluate import (REL_LEX, SIM_LEX, Emb, class_weights, rel_matrix, rel_scores, select,
                      sim_matrix, sim_scores)
from examples import REL_CLASSES, SIM_CLASSES, relevancy_examples, similarity_examples
from fit import fit, grouped_cv_proba, predict_proba
from judge import REL_PREFIX, REL_SYSTEM, SIM_PREFIX, SIM_SYSTEM, Judge
from splitter import reference_groups, split_answer

PROBE_L2 = {"rel": 10.0, "sim": 100.0}


def stack(Xb, lp, probe_logits):
    return np.hstack([Xb, lp[:, 1:] - lp[:, :1], probe_logits])


def probe_logits(P):
    P = np.clip(P, 1e-6, 1)
    return np.log(P[:, 1:]) - np.log(P[:, :1])


def main():
    z = np.load(LAB / "judge_cache.npz")
    emb = Emb()
    j = Judge()
    out = {}
    # ---------------- relevancy on truthfulqa
    rel = relevancy_examples()
    ex = [rel[i] for i in z["rel_idx"]]
    Xtr, names = rel_matrix([(e["question"], e["statement"]) for e in ex], emb, [e["answer"] for e in ex])
    cols = REL_LEX + ["cos", "answer_cos"]
    Xtr = select(Xtr, names, cols)
    y = np.array([REL_CLASSES.index(e["label"]) for e in ex])
    g = [e["group"] for e in ex]
    w = class_weights(y, 3)
    hn = [f"h{i}" for i in range(z["rel_h"].shape[1])]
    oof = probe_logits(grouped_cv_proba(z["rel_h"], y, g, hn, REL_CLASSES, l2=PROBE_L2["rel"], sample_weight=w))
    probe = fit(z["rel_h"], y, hn, REL_CLASSES, l2=PROBE_L2["rel"], sample_weight=w)
    mA = fit(Xtr, y, cols, REL_CLASSES, sample_weight=w)
    XB = stack(Xtr, z["rel_lp"], oof)
    mB = fit(XB, y, [f"f{i}" for i in range(XB.shape[1])], REL_CLASSES, sample_weight=w)
    rows = load(EVAL, "truthfulqa_informativeness")
    stmts = [split_answer(r["output"]) for r in rows]
    pairs = [(r["input"] or "", s) for r, ss in zip(rows, stmts) for s in ss]
    X, names = rel_matrix(pairs, emb, [r["output"] or "" for r, ss in zip(rows, stmts) for s in ss])
    X = select(X, names, cols)
    t0 = time.perf_counter()
    lp, H, _ = j.run(REL_SYSTEM, [f"Question: {q}\nStatement: {s}" for q, s in pairs], REL_PREFIX, REL_CLASSES)
    dt = time.perf_counter() - t0
    PA = predict_proba(mA, X)
    PB = predict_proba(mB, stack(X, lp, probe_logits(predict_proba(probe, H))))
    human = [r["human_score"] for r in rows]
    res = {"pairs": len(pairs), "judge_seconds": dt}
    for tag, P in (("A lex+minilm+ctx (300 sample)", PA), ("B A+judge_lp+probe", PB),
                   ("judge lp only", np.exp(lp))):
        k, hard, exp = 0, [], []
        for ss in stmts:
            h, e = rel_scores(P[k:k + len(ss)])
            k += len(ss)
            hard.append(h)
            exp.append(e)
        res[tag] = {"hard": [spearman(hard, human), auc_for("rel", "x", human, hard)],
                    "expected": [spearman(exp, human), auc_for("rel", "x", human, exp)]}
    out["truthfulqa_informativeness"] = res
    # ---------------- similarity on sts2016
    sim = similarity_examples()
    ex = [sim[i] for i in z["sim_idx"]]
    Xtr, names = sim_matrix([(e["aliases"], e["answer_unit"]) for e in ex], emb)
    cols = SIM_LEX + ["cos"]
    Xtr = select(Xtr, names, cols)
    y = np.array([SIM_CLASSES.index(e["label"]) for e in ex])
    g = [e["group"] for e in ex]
    w = class_weights(y, 4)
    oof = probe_logits(grouped_cv_proba(z["sim_h"], y, g, hn, SIM_CLASSES, l2=PROBE_L2["sim"], sample_weight=w))
    probe = fit(z["sim_h"], y, hn, SIM_CLASSES, l2=PROBE_L2["sim"], sample_weight=w)
    mA = fit(Xtr, y, cols, SIM_CLASSES, sample_weight=w)
    XB = stack(Xtr, z["sim_lp"], oof)
    mB = fit(XB, y, [f"f{i}" for i in range(XB.shape[1])], SIM_CLASSES, sample_weight=w)
    rows = load(EVAL, "sts2016_answer_answer")
    pairs, index = [], []
    for gi, r in enumerate(rows):
        for ri, al in enumerate(reference_groups(r["ground_truth"], r.get("ground_truths"))):
            for u in split_answer(r["output"]):
                pairs.append((al, u))
                index.append((gi, ri))
    X, names = sim_matrix(pairs, emb)
    X = select(X, names, cols)
    t0 = time.perf_counter()
    lp, H, _ = j.run(SIM_SYSTEM, [f"Reference: {' / '.join(a)}\nAnswer: {u}" for a, u in pairs], SIM_PREFIX,
                     SIM_CLASSES)
    dt = time.perf_counter() - t0
    PA = predict_proba(mA, X)
    PB = predict_proba(mB, stack(X, lp, probe_logits(predict_proba(probe, H))))
    human = [r["human_score"] for r in rows]
    res = {"pairs": len(pairs), "judge_seconds": dt}
    for tag, P in (("A lex+minilm (300 sample)", PA), ("B A+judge_lp+probe", PB), ("judge lp only", np.exp(lp))):
        per = [dict() for _ in rows]
        for (gi, ri), p in zip(index, P):
            per[gi].setdefault(ri, []).append(p)
        hard, exp = [], []
        for d in per:
            h, e = sim_scores([np.array(d[k]) for k in sorted(d)])
            hard.append(h)
            exp.append(e)
        res[tag] = {"hard": [spearman(hard, human), auc_for("sim", "sts2016_answer_answer", human, hard)],
                    "expected": [spearman(exp, human), auc_for("sim", "sts2016_answer_answer", human, exp)]}
    out["sts2016_answer_answer"] = res
    (LAB / "results" / "judge_eval.json").write_text(json.dumps(out, indent=1))
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
