"""Benchmark: a card's bfloat16 linear layers, plain against packed for oneDNN, by row count.

Run it with ``.venv/bin/python -m benchmarks.packed_linear --model
qwen2.5-coder-1.5b-instruct [--rows 1 8 228 1824] [--repeats 5]``. It loads the card once in
bfloat16 with its plain layers, takes one layer of each weight shape (attention, MLP and the
output head), and times ``F.linear`` on the plain weight against oneDNN's kernel on the same
weight packed once (``judges/transformers/_packing.py``) on random rows, the two ways
alternating, medians over ``--repeats``. A row is a token: 1 is a decode step at batch 1,
8 at batch 8, hundreds a prompt's pass. Each shape counts once per decoder layer, so the
``one pass`` row weighs the shapes as one forward pass does. It prints a Markdown table
and asserts nothing; compare figures from the same run.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter
from collections.abc import Callable
from functools import partial
from typing import Any


def median_seconds(call: Callable[[], Any], repeats: int) -> float:
    call()  # warm-up: oneDNN builds its primitive on the first call of a shape
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        call()
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 8, 228, 1824])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, help="torch threads (default: the judge's)")
    args = parser.parse_args()

    import torch

    from offline_scorer import load_model

    if not torch.ops.mkldnn._is_mkldnn_bf16_supported():
        raise SystemExit("oneDNN computes no bfloat16 on this processor: nothing to compare")
    loaded = load_model(args.model, dtype="bfloat16", threads=args.threads, pack_weights=False)
    layers = [m for m in loaded.model.modules() if type(m) is torch.nn.Linear]
    counts = Counter(tuple(m.weight.shape) for m in layers)
    weights = {tuple(m.weight.shape): m.weight.detach() for m in layers}
    generator = torch.Generator().manual_seed(0)
    print(
        f"{loaded.fingerprint}: {len(layers)} linear layers, {len(counts)} shapes, "
        f"{torch.get_num_threads()} threads, medians of {args.repeats}.\n"
    )
    print("| rows | shape (out x in) | layers | plain ms | packed ms | plain / packed |")
    print("|---:|---|---:|---:|---:|---:|")
    for rows in args.rows:
        plain_total = packed_total = 0.0
        for shape, weight in weights.items():
            x = torch.randn(rows, shape[1], generator=generator).to(torch.bfloat16)
            packed = torch.ops.mkldnn._reorder_linear_weight(weight, 1)
            with torch.inference_mode():
                plain_s = median_seconds(
                    partial(torch.nn.functional.linear, x, weight), args.repeats
                )
                pointwise = torch.ops.mkldnn._linear_pointwise
                packed_s = median_seconds(
                    partial(pointwise, x, packed, None, "none", [], ""), args.repeats
                )
            plain_total += counts[shape] * plain_s
            packed_total += counts[shape] * packed_s
            print(
                f"| {rows} | {shape[0]} x {shape[1]} | {counts[shape]} | {plain_s * 1e3:.2f} | "
                f"{packed_s * 1e3:.2f} | {plain_s / packed_s:.2f}x |"
            )
        print(
            f"| {rows} | **one pass, every layer** | {len(layers)} | {plain_total * 1e3:.1f} | "
            f"{packed_total * 1e3:.1f} | **{plain_total / packed_total:.2f}x** |"
        )


if __name__ == "__main__":
    main()
