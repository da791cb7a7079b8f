"""Tried, not shipped (2026-12-06): within-answer cosine features for the relevancy model,
in the item-level grouped CV of tools/fit_verdicts.py (forum_cross_validation).

    .venv/bin/python research/verdicts/tried/within_answer_cosine_cv.py

cos_dev = cos(question, statement) minus the mean over the answer's statements;
cos_gap = cos(question, statement) minus their maximum. The run-time evidence and the
feature lists of tools/fit_verdicts.py are patched in this process only. Prints, per
feature set, the forum comments' Spearman and the haluquestqa answers' ROC AUC, ungated
and behind the shipped 3-word forum gate. Figures: benchmarks/RESULTS.md.
"""
import sys, json, numpy as np
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
import tools.fit_verdicts as V
from tools.verdict_training import TRAIN, cqa_relevancy_examples, split_answer
from offline_scorer.toolkit import shared_embedder
emb = shared_embedder(V.EMBEDDER)
EXTRA = ["cos_dev", "cos_gap"]
_cache = {}
def sib(question, answer):
    key = (question, answer)
    if key not in _cache:
        units = split_answer(answer or "") or [answer or ""]
        _cache[key] = [emb.cosine(question or "", u) for u in units]
    return _cache[key]
orig_ev = V.relevancy_evidence
def evidence(embedder, question, statements, answer):
    rows = orig_ev(embedder, question, statements, answer)
    cs = sib(question, answer)
    m, mx = float(np.mean(cs)), float(np.max(cs))
    for r in rows:
        r["cos_dev"] = r["cos"] - m
        r["cos_gap"] = r["cos"] - mx
    return rows
V.relevancy_evidence = evidence
V.REL_FEATURES_ALL.extend(EXTRA)
train = TRAIN
rel, sim = V.training_examples(train)
forum = V.forum_examples(train)
Xr, yr, forum_pool = V.relevancy_pools(emb, rel, forum)
shorter = [e for e in cqa_relevancy_examples(train) if len(e["answer"].split()) < V.FORUM_WORDS]
Xe, ye = V.relevancy_matrix(emb, shorter)
Xa, ya = np.vstack([forum_pool[0], Xe]), np.concatenate([forum_pool[1], ye])
every = forum + shorter
items = V.forum_items(emb, train)
print("features done", file=sys.stderr, flush=True)
base_F, base_R = list(V.FORUM_FEATURES), list(V.REL_FEATURES)
for tag, rf, ff in [
    ("shipped", base_R, base_F),
    ("+cos_dev forum", base_R, base_F + ["cos_dev"]),
    ("+cos_gap forum", base_R, base_F + ["cos_gap"]),
    ("+both forum", base_R, base_F + EXTRA),
    ("+cos_dev both", base_R + ["cos_dev"], base_F + ["cos_dev"]),
]:
    V.REL_FEATURES[:] = rf
    V.FORUM_FEATURES[:] = ff
    rep = V.forum_cross_validation(Xa, ya, every, items)
    keep = {k: v for k, v in rep.items() if k.startswith("ungated") or "gate 3 words, + answer_len" in k}
    print(tag, json.dumps(keep), flush=True)
    V.REL_FEATURES[:] = base_R; V.FORUM_FEATURES[:] = base_F
