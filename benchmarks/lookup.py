"""Benchmark: the decode loop with prompt lookup against the loop without it, in one process.

Run it with ``.venv/bin/python -m benchmarks.lookup [--model CARD] [--dtype auto]
[--items 8] [--lookup 8] [--repeats 2] [--shapes batched alone]``. It prints a Markdown
table and writes ``benchmarks/results/lookup.json`` (git-ignored; ``--out`` picks another
path).

Two shapes of work, on the same ``--items`` items of ``throughput.py``, both scorers:

* **batched**: the reference's procedure (``verdicts="generate", extraction="model"``:
  statements, verdicts and the reason all written by the model) over all items in one
  ``run_batch``, the card's prompts per pass;
* **alone**: the card's defaults (read verdicts, a written reason), one item per
  ``run_batch``: what a one-item run (a cold start, a CI check) decodes, one row per pass.

Each shape and scorer runs once with ``lookup_tokens=0`` and once with ``--lookup``, on one
loaded model, alternating for ``--repeats`` rounds after an untimed warm-up item; the
ratio is taken within each round and the table gives medians. Counts come from the loop
itself (forward passes, guessed tokens fed, guessed tokens the model took). The last two
columns count the items whose score, and whose reason, differ between the two ways: in
float32 none do (greedy choices are the same); in bfloat16 a pass over several tokens can
round a near-tie the other way, as feeding forced tokens together or a cached prefix can.
The defaults' scores never depend on decoding (read verdicts, split units), only their
reasons do. Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path
from typing import Any

from benchmarks.throughput import WARM_UP, item_runs

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "lookup.json"
SCORERS = ("answer-relevancy", "answer-similarity")
SHAPES = ("batched", "alone")


COUNTS = ("forward_passes", "drafted_tokens", "accepted_tokens")


def counted(loaded: Any, run: Any) -> tuple[float, dict[str, int], Any]:
    """Seconds, the decode loop's counts (``loaded.loop_stats``) and the value of ``run()``."""
    before = {name: getattr(loaded.loop_stats, name) for name in COUNTS}
    began = time.perf_counter()
    value = run()
    seconds = time.perf_counter() - began
    counts = {name: getattr(loaded.loop_stats, name) - before[name] for name in COUNTS}
    return seconds, counts, value


def one_way(loaded: Any, shape: str, scorer_id: str, lookup: int, items: int) -> dict[str, Any]:
    """Score the items in one shape with one lookup setting; figures and outputs."""
    from offline_scorer import GenerationSettings, TransformersJudge, get_scorer

    judge = TransformersJudge(loaded, settings=GenerationSettings(lookup_tokens=lookup))
    procedure = {"verdicts": "generate", "extraction": "model"} if shape == "batched" else {}
    scorer = get_scorer(scorer_id, judge=judge, **procedure)
    scorer.run_batch([{"input": WARM_UP[0], "output": WARM_UP[1], "ground_truth": WARM_UP[2]}])
    runs = item_runs(items)

    def score() -> list[Any]:
        if shape == "batched":
            return list(scorer.run_batch(runs))
        return [scorer.run_batch([run])[0] for run in runs]

    seconds, counts, results = counted(loaded, score)
    return {
        "seconds": seconds,
        "items_per_s": items / seconds,
        "failed": sum(r.status == "failed" for r in results),
        "scores": [(r.status, r.score) for r in results],
        "reasons": [r.reason for r in results],
        **counts,
    }


def changed(off: list[dict[str, Any]], on: list[dict[str, Any]], key: str) -> int:
    """How many item runs gave another ``key`` with lookup than without, over the rounds."""
    return sum(a != b for x, y in zip(off, on) for a, b in zip(x[key], y[key]))


def markdown(report: dict[str, Any]) -> str:
    lines = [
        f"{report['model']} ({report['dtype']}), {report['items']} items, lookup "
        f"{report['lookup']} tokens per pass, {report['repeats']} rounds, medians\n",
        "| shape | scorer | s, no lookup | s, lookup | speed-up | forward passes | guessed fed | "
        "guessed taken | failed | scores changed | reasons changed |",
        "|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    for row in report["rows"]:
        lines.append(
            f"| {row['shape']} | {row['scorer']} | {row['seconds_off']:.1f} | "
            f"{row['seconds_on']:.1f} | **{row['speedup']:.2f}×** | "
            f"{row['passes_off']} → {row['passes_on']} | {row['drafted']} | {row['accepted']} | "
            f"{row['failed']} | {row['scores_changed']} of {row['runs']} | "
            f"{row['reasons_changed']} of {row['runs']} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=None, help="model card (default: the embedded one)")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--items", type=int, default=8)
    parser.add_argument("--lookup", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=SHAPES)
    parser.add_argument("--scorers", nargs="+", default=list(SCORERS), choices=SCORERS)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()

    import torch

    from offline_scorer import DEFAULT_MODEL, load_model

    model = args.model or DEFAULT_MODEL
    loaded = load_model(model, dtype=args.dtype)
    rows = []
    for shape in args.shapes:
        for scorer_id in args.scorers:
            rounds = [
                {
                    lookup: one_way(loaded, shape, scorer_id, lookup, args.items)
                    for lookup in (0, args.lookup)
                }
                for _ in range(args.repeats)
            ]
            off = [r[0] for r in rounds]
            on = [r[args.lookup] for r in rounds]
            row = {
                "shape": shape,
                "scorer": scorer_id,
                "seconds_off": statistics.median(r["seconds"] for r in off),
                "seconds_on": statistics.median(r["seconds"] for r in on),
                "speedup": statistics.median(a["seconds"] / b["seconds"] for a, b in zip(off, on)),
                "passes_off": off[-1].get("forward_passes", 0),
                "passes_on": on[-1].get("forward_passes", 0),
                "drafted": on[-1].get("drafted_tokens", 0),
                "accepted": on[-1].get("accepted_tokens", 0),
                "failed": sum(r["failed"] for r in off + on),
                "runs": sum(len(r["scores"]) for r in off),
                "scores_changed": changed(off, on, "scores"),
                "reasons_changed": changed(off, on, "reasons"),
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
    report = {
        "model": model,
        "dtype": str(loaded.model.dtype).removeprefix("torch."),
        "items": args.items,
        "lookup": args.lookup,
        "repeats": args.repeats,
        "threads": torch.get_num_threads(),
        "machine": platform.processor() or platform.machine(),
        "rows": rows,
    }
    print(markdown(report))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
