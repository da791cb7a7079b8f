"""Benchmark: label reads one row per forward pass against several rows per pass.

Run it with ``.venv/bin/python -m benchmarks.read_batching [--card NAME] [--reads 24]
[--sizes 1 4 8] [--repeats 3] [--threads 2]``. It prints a Markdown table, one row per
rows-per-pass size, and writes ``benchmarks/results/read_batching.json`` (git-ignored;
``--out`` picks another path).

The reads are real verdict reads of training examples, built as
``tools/read_training.py`` builds its ``pair`` reads: the first ``--reads`` relevancy and
the first ``--reads`` similarity examples by id, each scorer's reads in one
``judge.score_labels`` call (as a scorer's analyze step makes it), so reads of one call
share their system block and the batched way sorts them by length.

One judge per size (``read_batch_size``), all sharing one loaded model and its prefix
cache; one untimed warm-up call per scorer first. Then ``--repeats`` rounds, and in each
round every size in turn: a round's sizes see the same machine state, so the ratio to
one row per pass is taken within each round, and the table gives the median over the
rounds (this machine is shared and noisy). Read tokens are each read's own tokens (the
cached system block is not run again).

The change columns compare each size with one row per pass: the largest absolute change
of a label log-probability (as returned, rounded to 4 decimals), how many of those values
differ at all, and how many reads pick another most likely label. Nothing here asserts a
time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "read_batching.json"


def reads(count: int) -> dict[str, dict[str, list[Any]]]:
    """Per scorer, ``{"messages": [...], "labels": [...]}`` for ``count`` + 1 reads; the
    last one is the warm-up read."""
    from tools.read_training import pool, shipped_read

    out: dict[str, dict[str, list[Any]]] = {}
    for scorer, examples in pool().items():
        first = sorted(examples, key=lambda e: e["id"])[: count + 1]
        shown = [shipped_read(scorer, e) for e in first]
        out[scorer] = {
            "messages": [list(messages) for messages, _ in shown],
            "labels": [labels for _, labels in shown],
        }
    return out


def timed_reads(judge: Any, batch: dict[str, dict[str, list[Any]]]) -> dict[str, Any]:
    """Every scorer's measured reads, one call per scorer; seconds, tokens and values."""
    seconds = 0.0
    tokens = 0
    values: list[list[float]] = []
    for scorer in sorted(batch):
        messages, labels = batch[scorer]["messages"][:-1], batch[scorer]["labels"][:-1]
        began = time.perf_counter()
        answers = judge.score_labels(messages, labels)
        seconds += time.perf_counter() - began
        failed = [str(a.error) for a in answers if not a.ok]
        if failed:
            raise RuntimeError(f"{scorer}: {len(failed)} reads failed: {failed[0]}")
        tokens += sum(a.usage.prompt_tokens for a in answers)
        values += [list(a.value.logprobs) for a in answers]
    return {"seconds": seconds, "tokens": tokens, "values": values}


def changes(base: list[list[float]], other: list[list[float]]) -> dict[str, Any]:
    """How far one size's values are from one row per pass's."""
    pairs = [(a, b) for row_a, row_b in zip(base, other) for a, b in zip(row_a, row_b)]
    flips = sum(
        max(range(len(a)), key=a.__getitem__) != max(range(len(b)), key=b.__getitem__)
        for a, b in zip(base, other)
    )
    return {
        "max_abs": max(abs(a - b) for a, b in pairs),
        "differing": sum(a != b for a, b in pairs),
        "values": len(pairs),
        "flips": flips,
    }


def measure(args: argparse.Namespace) -> dict[str, Any]:
    from offline_scorer import GenerationSettings, TransformersJudge

    batch = reads(args.reads)
    loaded = TransformersJudge(args.card, threads=args.threads).load()
    # One judge per size on the same loaded weights (and so the same prefix cache).
    judges = {
        size: TransformersJudge(loaded, settings=GenerationSettings(read_batch_size=size))
        for size in args.sizes
    }
    for judge in judges.values():
        for scorer in batch:
            judge.score_labels(batch[scorer]["messages"][-1:], batch[scorer]["labels"][-1:])
    rounds: list[dict[int, dict[str, Any]]] = []
    for number in range(args.repeats):
        rounds.append({size: timed_reads(judges[size], batch) for size in args.sizes})
        line = ", ".join(
            f"{size}: {r['tokens'] / r['seconds']:.1f} tok/s" for size, r in rounds[-1].items()
        )
        print(f"round {number + 1}: {line}", flush=True)
    base = args.sizes[0]
    table = {}
    for size in args.sizes:
        rates = [r[size]["tokens"] / r[size]["seconds"] for r in rounds]
        table[size] = {
            "median_read_tokens_per_s": statistics.median(rates),
            "median_reads_per_s": statistics.median(
                len(r[size]["values"]) / r[size]["seconds"] for r in rounds
            ),
            "median_ratio": statistics.median(
                (r[size]["tokens"] / r[size]["seconds"]) / (r[base]["tokens"] / r[base]["seconds"])
                for r in rounds
            ),
            "changes": changes(rounds[0][base]["values"], rounds[0][size]["values"]),
            "same_every_round": all(r[size]["values"] == rounds[0][size]["values"] for r in rounds),
        }
    return {
        "card": args.card,
        "fingerprint": loaded.fingerprint,
        "dtype": loaded.dtype,
        "device": loaded.device,
        "threads": args.threads,
        "reads_per_round": len(rounds[0][base]["values"]),
        "repeats": args.repeats,
        "machine": {
            "processor": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(),
        },
        "sizes": table,
    }


def print_report(report: dict[str, Any], out: Path) -> None:
    print(
        f"\n{report['card']} ({report['dtype']}, {report['device']}, {report['threads']} "
        f"threads): {report['reads_per_round']} label reads per round, median of "
        f"{report['repeats']} rounds\n"
    )
    print(
        "| rows per pass | read tokens/s | reads/s | ratio to 1 | max change | values changed "
        "| label flips | same every round |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---|")
    for size, row in report["sizes"].items():
        change = row["changes"]
        print(
            f"| {size} | {row['median_read_tokens_per_s']:.1f} | {row['median_reads_per_s']:.2f} "
            f"| {row['median_ratio']:.2f}x | {change['max_abs']:.4f} | {change['differing']}/"
            f"{change['values']} | {change['flips']} | {row['same_every_round']} |"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"\nwritten: {out}")


def main() -> None:
    from offline_scorer.judges import DEFAULT_MODEL

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--card", default=DEFAULT_MODEL, help="a model card name")
    parser.add_argument("--reads", type=int, default=24, help="measured reads per scorer")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    if args.sizes[0] != 1:
        parser.error("the first size must be 1: the others are compared with it")
    print_report(measure(args), args.out)


if __name__ == "__main__":
    main()
