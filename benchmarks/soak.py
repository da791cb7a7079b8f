"""Soak: score real rows of every dev set with both scorers and count what fails, and how.

Every row of every dataset in ``../shared/eval-data/`` (or ``--limit N`` per set, sampled
like ``agreement.py``) is scored by each scorer the row can serve: answer similarity where
the row has a reference (all of its references when it lists several, as ``ground_truths``),
answer relevancy where it has a question. Reasons are written (a failed reason is a lost
run). The target is zero failed runs on every set; the table prints failures by step and
kind, and the result file keeps every failed row's error.

Run it with the shipped defaults and with the reference's procedure, where the judge writes
statements, units and verdicts in constrained JSON (the path where constraint and budget
failures live):

    .venv/bin/python -m benchmarks.soak --limit 100
    .venv/bin/python -m benchmarks.soak --limit 20 --verdicts generate --extraction model

Writes ``benchmarks/results/soak[-<mode>].{json,md}`` (row ids, statuses and errors only).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from benchmarks.agreement import REPO, SEED, load_rows, resolve_data, sample_rows
from benchmarks.agreement import error_kind as error_class
from offline_scorer import (
    TransformersJudge,
    create_answer_relevancy_scorer,
    create_answer_similarity_scorer,
)

SIMILARITY = "answer-similarity"
RELEVANCY = "answer-relevancy"
DATASETS = (
    "evouna_nq",
    "nq301_openqa_eval",
    "sas_squad",
    "sts2016_answer_answer",
    "medquad_liveqa_judged",
    "truthfulqa_informativeness",
    "haluquestqa_relevance",
)

# What a failed run's error says, most specific first.
_KINDS = (
    ("budget", re.compile(r"did not close|token budget")),
    ("schema cannot be compiled", re.compile(r"cannot be enforced|incompatible with the regex")),
    ("constraint failed mid-generation", re.compile(r"constraint of prompt \d+ failed")),
    ("context window", re.compile(r"context window")),
    ("invalid JSON for the schema", re.compile(r"does not match schema")),
    ("missing reference", re.compile(r"requires a ground truth")),
)


def error_kind(error: str | None) -> str:
    """A short name for what went wrong, from a failed run's error text."""
    text = error or ""
    for kind, pattern in _KINDS:
        if pattern.search(text):
            return kind
    return error_class(text)


@dataclass
class Block:
    """One dataset scored by one scorer."""

    dataset: str
    scorer: str
    rows: int = 0
    scored: int = 0
    not_scorable: int = 0
    failed: int = 0
    crashed_batches: int = 0
    seconds: float = 0.0
    with_several_references: int = 0
    failures: dict[str, int] = field(default_factory=dict)
    failed_rows: list[dict[str, Any]] = field(default_factory=list)


def runs_for(rows: list[dict[str, Any]], scorer: str, references: str) -> list[dict[str, Any]]:
    """The runs a scorer can take from these rows, with their ids."""
    runs = []
    for row in rows:
        if scorer == RELEVANCY and not (row.get("input") or "").strip():
            continue
        truth: Any = row.get("ground_truth")
        several = row.get("ground_truths")
        if scorer == SIMILARITY:
            if references == "all" and isinstance(several, list) and len(several) > 1:
                truth = several
            if truth in (None, "", []):
                continue
        runs.append(
            {
                "run_id": str(row["id"]),
                "input": row.get("input"),
                "output": row.get("output"),
                "ground_truth": truth if scorer == SIMILARITY else None,
            }
        )
    return runs


def soak(scorer: Any, name: str, dataset: str, runs: list[dict[str, Any]], chunk: int) -> Block:
    """Score the runs in chunks with ``run_batch``; count statuses and failure kinds."""
    block = Block(dataset, name, rows=len(runs))
    block.with_several_references = sum(isinstance(r["ground_truth"], list) for r in runs)
    kinds: Counter[str] = Counter()
    for start in range(0, len(runs), chunk):
        batch = runs[start : start + chunk]
        began = time.perf_counter()
        try:
            results = scorer.run_batch(batch)
        except Exception as error:  # a whole batch lost: exactly what this script hunts
            block.crashed_batches += 1
            block.failed += len(batch)
            kinds[f"batch crashed: {type(error).__name__}"] += len(batch)
            block.failed_rows += [
                {"id": run["run_id"], "step": None, "error": f"{type(error).__name__}: {error}"}
                for run in batch
            ]
            continue
        finally:
            block.seconds += time.perf_counter() - began
        for result in results:
            if result.status == "scored":
                block.scored += 1
            elif result.status == "not_scorable":
                block.not_scorable += 1
            else:
                block.failed += 1
                kinds[f"{result.failed_step}: {error_kind(result.error)}"] += 1
                block.failed_rows.append(
                    {"id": result.run_id, "step": result.failed_step, "error": result.error}
                )
        done = min(start + chunk, len(runs))
        print(
            f"[soak] {dataset} / {name}: {done}/{len(runs)} runs, {block.seconds:.0f} s, "
            f"{block.failed} failed",
            file=sys.stderr,
            flush=True,
        )
    block.failures = dict(sorted(kinds.items()))
    return block


