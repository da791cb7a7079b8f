"""Benchmark: cold start of the command line, from process start to exit.

Run it with ``make bench`` or ``.venv/bin/python -m benchmarks.cold_start [--repeats N]``.
It prints a Markdown table and writes ``benchmarks/results/cold_start.json`` (git-ignored).

What is measured: the wall time of ``offline-scorer score ONE_ITEM.jsonl --no-cache -q``
(answer relevancy, the embedded model or ``--model`` in ``--dtype``, one short item), each
run a separate process started by this script, timed from just before the process starts
until it has exited:

* *first run*: ``OFFLINE_SCORER_CACHE`` points at a new, empty folder, so the embedded
  GGUF file is checked against its sha256, dequantized and saved as a safetensors copy;
* *second run*: same folder, so the model loads from the converted copy.

``--no-cache`` turns off the result cache, so the second run really scores the item (a
result-cache hit would skip the model entirely; that case is shown as a third row,
*second run, result cached*, for completeness). The peak RSS of each child comes from the
OS (``os.wait4`` returns the child's own resource usage). With ``--repeats`` > 1 every row is repeated with
a fresh cache folder and medians are reported. Nothing here asserts a time.

``--layouts plain packed`` runs the second run twice per repeat, alternating: once as the
CLI is (``packed``: on a CPU in bfloat16 the linear layers are packed at load) and once
with packing switched off in the child (``plain``: the child is the same CLI started
through ``python -c`` with ``load_model``'s packing replaced by nothing, a benchmark-only
switch). Both read the same converted copy, so the two rows differ only by the layout.

``--layouts packed baseline`` compares the CLI as it is with the CLI without the two
savings of 2026-12-07, switched off in the child the same way (``baseline``): no prompt
prefixes kept on disk (every process computes its system blocks again) and Python's full
teardown at exit (the child calls ``main()``, not the console script's ``console()``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "cold_start.json"
ITEM = {
    "id": "cold-1",
    "input": "What is the capital of France?",
    "output": "Paris is the capital of France.",
}


def cli() -> str:
    """The ``offline-scorer`` entry point next to this interpreter."""
    path = Path(sys.executable).with_name("offline-scorer")
    if not path.exists():
        raise SystemExit(f"{path} not found: run `make install` first.")
    return str(path)


# The CLI with load_model's packing switched off (the ``plain`` layout).
PLAIN_CLI = (
    "from offline_scorer.judges.transformers import _loading; "
    "_loading.pack_linear_layers = lambda model: None; "
    "from offline_scorer.cli import main; main()"
)
# The CLI without the prefix files and without the quick exit (the ``baseline`` layout).
BASELINE_CLI = (
    "from offline_scorer.judges.transformers import _loading; "
    "_loading._prefix_files = lambda *args: None; "
    "from offline_scorer.cli import main; main()"
)
CHILDREN = {"plain": PLAIN_CLI, "baseline": BASELINE_CLI}


def run_once(
    label: str,
    data: Path,
    cache: Path,
    use_result_cache: bool,
    model: list[str],
    layout: str = "packed",
) -> dict[str, Any]:
    """Start one CLI process, wait for it, and return its wall time and peak RSS."""
    start = [cli()] if layout == "packed" else [sys.executable, "-c", CHILDREN[layout]]
    command = [*start, "score", str(data), "-q", "--out", str(cache / f"{label}.jsonl"), *model]
    command.append("--cache" if use_result_cache else "--no-cache")
    env = {**os.environ, "OFFLINE_SCORER_CACHE": str(cache)}
    log = cache / f"{label}.log"
    with log.open("wb") as sink:
        started = time.perf_counter()
        process = subprocess.Popen(command, env=env, stdout=sink, stderr=sink)
        # wait4 gives this child's own resource usage, peak RSS included.
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
    code = os.waitstatus_to_exitcode(status)
    process.returncode = code
    if code not in (0, 1):
        raise RuntimeError(f"{label}: exit {code}\n{log.read_text()[-3000:]}")
    row = json.loads((cache / f"{label}.jsonl").read_text().splitlines()[0])
    return {
        "label": label,
        "wall_seconds": wall,
        "peak_rss_gib": usage.ru_maxrss * 1024 / 2**30,
        "exit_code": code,
        "status": row.get("status"),
        "score": row.get("score"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=1, help="fresh cache folders to try")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--model", default=None, help="a model card (default: the embedded one)")
    parser.add_argument("--dtype", default=None, help="passed to the CLI's --dtype")
    parser.add_argument(
        "--layouts",
        nargs="+",
        choices=("plain", "packed", "baseline"),
        default=["packed"],
        help="variants of the second run (plain: packing switched off in the child; "
        "baseline: no prefix files and a full teardown at exit)",
    )
    args = parser.parse_args()
    model: list[str] = []  # the judge's flags, passed to every run as given
    if args.model:
        model += ["--model", args.model]
    if args.dtype:
        model += ["--dtype", args.dtype]

    seconds = [
        "second run"
        if layout == "packed" and args.layouts == ["packed"]
        else f"second run, {layout}"
        for layout in args.layouts
    ]
    labels = ("first run", *seconds, "second run, result cached")
    rows: dict[str, list[dict[str, Any]]] = {label: [] for label in labels}
    with tempfile.TemporaryDirectory(prefix="cold-start-") as folder:
        data = Path(folder) / "one.jsonl"
        data.write_text(json.dumps(ITEM) + "\n")
        for repeat in range(args.repeats):
            cache = Path(folder) / f"cache-{repeat}"
            cache.mkdir()
            # alternate which layout goes first, so neither always finds the warmer machine
            order = labels if repeat % 2 == 0 else (labels[0], *seconds[::-1], labels[-1])
            for label in order:
                result = run_once(
                    label.replace(" ", "-").replace(",", ""),
                    data,
                    cache,
                    use_result_cache=label.endswith("cached"),
                    model=model,
                    layout=label.rsplit(", ", 1)[1]
                    if label.endswith(tuple(CHILDREN))
                    else "packed",
                )
                # The cached row needs a result in the cache: the run before it wrote none
                # (--no-cache), so it fills the cache first and is timed the second time.
                if label.endswith("cached"):
                    result = run_once("cached-again", data, cache, True, model)
                result["label"] = label
                rows[label].append(result)
                print(f"  {label}: {result['wall_seconds']:.1f} s", file=sys.stderr)

    table = ["| run | wall s (median) | runs | status | peak RSS GiB |", "|---|---:|---:|---|---:|"]
    summary = {}
    for label, runs in rows.items():
        wall = statistics.median(r["wall_seconds"] for r in runs)
        rss = max(r["peak_rss_gib"] for r in runs)
        summary[label] = {"wall_seconds": wall, "runs": len(runs), "peak_rss_gib": rss}
        table.append(f"| {label} | {wall:.1f} | {len(runs)} | {runs[0]['status']} | {rss:.2f} |")
    report = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "cli": "offline-scorer score one.jsonl -q --no-cache "
        + " ".join(model)
        + " (answer relevancy, 1 item)",
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
        "summary": summary,
        "runs": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print("## Cold start of `offline-scorer score` on a 1-item file\n")
    print("\n".join(table))
    print(f"\nSaved {args.out}.")


if __name__ == "__main__":
    main()
