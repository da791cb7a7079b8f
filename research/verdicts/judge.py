"""The embedded judge's own evidence: label log-probabilities from ONE forward pass, plus the
last-layer hidden state at the answer position (for a linear probe).

    flock /tmp/heavy.lock /work/main/.venv/bin/python judge.py --n 300
writes judge_cache.npz (per kind: texts, label logprobs renormalised, hidden states) and
results/judge.json (timings, AUCs, grouped-CV ablation on the sample).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time

import numpy as np

from common import LAB, roc_auc
from examples import REL_CLASSES, SIM_CLASSES, relevancy_examples, similarity_examples

REL_SYSTEM = ("You judge whether a statement answers a question. Say yes if it directly answers "
              "the question, unsure if it is on the topic but does not answer it, no if it is unrelated.")
SIM_SYSTEM = ("You compare a reference fact with a fact from an answer. Say exact if they state the same "
              "thing, semantic if they mean the same in other words, partial if the answer has only part "
              "of it, missing if the answer does not contain it.")
REL_PREFIX = '{"result":"'
SIM_PREFIX = '{"match_type":"'


def log(*a):
    print(*a, file=sys.stderr, flush=True)


class Judge:
    def __init__(self, threads=2):
        import torch
        torch.set_num_threads(threads)
        from offline_scorer import load_model
        t0 = time.perf_counter()
        self.m = load_model("smollm2-135m-instruct", threads=threads)
        self.load_seconds = time.perf_counter() - t0
        self.torch = torch
        self.tok = self.m.tokenizer
        self.model = self.m.model.eval()
        self.tok.padding_side = "left"
        if self.tok.pad_token_id is None:
            self.tok.pad_token = self.tok.eos_token

    def first_ids(self, prefix, labels):
        """First token id of each label when it follows the prefix; must be distinct."""
        base = self.tok(prefix, add_special_tokens=False)["input_ids"]
        ids = []
        for lab in labels:
            full = self.tok(prefix + lab, add_special_tokens=False)["input_ids"]
            assert full[: len(base)] == base, (prefix, lab)
            ids.append(full[len(base)])
        assert len(set(ids)) == len(ids), f"label first tokens collide: {ids}"
        return ids

    def prompts(self, system, users, prefix):
        out = []
        for u in users:
            msgs = [{"role": "system", "content": system}, {"role": "user", "content": u}]
            out.append(self.tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False) + prefix)
        return out

    def run(self, system, users, prefix, labels, batch_size=16):
        torch = self.torch
        ids = self.first_ids(prefix, labels)
        texts = self.prompts(system, users, prefix)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        lp = np.zeros((len(texts), len(labels)), np.float32)
        hid = np.zeros((len(texts), self.model.config.hidden_size), np.float32)
        with torch.inference_mode():
            for s in range(0, len(order), batch_size):
                idx = order[s:s + batch_size]
                enc = self.tok([texts[i] for i in idx], return_tensors="pt", padding=True,
                               add_special_tokens=False)
                mask = enc["attention_mask"]
                pos = (mask.cumsum(-1) - 1).clamp(min=0)
                out = self.model(input_ids=enc["input_ids"], attention_mask=mask, position_ids=pos,
                                 output_hidden_states=True)
                logits = out.logits[:, -1, :].float()
                allp = torch.log_softmax(logits, -1)[:, ids]
                lp[idx] = torch.log_softmax(allp, -1).numpy()   # renormalised over the labels
                hid[idx] = out.hidden_states[-1][:, -1, :].float().numpy()
        return lp, hid, ids


def sample(examples, classes, n, seed):
    rng = random.Random(seed)
    by = {c: [i for i, e in enumerate(examples) if e["label"] == c] for c in classes}
    per = n // len(classes)
    pick = []
    for c in classes:
        L = by[c][:]
        rng.shuffle(L)
        pick += L[:per]
    return sorted(pick)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=300)
    args = ap.parse_args()
    rel = relevancy_examples()
    sim = similarity_examples()
    ri = sample(rel, REL_CLASSES, args.n, 1)
    si = sample(sim, SIM_CLASSES, args.n, 2)
    j = Judge()
    log(f"judge load {j.load_seconds:.1f}s")
    report = {"load_seconds": j.load_seconds}
    users = [f"Question: {rel[i]['question']}\nStatement: {rel[i]['statement']}" for i in ri]
    j.run(REL_SYSTEM, users[:4], REL_PREFIX, REL_CLASSES)        # warm-up
    t0 = time.perf_counter()
    rlp, rh, rids = j.run(REL_SYSTEM, users, REL_PREFIX, REL_CLASSES)
    report["relevancy"] = {"pairs": len(ri), "seconds": time.perf_counter() - t0, "label_token_ids": rids,
                           "label_tokens": [j.tok.decode([t]) for t in rids]}
    users = [f"Reference: {' / '.join(sim[i]['aliases'])}\nAnswer: {sim[i]['answer_unit']}" for i in si]
    t0 = time.perf_counter()
    slp, sh, sids = j.run(SIM_SYSTEM, users, SIM_PREFIX, SIM_CLASSES)
    report["similarity"] = {"pairs": len(si), "seconds": time.perf_counter() - t0, "label_token_ids": sids,
                            "label_tokens": [j.tok.decode([t]) for t in sids]}
    for k in ("relevancy", "similarity"):
        report[k]["pairs_per_s"] = report[k]["pairs"] / report[k]["seconds"]
    np.savez(LAB / "judge_cache.npz", rel_idx=np.array(ri), rel_lp=rlp, rel_h=rh,
             sim_idx=np.array(si), sim_lp=slp, sim_h=sh)
    (LAB / "results").mkdir(exist_ok=True)
    (LAB / "results" / "judge_run.json").write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
