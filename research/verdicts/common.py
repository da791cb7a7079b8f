"""Data loading, metrics and baselines (metrics/baselines copied from
/work/main/benchmarks/agreement.py so this lab does not import a tree under reorganisation)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from features import STOP_WORDS as _UNUSED  # noqa: F401  (features is the pure module)
from features import normalize_tokens, token_f1

TRAIN = Path("/work/shared/train-data")
EVAL = Path("/work/shared/eval-data")
LAB = Path(__file__).resolve().parent

# agreement.py's stop list for the question-overlap baseline (verbatim)
_AGREE_STOP = frozenset(
    (
        "a an the of to in on at for by with from and or is are was were be been am do does "
        "did what who whom whose which when where why how can could should would will shall may "
        "might must i you he she it we they me my your his her its our their this that these "
        "those there here as if then than so not no yes about into over under any some"
    ).split()
)

SIM_SETS = ["evouna_nq", "nq301_openqa_eval", "sas_squad", "sts2016_answer_answer", "medquad_liveqa_judged"]
REL_SETS = ["truthfulqa_informativeness", "haluquestqa_relevance", "medquad_liveqa_judged"]

# agreement.py reports AUC only for binary labels (n/a for graded). For graded sets we ALSO
# report an AUC at these thresholds (our choice, stated in the report): positive = score >= t.
GRADED_AUC_THRESHOLD = {
    ("sim", "sas_squad"): 1.0,               # somewhat similar or same meaning
    ("sim", "sts2016_answer_answer"): 3.0,   # roughly equivalent or better
    ("sim", "medquad_liveqa_judged"): 3.0,   # incomplete/excellent vs incorrect/related
    ("rel", "medquad_liveqa_judged"): 2.0,   # related or better vs incorrect (README: 2 = related)
}


def load(root: Path, name: str) -> list[dict]:
    with (root / name / "data.jsonl").open(encoding="utf-8") as f:
        return [json.loads(l) for l in f if l.strip()]


def exact_match(answer: str, reference: str) -> float:
    return float(normalize_tokens(answer) == normalize_tokens(reference))


def question_overlap(question: str, answer: str) -> float:
    asked = {t for t in normalize_tokens(question) if t not in _AGREE_STOP}
    if not asked:
        return 0.0
    return len(asked & set(normalize_tokens(answer))) / len(asked)


def average_ranks(values):
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for p in range(start, end + 1):
            ranks[order[p]] = (start + end) / 2 + 1
        start = end + 1
    return ranks


def pearson(xs, ys):
    if len(xs) < 2:
        return None
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    dx = [x - mx for x in xs]
    dy = [y - my for y in ys]
    vx, vy = sum(d * d for d in dx), sum(d * d for d in dy)
    if vx == 0 or vy == 0:
        return None
    return sum(a * b for a, b in zip(dx, dy)) / math.sqrt(vx * vy)


def spearman(xs, ys):
    return pearson(average_ranks(list(xs)), average_ranks(list(ys)))


def roc_auc(labels, scores):
    """Mann-Whitney AUC via ranks (ties one half); labels binary (higher = positive)."""
    levels = sorted(set(labels))
    if len(levels) != 2:
        return None
    ranks = average_ranks(list(scores))
    pos = [r for r, l in zip(ranks, labels) if l == levels[1]]
    n_pos, n_neg = len(pos), len(labels) - len(pos)
    return (sum(pos) - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


def auc_for(kind: str, dataset: str, human, scores):
    if len(set(human)) == 2:
        return roc_auc(human, scores)
    t = GRADED_AUC_THRESHOLD.get((kind, dataset))
    if t is None:
        return None
    return roc_auc([1.0 if h >= t else 0.0 for h in human], scores)


def sim_baselines(row) -> dict[str, float]:
    ref = row["ground_truth"] or ""
    return {
        "token F1": token_f1(row["output"] or "", ref),
        "exact match": exact_match(row["output"] or "", ref),
    }


def rel_baselines(row) -> dict[str, float]:
    return {"question overlap": question_overlap(row["input"] or "", row["output"] or "")}
