"""Benchmark: items/s of every card's default scorers, in one run on the same items.

    .venv/bin/python -m benchmarks.card_speed                 # every installed card
    .venv/bin/python -m benchmarks.card_speed --items 16 --model smollm2-135m-instruct

Each card scores the same ``--items`` items of ``benchmarks/throughput.py`` (our own
question / answer / reference triples of mixed lengths) with each built-in scorer's
defaults for that card, the reason included: what ``create_*_scorer(model=card)`` does.
Each (card, scorer) runs in its own fresh child process (the throughput script's ``read``
way: the model loaded from the converted cache, one warm-up item not timed, then one
``run_batch`` over the items), in the card's default dtype for this machine unless
``--dtype`` says otherwise. It prints one Markdown table (items/s, seconds, tokens, peak RSS,
load seconds, failed rows) and writes ``benchmarks/results/card_speed.json`` (git-ignored).
Nothing here asserts a time; compare the cards of one run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.throughput import DTYPE_VARIABLE, MODEL_VARIABLE, SCORERS, run_child

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "card_speed.json"


def installed_cards() -> list[str]:
    """The names of the cards whose model files are present, default card first."""
    from offline_scorer import list_model_cards
    from offline_scorer.toolkit import card_status

    return [card.name for card in list_model_cards() if card_status(card, verify=False).present]


def measure(card: str, dtype: str | None, scorer_id: str, items: int) -> dict[str, Any]:
    """One card and scorer in a fresh child process (the throughput script's read way)."""
    env = os.environ.copy()
    env[MODEL_VARIABLE] = card
    env.pop(DTYPE_VARIABLE, None)
    if dtype:
        env[DTYPE_VARIABLE] = dtype
    return run_child(["--child", "read", scorer_id, "--items", str(items)], env=env)


def table(rows: list[dict[str, Any]]) -> str:
    """One line per (card, scorer); the card's dtype is the end of its fingerprint."""
    lines = [
        "| card | scorer | items/s | s | prompt tokens | generated tokens | peak RSS GiB "
        "| load s | failed |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        weights = row["fingerprint"].split("@", 1)[-1]
        lines.append(
            f"| {row['card']} (`{weights}`) | {row['scorer']} "
            f"| {row['items'] / row['seconds']:.2f} | {row['seconds']:.1f} "
            f"| {row['prompt_tokens']} | {row['generated_tokens']} "
            f"| {row['peak_rss_bytes'] / 2**30:.2f} | {row['load_seconds']:.1f} "
            f"| {row['failed']} of {row['items']} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model", action="append", help="a card name (repeatable; default: every installed card)"
    )
    parser.add_argument("--items", type=int, default=16, help="items per scorer (default 16)")
    parser.add_argument("--dtype", default=None, help="every card's dtype (default: auto)")
    parser.add_argument("--scorers", nargs="+", default=list(SCORERS), choices=SCORERS)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    if args.items < 1:
        parser.error("--items must be at least 1")
    from offline_scorer import list_model_cards

    known = {card.name for card in list_model_cards()}
    cards = args.model or installed_cards()
    unknown = sorted(set(cards) - known)
    if unknown:  # before any child starts
        parser.error(f"no model card {unknown}; known cards: {sorted(known)}")
    began = time.perf_counter()
    rows = []
    for card in cards:
        for scorer_id in args.scorers:
            print(f"{card} / {scorer_id}: {args.items} items ...", file=sys.stderr, flush=True)
            result = measure(card, args.dtype, scorer_id, args.items)
            rows.append({"card": card, **result})
    import torch

    report = {
        "command": " ".join(
            [Path(sys.executable).name, "-m", "benchmarks.card_speed", *sys.argv[1:]]
        ),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "torch": torch.__version__,
        },
        "seconds": time.perf_counter() - began,
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(table(rows))
    print(f"\n{len(rows)} children, {report['seconds']:.0f} s in all.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
