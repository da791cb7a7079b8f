"""Benchmark: items/s of the Ray backend with 1 and 2 actors, next to a local run.

Run it with ``flock /tmp/offline-scorer-cpu.lock .venv/bin/python -m benchmarks.ray_scaling
[--rows 20] [--batch-size 10]``. It prints a Markdown table to stdout (Ray's own logs go
to stderr).

What is measured
----------------
``--rows`` short question/answer pairs (ids ``q000``...) are scored with answer relevancy
(statements, verdicts, score and reason: three judge calls per batch) on the embedded model:

* ``local``: ``run_evals`` in this process, 2 torch threads, model already loaded;
* ``ray``: ``run_evals(..., backend="ray")`` on a local Ray instance started for each
  configuration, with 1 actor of 1 CPU and 2 actors of 1 CPU each.

``wall s`` for Ray includes starting Ray, the row-checking pass, each actor's model load
(from the converted-weights cache) and its first constrained call (schema compilation); the
local figure counts none of those. ``items/s`` is rows divided by that wall time.
Every configuration must give the same scores as the local run; the script checks it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

QUESTIONS = [
    ("Capital of France?", "Paris."),
    ("Capital of Italy?", "Rome."),
    ("Capital of Spain?", "Madrid."),
    ("Legs on a spider?", "Eight."),
    ("Color of the sky?", "Blue."),
    ("Largest planet?", "Jupiter."),
    ("Author of Hamlet?", "Shakespeare."),
    ("Days in a week?", "Seven."),
    ("Capital of Canada?", "Toronto."),
    ("Frozen water is?", "Ice."),
]

CONFIGURATIONS = [(1, 1.0), (2, 1.0)]


def write_rows(path: Path, count: int) -> None:
    with path.open("w", encoding="utf-8") as handle:
        for number in range(count):
            question, answer = QUESTIONS[number % len(QUESTIONS)]
            row = {"id": f"q{number:03d}", "input": question, "output": answer}
            handle.write(json.dumps(row) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=10)
    args = parser.parse_args()
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    from offline_scorer import TransformersJudge, get_scorer, run_evals

    with tempfile.TemporaryDirectory() as folder:
        data = Path(folder) / "rows.jsonl"
        write_rows(data, args.rows)
        judge = TransformersJudge(threads=2)
        judge.load()
        started = time.perf_counter()
        local = run_evals(
            data,
            [get_scorer("answer-relevancy", judge=judge)],
            batch_size=args.batch_size,
            progress=False,
        )
        lines = [("local (this process)", "2 threads", time.perf_counter() - started)]
        expected = {item.item_id: item.results for item in local.items}
        for actors, cpus in CONFIGURATIONS:
            started = time.perf_counter()
            result = run_evals(
                data,
                ["answer-relevancy"],
                batch_size=args.batch_size,
                progress=False,
                backend="ray",
                ray={"actors": actors, "num_cpus": cpus},
            )
            seconds = time.perf_counter() - started
            scores = {item.item_id: item.results for item in result.items}
            same = all(
                scores[key][name].score == runs[name].score
                and scores[key][name].reason == runs[name].reason
                for key, runs in expected.items()
                for name in runs
            )
            if not same:
                sys.exit(f"{actors} actor(s) x {cpus:g} CPU gave other scores than local")
            lines.append((f"ray, {actors} actor(s)", f"{cpus:g} CPU each", seconds))
            print(f"done: {lines[-1]}", file=sys.stderr, flush=True)
    print(f"{args.rows} rows, answer relevancy, batch size {args.batch_size}\n")
    print("| run | per actor | wall s | items/s |")
    print("|---|---|---|---|")
    for name, each, seconds in lines:
        print(f"| {name} | {each} | {seconds:.1f} | {args.rows / seconds:.2f} |")


if __name__ == "__main__":
    main()
