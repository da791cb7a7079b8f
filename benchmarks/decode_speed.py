"""Benchmark: raw decode speed of a card's model against the memory-bandwidth ceiling.

Run it with ``.venv/bin/python -m benchmarks.decode_speed [--tokens 64] [--repeats 3]``
(the embedded card; ``--model qwen2.5-coder-1.5b-instruct --dtype bfloat16`` for another
card and dtype). It prints a Markdown table and writes
``benchmarks/results/decode_speed.json`` (git-ignored).

Decoding one token at batch 1 reads every weight once, so memory bandwidth bounds it:
``ceiling tok/s = bandwidth / bytes of weights`` (in the dtype they run in). Bandwidth comes from a copy test (a
256 MiB tensor copied several times; read plus write bytes over the median time).

Then, on the same real prompt (a relevancy reason prompt of about 300 tokens, so the cache
is as long as in use), each way generates ``--tokens`` new tokens per row with no
constraint and no early end (the end-of-sequence token is not honoured, so every way does
the same work), at batch 1 and at each of ``--batches`` (default 8):

* ``generate``: ``model.generate`` (greedy), what the judge used before issue 14;
* ``loop``: our decode loop (``judges/transformers/_loop.py``), prefix cache off;
* ``forward``: a bare loop of ``model(...)`` calls with transformers' default cache, at
  batch 1 only (no padding, no mask): what the model itself costs per token.

Each way runs on each ``--layouts`` model, loaded apart and alternating: ``plain`` (the
linear layers as transformers builds them) and ``packed`` (their weights laid out once for
oneDNN, what ``load_model`` does on a CPU in bfloat16; ``judges/transformers/_packing.py``).
Where packing does not apply (float32, a GPU) both layouts are the same model.

Decode tokens/s excludes the prompt's pass (timed apart as ``prefill s``). Ways alternate
and figures are medians over ``--repeats``. The last table splits one batch-1 decode step
of the loop by operator (torch profiler), to show where the time goes. Nothing here asserts
a time; compare figures from the same run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "decode_speed.json"


def bandwidth_bytes_per_s() -> float:
    """Copy bandwidth: a 256 MiB tensor copied 7 times, read plus write bytes over the median."""
    import torch

    size = 256 * 1024 * 1024 // 4
    source, target = torch.ones(size), torch.empty(size)
    times = []
    for _ in range(7):
        began = time.perf_counter()
        target.copy_(source)
        times.append(time.perf_counter() - began)
    return 2 * source.numel() * source.element_size() / statistics.median(times[1:])


def prompt_ids(loaded: Any) -> list[int]:
    """A real reason prompt of the relevancy scorer, chat-templated and tokenized."""
    from offline_scorer.toolkit import render_prompt

    messages = render_prompt(
        "answer-relevancy",
        "en",
        "reason",
        {
            "input": "How can I make my laptop battery last longer?",
            "output": (
                "Lower the screen brightness, close programs you do not use, and avoid "
                "keeping the battery at full charge all the time. Heat also wears batteries "
                "out, so keep the laptop cool."
            ),
            "score": 0.75,
            "scale": 1,
            "statements": [
                "Lower the screen brightness.",
                "Close programs you do not use.",
                "Avoid keeping the battery at full charge all the time.",
                "Heat wears batteries out, so keep the laptop cool.",
            ],
            "verdicts": [
                {"result": "yes", "reason": "It answers the question."},
                {"result": "yes", "reason": "It answers the question."},
                {"result": "yes", "reason": "It answers the question."},
                {"result": "unsure", "reason": "It is advice about heat, not use."},
            ],
            "more_verdicts": 0,
            "summary": "",
        },
    )
    text = loaded.tokenizer.apply_chat_template(
        messages, tokenize=False, continue_final_message=messages[-1]["role"] == "assistant"
    )
    return list(loaded.tokenizer(text, add_special_tokens=False)["input_ids"])


def time_generate(loaded: Any, rows: list[list[int]], tokens: int) -> tuple[float, float]:
    """(prefill seconds, decode seconds) of ``model.generate`` on these rows."""
    import torch

    model = loaded.model
    ids = torch.tensor(rows)
    with torch.inference_mode():
        began = time.perf_counter()
        model.generate(
            input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=1, do_sample=False
        )
        prefill = time.perf_counter() - began
        began = time.perf_counter()
        model.generate(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=tokens,
            min_new_tokens=tokens,
            do_sample=False,
        )
        total = time.perf_counter() - began
    return prefill, total - prefill


def time_loop(loaded: Any, rows: list[list[int]], tokens: int) -> tuple[float, float]:
    """(prefill seconds, decode seconds) of our loop on these rows."""
    from offline_scorer.toolkit import LoopRow, loop_decode

    specs = [LoopRow(row, 1) for row in rows]
    began = time.perf_counter()
    loop_decode(loaded.model, specs, eos_ids=[], pad_id=0)
    prefill = time.perf_counter() - began
    specs = [LoopRow(row, tokens) for row in rows]
    began = time.perf_counter()
    out = loop_decode(loaded.model, specs, eos_ids=[], pad_id=0)
    total = time.perf_counter() - began
    assert all(len(ids) == tokens for ids, _ in out)
    return prefill, total - prefill


def time_forward(loaded: Any, rows: list[list[int]], tokens: int) -> tuple[float, float]:
    """(prefill seconds, decode seconds) of bare ``model(...)`` calls, batch 1."""
    import torch

    model = loaded.model
    with torch.inference_mode():
        began = time.perf_counter()
        out = model(input_ids=torch.tensor(rows), use_cache=True, logits_to_keep=1)
        prefill = time.perf_counter() - began
        cache, token = out.cache, out.logits[:, -1:].argmax(-1)
        began = time.perf_counter()
        for _ in range(tokens - 1):
            out = model(input_ids=token, cache=cache, use_cache=True, logits_to_keep=1)
            cache, token = out.cache, out.logits[:, -1:].argmax(-1)
        decode = time.perf_counter() - began
    # tokens - 1 steps after the prefill's token: scale to a per-token figure below.
    return prefill, decode * tokens / max(1, tokens - 1)


def step_profile(loaded: Any, row: list[int]) -> list[dict[str, Any]]:
    """Self CPU time per operator over 16 batch-1 decode steps of the loop."""
    from torch.profiler import ProfilerActivity, profile

    from offline_scorer.toolkit import LoopRow, loop_decode

    loop_decode(loaded.model, [LoopRow(row, 4)], eos_ids=[], pad_id=0)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        loop_decode(loaded.model, [LoopRow(row, 17)], eos_ids=[], pad_id=0)
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events)
    top = sorted(events, key=lambda e: -e.self_cpu_time_total)[:12]
    return [
        {
            "op": e.key,
            "calls": e.count,
            "self_ms": e.self_cpu_time_total / 1000,
            "share": e.self_cpu_time_total / total,
        }
        for e in top
    ]


WAYS = {"generate": time_generate, "loop": time_loop, "forward": time_forward}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--model", default="smollm2-135m-instruct", help="a model card name")
    parser.add_argument(
        "--dtype",
        default="auto",
        choices=["auto", "float32", "bfloat16", "float16"],
        help="the weights' dtype (default auto: the card's choice for this machine)",
    )
    parser.add_argument("--threads", type=int, help="torch threads (default: the judge's)")
    parser.add_argument(
        "--batches",
        nargs="+",
        type=int,
        default=[8],
        help="rows per decode step to measure besides batch 1, always measured (default 8)",
    )
    parser.add_argument(
        "--layouts",
        nargs="+",
        default=["plain", "packed"],
        choices=["plain", "packed"],
        help="weight layouts to measure, each a model loaded apart (packed: the linear "
        "layers laid out once for oneDNN, what load_model does on a CPU in bfloat16)",
    )
    args = parser.parse_args()

    import torch

    from offline_scorer import load_model

    models = {
        layout: load_model(
            args.model, dtype=args.dtype, threads=args.threads, pack_weights=layout == "packed"
        )
        for layout in args.layouts
    }
    loaded = models[args.layouts[-1]]
    plain = (
        models.get("plain") or load_model(args.model, dtype=args.dtype, pack_weights=False)
    ).model
    # the ceiling counts the weights in their plain layout: a packed layer holds no parameter
    weight_bytes = sum(p.numel() * p.element_size() for p in plain.parameters())
    del plain
    bandwidth = bandwidth_bytes_per_s()
    ceiling = bandwidth / weight_bytes
    row = prompt_ids(loaded)
    cases = [
        (layout, way, batch)
        for layout in args.layouts
        for batch in sorted({1, *args.batches})
        for way in WAYS
        if not (way == "forward" and batch > 1)
    ]
    samples: dict[tuple[str, str, int], list[tuple[float, float]]] = {c: [] for c in cases}
    for layout, way, batch in cases:  # warm-up, not timed
        WAYS[way](models[layout], [row] * batch, 4)
    for _ in range(args.repeats):
        for layout, way, batch in cases:
            runs = samples[(layout, way, batch)]
            runs.append(WAYS[way](models[layout], [row] * batch, args.tokens))

    results = []
    for (layout, way, batch), runs in samples.items():
        decode = statistics.median(d for _, d in runs)
        rate = batch * args.tokens / decode
        results.append(
            {
                "layout": layout,
                "packed_layers": getattr(models[layout].packing, "layers", 0),
                "way": way,
                "batch": batch,
                "prefill_s": statistics.median(p for p, _ in runs),
                "decode_s": decode,
                "tokens_per_s": rate,
                "fraction_of_ceiling": rate / ceiling if batch == 1 else None,
            }
        )
    profile_rows = step_profile(loaded, row)
    report = {
        "model": loaded.fingerprint,
        "dtype": loaded.dtype,
        "threads": torch.get_num_threads(),
        "bandwidth_gb_per_s": bandwidth / 1e9,
        "weight_mb": weight_bytes / 1e6,
        "ceiling_tokens_per_s": ceiling,
        "prompt_tokens": len(row),
        "new_tokens": args.tokens,
        "results": results,
        "batch1_step_profile": profile_rows,
    }
    rate = {(r["layout"], r["way"], r["batch"]): r["tokens_per_s"] for r in results}
    print(
        f"{loaded.fingerprint} in {loaded.dtype}. "
        f"Bandwidth {report['bandwidth_gb_per_s']:.1f} GB/s, weights {report['weight_mb']:.0f} MB"
        f" -> ceiling {ceiling:.1f} tok/s at batch 1; prompt {len(row)} tokens, "
        f"{args.tokens} new tokens per row, {report['threads']} threads, medians of "
        f"{args.repeats}.\n"
    )
    print(
        "| weights | way | batch | prefill s | decode s | generated tok/s | of ceiling "
        "| vs batch 1 | vs plain |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        share = f"{r['fraction_of_ceiling']:.0%}" if r["fraction_of_ceiling"] else ""
        key = (r["layout"], r["way"], r["batch"])
        versus = (
            f"{r['tokens_per_s'] / rate[(r['layout'], r['way'], 1)]:.2f}x"
            if r["batch"] > 1 and (r["layout"], r["way"], 1) in rate
            else ""
        )
        plain_key = ("plain", *key[1:])
        over_plain = (
            f"{r['tokens_per_s'] / rate[plain_key]:.2f}x"
            if r["layout"] != "plain" and plain_key in rate
            else ""
        )
        layers = (
            f"{r['layout']} ({r['packed_layers']} packed)" if r["packed_layers"] else r["layout"]
        )
        print(
            f"| {layers} | {r['way']} | {r['batch']} | {r['prefill_s']:.2f} | "
            f"{r['decode_s']:.2f} | {r['tokens_per_s']:.1f} | {share} | {versus} | {over_plain} |"
        )
    print(
        f"\nOne batch-1 decode step of the loop ({args.layouts[-1]} weights), by operator "
        "(self CPU time, 16 steps):\n"
    )
    print("| operator | calls | self ms | share |")
    print("|---|---:|---:|---:|")
    for p in profile_rows:
        print(f"| {p['op']} | {p['calls']} | {p['self_ms']:.1f} | {p['share']:.0%} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
