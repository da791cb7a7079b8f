"""Training examples from /work/shared/train-data (never eval-data).

relevancy_examples() -> list of dict(group, question, statement, label in yes/unsure/no, source)
similarity_examples() -> list of dict(group, aliases, answer_unit, label in
                         exact/semantic/partial/missing, source)
Deterministic (seeded random.Random, sorted inputs).
"""

from __future__ import annotations

import random
import re
from collections import defaultdict

from common import TRAIN, load
from features import _REFUSAL, containment, content_tokens, normalize_tokens, token_f1
from splitter import aliases_of, split_answer

SEED = 20240607
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


def _qa_rows():
    rows = load(TRAIN, "evouna_nq") + load(TRAIN, "nq301_openqa_eval")
    rows.sort(key=lambda r: r["id"])
    return rows


def relevancy_examples(max_qa_questions: int = 1500, per_answer: int = 4) -> list[dict]:
    rng = random.Random(SEED)
    out: list[dict] = []
    # ---- haluquestqa: yes = sentences outside irrelevant spans; unsure = inside
    hq = sorted(load(TRAIN, "haluquestqa_relevance"), key=lambda r: r["id"])
    for r in hq:
        spans = (r["meta"] or {}).get("irrelevant_spans") or []
        sents = split_answer(r["output"])
        good = [s for s in sents if not _overlaps(s, spans)]
        bad = [s for s in sents if _overlaps(s, spans)]
        rng.shuffle(good)
        for s in good[:per_answer]:
            out.append(dict(group=qkey(r["input"]), question=r["input"], statement=s,
                            label="yes", source="hq_clean", answer=r["output"]))
        for s in bad:
            out.append(dict(group=qkey(r["input"]), question=r["input"], statement=s,
                            label="unsure", source="hq_irrelevant_span", answer=r["output"]))
    # ---- QA sets: yes = the unit of a correct answer that carries the reference
    by_q: dict[str, list[dict]] = defaultdict(list)
    for r in _qa_rows():
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
                if _REFUSAL.search(u):
                    refusals.append((q, u, r["output"]))
        correct = [r for r in rows if r["human_score"] == 1.0]
        if not correct:
            continue
        r = correct[rng.randrange(len(correct))]
        units = [u for u in split_answer(r["output"]) if not _REFUSAL.search(u)]
        if not units:
            continue
        s = best_unit(aliases_of(r["ground_truth"], r.get("ground_truths")), units)
        answer_stmt[q] = (s, r["output"])
        out.append(dict(group=q, question=rows[0]["input"], statement=s, label="yes", source="qa_correct",
                        answer=r["output"]))
    # ---- no: refusal / error statements (SPEC: error message -> no)
    rng.shuffle(refusals)
    for q, u, a in refusals[:300]:
        out.append(dict(group=q, question=by_q[q][0]["input"], statement=u, label="no", source="qa_refusal",
                        answer=a))
    # ---- hq statements + QA statements pooled for negatives
    pool = [(qkey(r["input"]), r["input"], s) for r in hq for s in split_answer(r["output"])[:3]]
    stmt_answer = {(qkey(r["input"]), s): r["output"] for r in hq for s in split_answer(r["output"])[:3]}
    pool += [(q, by_q[q][0]["input"], s) for q, (s, _) in sorted(answer_stmt.items())]
    stmt_answer.update({(q, s): a for q, (s, a) in answer_stmt.items()})
    qtexts = sorted({(g, qt) for g, qt, _ in pool})
    # ---- no: statement from an answer to a random unrelated question (low overlap)
    for g, qt in qtexts:
        qt_tokens = set(content_tokens(qt))
        for _ in range(5):
            og, oq, s = pool[rng.randrange(len(pool))]
            if og != g and len(qt_tokens & set(content_tokens(s))) == 0:
                out.append(dict(group=g, question=qt, statement=s, label="no", source="offtopic",
                                answer=stmt_answer[(og, s)]))
                break
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
            if len(inv[t]) > 200:      # skip very common tokens
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
        out.append(dict(group=g, question=qt, statement=s, label="unsure", source="nn_other_question",
                        answer=stmt_answer[(og, s)]))
    return out


def similarity_examples(max_evouna: int = 3000, pair_cap: int = 0) -> list[dict]:
    rng = random.Random(SEED + 1)
    out: list[dict] = []
    ev = sorted(load(TRAIN, "evouna_nq"), key=lambda r: r["id"])
    pos = [r for r in ev if r["human_score"] == 1.0]
    neg = [r for r in ev if r["human_score"] == 0.0]
    rng.shuffle(pos)
    rng.shuffle(neg)
    half = max_evouna // 2
    chosen = sorted(pos[:half] + neg[: max_evouna - half], key=lambda r: r["id"])
    chosen += sorted(load(TRAIN, "nq301_openqa_eval"), key=lambda r: r["id"])
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
        out.append(dict(group="q:" + qkey(r["input"]), aliases=aliases, answer_unit=u, label=label,
                        source=r["id"].split("-")[0]))
    for r in sorted(load(TRAIN, "sas_squad"), key=lambda r: r["id"]):
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
        out.append(dict(group="r:" + qkey(ref), aliases=[ref], answer_unit=ans, label=label, source="sas"))
    # sentence pairs: two correct answers to one question (same fact, other words -> semantic)
    # and a correct vs an incorrect answer to one question (many shared words, other fact ->
    # missing). Guards against trap (2) of DESIGN.md: pairs that share words but differ.
    by_q = defaultdict(list)
    for r in ev:
        by_q[qkey(r["input"])].append(r)
    qs = sorted(by_q)
    rng.shuffle(qs)
    n_sem = n_mis = 0
    for q in qs:
        rows = sorted(by_q[q], key=lambda r: r["id"])
        aliases = aliases_of(rows[0]["ground_truth"], rows[0].get("ground_truths"))
        good = [r for r in rows if r["human_score"] == 1.0]
        bad = [r for r in rows if r["human_score"] == 0.0]
        if not aliases or not good:
            continue
        def unit(r):
            us = [u for u in split_answer(r["output"]) if not _REFUSAL.search(u)]
            return best_unit(aliases, us) if us else None
        ref_u = unit(good[0])
        if not ref_u or len(ref_u.split()) < 4:
            continue
        if len(good) > 1 and n_sem < pair_cap:
            u = unit(good[1])
            if u and normalize_tokens(u) != normalize_tokens(ref_u):
                out.append(dict(group="q:" + q, aliases=[ref_u], answer_unit=u, label="semantic", source="pair"))
                n_sem += 1
        if bad and n_mis < pair_cap:
            u = unit(bad[0])
            if u and len(u.split()) >= 4:
                out.append(dict(group="q:" + q, aliases=[ref_u], answer_unit=u, label="missing", source="pair"))
                n_mis += 1
    return out


if __name__ == "__main__":
    from collections import Counter

    rel = relevancy_examples()
    print("relevancy", len(rel), Counter(e["label"] for e in rel), Counter(e["source"] for e in rel))
    sim = similarity_examples()
    print("similarity", len(sim), Counter(e["label"] for e in sim), Counter(e["source"] for e in sim))
    for e in [x for x in rel if x["source"] == "nn_other_question"][:5]:
        print(e["question"][:80], "||", e["statement"][:100])
