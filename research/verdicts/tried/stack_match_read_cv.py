"""Tried, not shipped (2026-12-06): stack the 1.5B card's match read on the embedded
card's short-answer similarity model, in a grouped 5-fold CV on train-data.

    .venv/bin/python research/verdicts/tried/stack_match_read_cv.py [CARD]

Per fold, the base (a logistic model of the shipped similarity features) is fitted on the
embedded card's whole pool (folds by reference group, the same hash as the tools); the
stacked models are logistic models of the base's log-probabilities and the stored match
read (tools/reads/<card>.jsonl), with or without the evidence, fitted on the examples that
have reads. Prints ROC AUC (exact or semantic against the rest) overall and per source,
next to the shipped "evidence + match read" model. Figures: benchmarks/RESULTS.md.
"""
import sys, numpy as np
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from sklearn.metrics import roc_auc_score
from offline_scorer.toolkit import shared_embedder
from tools import fit_card_verdicts as F
from tools import fit_verdicts as V
from tools.verdict_training import fit, predict_proba, fold_of, SIM_CLASSES, TRAIN, similarity_examples
from tools.read_training import example_id

card = sys.argv[1] if len(sys.argv) > 1 else "qwen2.5-coder-1.5b-instruct"
data = F.matrices(card, TRAIN)
X, y, names, groups, ex = data["similarity"]
print("read examples", len(y), {s: sum(e["source"] == s for e in ex) for s in sorted({e["source"] for e in ex})})
emb = shared_embedder(F.EMBEDDER)
full = [{**e, "id": example_id("similarity", e)} for e in similarity_examples(TRAIN)]
full = [e for e in full if V.SOURCE_WEIGHTS.get(e["source"], 1.0) > 0]
Xf, yf = V.similarity_matrix(emb, full)
wf = V.balanced_weights(yf, 4) * V.source_weights(full, V.SOURCE_WEIGHTS)
gf = np.array([e["group"] for e in full])
print("full pool", len(yf))
feat = V.SIM_FEATURES
Xb = V.columns(Xf, V.SIM_FEATURES_ALL, feat)
Xr_ev = F.columns(X, names, feat)
w = V.balanced_weights(y, 4) * V.source_weights(ex, F.SOURCE_WEIGHTS)
fold = np.array([fold_of(g, 5) for g in groups])
foldf = np.array([fold_of(g, 5) for g in gf])
pos = np.isin(y, (2, 3))
src = np.array([e["source"] for e in ex])
def score(P): return P @ np.array([0.0, 0.4, 0.8, 1.2])
def report(tag, P):
    s = score(P)
    cells = [f"all {roc_auc_score(pos, s):.4f}"]
    for so in sorted(set(src)):
        m = src == so
        if pos[m].all() or not pos[m].any(): continue
        cells.append(f"{so} {roc_auc_score(pos[m], s[m]):.4f}")
    print(f"{tag:55s}", " ".join(cells))
match = F.columns(X, names, F.SIM_MATCH)
variants = {}
Pbase = np.zeros((len(y), 4)); Pship = np.zeros((len(y), 4))
stk = {k: np.zeros((len(y), 4)) for k in ["base+match", "base+match+evidence", "base(exp logit)+match"]}
for k in range(5):
    trf = foldf != k
    pb = fit(Xb[trf], yf[trf], feat, SIM_CLASSES, l2=V.L2, sample_weight=wf[trf])
    B = predict_proba(pb, Xr_ev)  # base probs on read examples (in-sample for train folds of read set)
    logB = np.log(np.clip(B, 1e-4, 1))
    tr, te = fold != k, fold == k
    Pbase[te] = B[te]
    ps = fit(np.hstack([Xr_ev, match])[tr], y[tr], feat + F.SIM_MATCH, SIM_CLASSES, l2=F.L2, sample_weight=w[tr])
    Pship[te] = predict_proba(ps, np.hstack([Xr_ev, match])[te])
    sets = {
        "base+match": np.hstack([logB, match]),
        "base+match+evidence": np.hstack([logB, match, Xr_ev]),
        "base(exp logit)+match": np.hstack([score(B)[:, None], match]),
    }
    for name, Z in sets.items():
        fn = [f"z{i}" for i in range(Z.shape[1])]
        p = fit(Z[tr], y[tr], fn, SIM_CLASSES, l2=F.L2, sample_weight=w[tr])
        stk[name][te] = predict_proba(p, Z[te])
report("embedded short-answer model (full pool, out of fold)", Pbase)
report("shipped: evidence + match read (read examples only)", Pship)
for n, P in stk.items(): report("stacked: " + n, P)