def markdown(blocks: list[Block], command: str, mode: str, wall: float) -> str:
    lines = [
        f"Soak, {mode}: every run's status, failures by step and kind.",
        "",
        "| dataset | scorer | runs | several refs | scored | not scorable | failed | "
        "failures (step: kind × runs) | s | runs/s |",
        "|---|---|---:|---:|---:|---:|---:|---|---:|---:|",
    ]
    for b in blocks:
        failures = "; ".join(f"{k} × {n}" for k, n in b.failures.items()) or "none"
        rate = b.rows / b.seconds if b.seconds else 0.0
        lines.append(
            f"| {b.dataset} | {b.scorer} | {b.rows} | {b.with_several_references} | "
            f"{b.scored} | {b.not_scorable} | **{b.failed}** | {failures} | "
            f"{b.seconds:.0f} | {rate:.2f} |"
        )
    total = sum(b.rows for b in blocks)
    failed = sum(b.failed for b in blocks)
    lines += [
        "",
        f"- {total} runs, **{failed} failed**, {wall:.0f} s wall including the model load.",
        f"- command: `{command}` ({datetime.now(timezone.utc).isoformat(timespec='seconds')})",
    ]
    shown = [(b, row) for b in blocks for row in b.failed_rows][:20]
    if shown:
        lines += ["", "Failed runs (first 20):", ""]
        lines += [
            f"- {b.dataset} / {b.scorer} / `{row['id']}`: {str(row['error'])[:300]}"
            for b, row in shown
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/eval-data"))
    parser.add_argument("--limit", type=int, default=None, help="rows per dataset (default all)")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--datasets", nargs="+", choices=DATASETS, default=list(DATASETS))
    parser.add_argument("--scorers", nargs="+", choices=(SIMILARITY, RELEVANCY))
    parser.add_argument("--chunk", type=int, default=16, help="runs per run_batch call")
    parser.add_argument("--verdicts", choices=("auto", "read", "generate"), default="auto")
    parser.add_argument("--scoring", choices=("auto", "hard", "expected"), default="auto")
    parser.add_argument("--extraction", choices=("auto", "model", "split"), default="auto")
    parser.add_argument(
        "--references",
        choices=("all", "first"),
        default="all",
        help="similarity: every accepted answer of a row (ground_truths) or the first only",
    )
    parser.add_argument("--out", type=Path, default=None, help="path stem of the results")
    args = parser.parse_args(argv)

    began = time.perf_counter()
    data = resolve_data(args.data)
    modes = {"verdicts": args.verdicts, "scoring": args.scoring, "extraction": args.extraction}
    mode = ", ".join(f"{k}={v}" for k, v in modes.items())
    judge = TransformersJudge()
    factories = {
        SIMILARITY: create_answer_similarity_scorer,
        RELEVANCY: create_answer_relevancy_scorer,
    }
    blocks: list[Block] = []
    for dataset in args.datasets:
        rows = load_rows(data, dataset)
        if args.limit is not None:
            rows = sample_rows(rows, args.limit, args.seed)
        for name in args.scorers or (SIMILARITY, RELEVANCY):
            runs = runs_for(rows, name, args.references)
            if runs:
                scorer = factories[name](judge=judge, **modes)
                blocks.append(soak(scorer, name, dataset, runs, args.chunk))

    wall = time.perf_counter() - began
    suffix = "" if args.verdicts == args.extraction == "auto" else f"-{args.verdicts}"
    stem = args.out or Path(f"benchmarks/results/soak{suffix}")
    stem = stem if stem.is_absolute() else REPO / stem
    stem.parent.mkdir(parents=True, exist_ok=True)
    command = "python -m benchmarks.soak " + " ".join(argv if argv is not None else sys.argv[1:])
    text = markdown(blocks, command.strip(), mode, wall)
    stem.with_suffix(".md").write_text(text, encoding="utf-8")
    stem.with_suffix(".json").write_text(
        json.dumps(
            {"mode": modes, "wall_seconds": wall, "blocks": [asdict(b) for b in blocks]}, indent=1
        ),
        encoding="utf-8",
    )
    print(text)
    print(f"Wrote {stem.with_suffix('.json')} and {stem.with_suffix('.md')}")
    return 1 if any(b.failed for b in blocks) else 0


if __name__ == "__main__":
    raise SystemExit(main())
