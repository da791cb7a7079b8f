"""Benchmark: one judge card in several weight formats: speed, memory and how far they drift.

Run it with ``.venv/bin/python -m benchmarks.weights --card qwen2.5-coder-1.5b-instruct
[--variants float32 bfloat16 int8-pc int8-pc-keep] [--threads 2] [--tokens 16]``.
It prints a Markdown table, one row per variant, and writes
``benchmarks/results/weights.json`` (git-ignored; ``--out`` picks another path).

The variants (each loads the card through ``TransformersJudge(card, dtype=..., threads=T)``):

* ``float32``: the CPU default, and the reference the others are compared with;
* ``bfloat16``: the real bfloat16 load path. A CPU without native bfloat16 (AVX512-BF16
  or AMX) only emulates it, slowly: that figure is the point of the row;
* ``int8-pc``: float32, then ``torch.ao.quantization.quantize_dynamic`` with
  ``per_channel_dynamic_qconfig`` (int8 weights, one scale per output channel, activations
  quantized on the fly) on every ``nn.Linear`` but ``lm_head``;
* ``int8-pc-keep``: the same, but every ``down_proj`` and every Linear of the first two
  and last two decoder layers stay float32 (places often found most sensitive to rounding).

Each variant runs in its own child process (so its peak RSS, ``ru_maxrss``, is its own),
one after the other, float32 first, and measures:

1. **load s**: ``judge.load()``, plus the quantization for the int8 variants;
2. **prompt tokens/s**: 12 verdict label reads (``judge.score_labels``) of real training
   examples, built as ``tools/read_training.py`` builds them (the first 6 relevancy and
   first 6 similarity examples by id, kind ``pair``). One warm-up call first, untimed,
   reads one further example of each scorer, so both system blocks are in the judge's
   prefix cache (quantizing happens before it, so the cache holds the variant's own keys
   and values); the figure is the tokens the model ran (``usage.prompt_tokens``: each
   read's own tokens) over the seconds of the 12 reads;
3. **last-position logits**: ``model(input_ids=...)`` on 3 fixed chat prompts of about 150
   tokens, the full-vocabulary logits at the last position, in float32;
4. **decode tokens/s**: from one prompt of about 200 tokens, a bare greedy loop of
   ``model(input_ids=token, cache=cache, use_cache=True)`` (transformers 5's name for
   ``past_key_values``) for ``--tokens`` steps at
   batch 1 and at batch 8 (the same prompt 8 times), new tokens over the loop's seconds;
   the prompt's pass is not timed. Batch 8 starts from the batch-1 prompt pass's cache
   repeated 8 times (identical rows: the same cache a batch-8 pass would give, without
   8 times the prompt work);
5. **peak RSS GB**: ``resource.getrusage(RUSAGE_SELF).ru_maxrss`` at the end. The
   loader memory-maps float32 weights, so their pages count as they are touched, as file
   pages (clean: the kernel may drop them and read them again); a line under the table
   splits each child's RSS at the end into anonymous and file-backed memory. The int8
   variants load float32 first and quantize it, so their peak includes float32's pages.

The change columns compare each variant with float32 on the same inputs: the largest
absolute change of any last-position logit (3 prompts x vocabulary), the median absolute
change of the 12 reads' label log-probabilities (every label of every read; the judge
rounds them to 4 decimals), and how many of the 12 reads pick another most likely label.
Without a float32 run they say "-". A child that fails is a row marked ``failed``, its
error's tail printed under the table, and the script then exits with status 1.

Children exchange data through a temporary folder (JSON and ``.npy``, no pickle). This
machine is shared and noisy: compare figures from the same run. Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "weights.json"
VARIANTS = ("float32", "bfloat16", "int8-pc", "int8-pc-keep")
READS_PER_SCORER = 6
EDGE_LAYERS = 2
"""Decoder layers kept in float at each end by ``int8-pc-keep``."""

SYSTEM = "You are a careful assistant. Answer plainly and briefly."
CHAT_PROMPTS = (
    (
        "A user asked how to make a laptop battery last longer, and the answer was: lower "
        "the screen brightness, close programs you do not use, avoid keeping the battery "
        "at full charge all the time, and keep the laptop cool because heat wears batteries "
        "out. Is every statement of that answer relevant to the question? Go through the "
        "statements one by one and say for each whether it helps the user, then give a "
        "verdict on the whole answer in one word: yes, partly or no."
    ),
    (
        "Here is a Python function:\n\n"
        "def chunks(items, size):\n"
        "    out = []\n"
        "    for start in range(0, len(items), size):\n"
        "        out.append(items[start:start + size])\n"
        "    return out\n\n"
        "It splits a list into pieces of at most `size` items. What does it return for an "
        "empty list, and what happens when size is zero? Suggest a fix for the second case "
        "and write a short docstring for the function, then say whether a generator would "
        "be a better fit for large inputs."
    ),
    (
        "Compare these two answers to the question 'Who wrote the novel Middlemarch?'. "
        "The reference answer says: Middlemarch was written by Mary Ann Evans, who "
        "published under the pen name George Eliot, and it appeared in eight parts in "
        "1871 and 1872. The answer to grade says: George Eliot wrote it, in the early "
        "1870s. Does the answer say the same thing as the reference, part of it, or "
        "something else? Name each fact of the reference and say whether the answer "
        "keeps it, then give one word: exact, semantic, partial or missing."
    ),
)
DECODE_PROMPT = (
    "Write a short report for a team that runs a small web service. Over the last week the "
    "service answered about two million requests; the median response time was 40 "
    "milliseconds, but the slowest one percent of requests took more than two seconds, "
    "almost all of them between two and four in the morning, when the nightly backup runs "
    "on the same machine as the database. Memory use grew slowly from 3 to 5 gigabytes over "
    "the week and fell back after each restart. Two deployments went out, one of which was "
    "rolled back after an hour because a configuration file pointed at the wrong cache "
    "server. Nobody was paged at night. Explain in plain words what the numbers say, which "
    "problem to fix first and why, what to watch next week, and what the team should not "
    "worry about yet. Keep it to three short paragraphs, without headings or lists, and end "
    "with a one-sentence summary that a manager could read alone."
)


class Changes(NamedTuple):
    """How far one variant's outputs moved from float32's on the same inputs."""

    max_logit: float
    median_logprob: float
    flips: int
    reads: int


# ---------------------------------------------------------------------------- prompts


def verdict_reads() -> list[dict[str, Any]]:
    """The label reads: 6 + 6 measured ones, then one warm-up read per scorer.

    Each is ``{"scorer", "id", "messages", "labels", "warm_up"}``, built as
    ``tools/read_training.py`` builds the reads the cards' models take.
    """
    from tools.read_training import pool, shipped_read

    reads = []
    for scorer, examples in pool().items():
        first = sorted(examples, key=lambda e: e["id"])[: READS_PER_SCORER + 1]
        for rank, example in enumerate(first):
            messages, read_labels = shipped_read(scorer, example)
            reads.append(
                {
                    "scorer": scorer,
                    "id": example["id"],
                    "messages": list(messages),
                    "labels": read_labels,
                    "warm_up": rank == READS_PER_SCORER,
                }
            )
    return reads


def chat_ids(tokenizer: Any, user: str) -> list[int]:
    """The token ids of one user message after ``SYSTEM``, chat-templated, ready to answer."""
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return [int(i) for i in tokenizer(text, add_special_tokens=False)["input_ids"]]


# ------------------------------------------------------------------------------ child


def quantize(model: Any, keep_edges: bool) -> int:
    """Quantize the model's Linears in place (int8, per channel); return how many.

    ``lm_head`` always stays float; with ``keep_edges`` so do every ``down_proj`` and every
    Linear of the first and last ``EDGE_LAYERS`` decoder layers.
    """
    import torch
    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

    layers = int(model.config.num_hidden_layers)
    edges = {*range(EDGE_LAYERS), *range(layers - EDGE_LAYERS, layers)}

    def kept(name: str) -> bool:
        if name.endswith("lm_head"):
            return True
        if not keep_edges:
            return False
        parts = name.split(".")
        in_edge = "layers" in parts and int(parts[parts.index("layers") + 1]) in edges
        return in_edge or name.endswith("down_proj")

    spec = {
        name: per_channel_dynamic_qconfig
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.Linear) and not kept(name)
    }
    quantize_dynamic(model, spec, dtype=torch.qint8, inplace=True)  # type: ignore[no-untyped-call]
    return len(spec)


def load_variant(card: str, variant: str, threads: int) -> tuple[Any, Any, dict[str, Any]]:
    """(judge, loaded model, facts about the load) for one variant, timed to the end."""
    from offline_scorer import TransformersJudge

    began = time.perf_counter()
    judge = TransformersJudge(
        card, dtype="bfloat16" if variant == "bfloat16" else "float32", threads=threads
    )
    loaded = judge.load()
    quantized = quantize(loaded.model, variant == "int8-pc-keep") if "int8" in variant else 0
    facts = {
        "load_s": time.perf_counter() - began,
        "dtype": loaded.dtype,
        "fingerprint": loaded.fingerprint,
        "quantized_linears": quantized,
        "rss_after_load_gb": current_rss_gb(),
    }
    return judge, loaded, facts


def read_labels(judge: Any, reads: list[dict[str, Any]]) -> dict[str, Any]:
    """Warm up, then time the measured reads; their tokens, seconds and log-probs."""
    warm = [r for r in reads if r["warm_up"]]
    timed = [r for r in reads if not r["warm_up"]]
    check_answers(
        warm, judge.score_labels([r["messages"] for r in warm], [r["labels"] for r in warm])
    )
    began = time.perf_counter()
    answers = judge.score_labels([r["messages"] for r in timed], [r["labels"] for r in timed])
    seconds = time.perf_counter() - began
    check_answers(timed, answers)
    tokens = sum(a.usage.prompt_tokens for a in answers)
    return {
        "reads": len(timed),
        "read_tokens": tokens,
        "read_s": seconds,
        "prompt_tokens_per_s": tokens / seconds,
        "label_logprobs": [list(a.value.logprobs) for a in answers],
        "labels": [list(a.value.labels) for a in answers],
        "ids": [r["id"] for r in timed],
    }


def check_answers(reads: list[dict[str, Any]], answers: list[Any]) -> None:
    """Raise, naming the reads, when any label read failed (a row must not go missing)."""
    failed = [f"{r['scorer']} {r['id']}: {a.error}" for r, a in zip(reads, answers) if not a.ok]
    if failed:
        raise RuntimeError("label reads failed:\n" + "\n".join(failed))


def last_logits(loaded: Any) -> tuple[Any, list[int]]:
    """The last position's full-vocabulary logits (float32) of each chat prompt, and the
    prompts' lengths."""
    import numpy as np
    import torch

    rows, lengths = [], []
    with torch.inference_mode():
        for user in CHAT_PROMPTS:
            ids = chat_ids(loaded.tokenizer, user)
            out = loaded.model(input_ids=torch.tensor([ids]), logits_to_keep=1)
            rows.append(out.logits[0, -1].float().numpy())
            lengths.append(len(ids))
    return np.stack(rows), lengths


def decode_rates(model: Any, ids: list[int], tokens: int) -> dict[str, float]:
    """New tokens per second of a bare greedy loop at batch 1 and batch 8 (prompt pass
    untimed; batch 8 starts from the batch-1 cache repeated 8 times)."""
    import copy

    import torch

    with torch.inference_mode():
        out = model(input_ids=torch.tensor([ids]), use_cache=True, logits_to_keep=1)
        first = out.logits[:, -1:].argmax(-1)
        # Copied before the batch-1 loop grows it in place.
        cache8 = copy.deepcopy(out.cache)
        cache8.batch_repeat_interleave(8)
        rates = {}
        for batch, cache in ((1, out.cache), (8, cache8)):
            token = first.repeat(batch, 1)
            began = time.perf_counter()
            for _ in range(tokens):
                step = model(input_ids=token, cache=cache, use_cache=True, logits_to_keep=1)
                cache, token = step.cache, step.logits[:, -1:].argmax(-1)
            rates[f"decode_batch{batch}_tokens_per_s"] = (
                batch * tokens / (time.perf_counter() - began)
            )
    return rates


def current_rss_gb(kind: str = "VmRSS") -> float:
    """This process's resident memory now, from /proc/self/status (Linux; NaN elsewhere):
    ``VmRSS`` in all, ``RssAnon`` (its own memory) or ``RssFile`` (mapped files' pages)."""
    try:
        lines = Path("/proc/self/status").read_text().splitlines()
    except OSError:
        return float("nan")
    fields = dict(line.split(":", 1) for line in lines if ":" in line)
    if kind not in fields:
        return float("nan")
    return int(fields[kind].split()[0]) * 1024 / 1e9


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def run_variant(args: argparse.Namespace) -> None:
    """The child: measure one variant and write ``<variant>.json`` and ``.logits.npy``."""
    import numpy as np

    variant, folder = args.child, Path(args.folder)
    reads = json.loads((folder / "reads.json").read_text(encoding="utf-8"))
    judge, loaded, result = load_variant(args.card, variant, args.threads)
    log(f"{variant}: loaded in {result['load_s']:.1f} s")
    result.update(read_labels(judge, reads))
    log(f"{variant}: {result['reads']} label reads in {result['read_s']:.1f} s")
    logits, lengths = last_logits(loaded)
    np.save(folder / f"{variant}.logits.npy", logits)
    result["chat_prompt_tokens"] = lengths
    decode_ids = chat_ids(loaded.tokenizer, DECODE_PROMPT)
    result["decode_prompt_tokens"] = len(decode_ids)
    result.update(decode_rates(loaded.model, decode_ids, args.tokens))
    log(f"{variant}: decoded")
    result["peak_rss_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9
    # Float32 weights stay a memory-mapped file: their pages count in RSS as file pages
    # (clean, which the kernel can drop and read again), converted ones as anonymous.
    result["rss_end_anon_gb"] = current_rss_gb("RssAnon")
    result["rss_end_file_gb"] = current_rss_gb("RssFile")
    (folder / f"{variant}.json").write_text(json.dumps(result, indent=2), encoding="utf-8")


# ----------------------------------------------------------------------------- parent


def run_child(variant: str, args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    """Run one variant in a fresh process; its figures, or ``{"error": tail of its log}``."""
    command = [sys.executable, "-m", "benchmarks.weights", "--card", args.card]
    command += ["--threads", str(args.threads), "--tokens", str(args.tokens)]
    command += ["--child", variant, "--folder", str(folder)]
    log_path = folder / f"{variant}.log"
    log(f"  {variant}: running in a fresh process ...")
    began = time.perf_counter()
    with log_path.open("wb") as sink:
        code = subprocess.run(command, stdout=sink, stderr=subprocess.STDOUT).returncode
    seconds = time.perf_counter() - began
    result_path = folder / f"{variant}.json"
    if code != 0 or not result_path.is_file():
        # A negative code is a signal: -9 is most often the kernel's out-of-memory killer.
        how = f"killed by signal {-code}" if code < 0 else f"exit {code}"
        tail = log_path.read_text(encoding="utf-8", errors="replace")[-3000:]
        log(f"  {variant}: FAILED ({how}) after {seconds:.0f} s")
        return {"error": f"{how}\n{tail}", "child_s": seconds}
    result: dict[str, Any] = json.loads(result_path.read_text(encoding="utf-8"))
    result["child_s"] = seconds
    log(f"  {variant}: {seconds:.0f} s")
    return result


def compare(folder: Path, base: dict[str, Any], variant: str, other: dict[str, Any]) -> Changes:
    """How far ``variant`` moved from float32 (``base``) on the same inputs."""
    import numpy as np

    reference = np.load(folder / "float32.logits.npy")
    logits = np.load(folder / f"{variant}.logits.npy")
    old, new = base["label_logprobs"], other["label_logprobs"]
    changes = [abs(a - b) for row_a, row_b in zip(old, new) for a, b in zip(row_a, row_b)]
    flips = sum(argmax(a) != argmax(b) for a, b in zip(old, new))
    return Changes(
        max_logit=float(np.max(np.abs(logits - reference))),
        median_logprob=float(statistics.median(changes)),
        flips=flips,
        reads=len(old),
    )


def argmax(values: list[float]) -> int:
    """The index of the largest value (the first one on a tie)."""
    return max(range(len(values)), key=values.__getitem__)


def table_row(variant: str, result: dict[str, Any], changes: Changes | None) -> str:
    """One Markdown row of the table."""
    if "error" in result:
        return f"| {variant} | failed ({result['error'].splitlines()[0]}) | | | | | | | |"
    figures = [
        f"{result['load_s']:.1f}",
        f"{result['prompt_tokens_per_s']:.1f}",
        f"{result['decode_batch1_tokens_per_s']:.2f}",
        f"{result['decode_batch8_tokens_per_s']:.2f}",
    ]
    if changes is None or variant == "float32":
        figures += ["-", "-", "-"]
    else:
        figures += [
            f"{changes.max_logit:.3g}",
            f"{changes.median_logprob:.3g}",
            f"{changes.flips}/{changes.reads}",
        ]
    return f"| {variant} | {' | '.join(figures)} | {result['peak_rss_gb']:.2f} |"


def command_line() -> str:
    """This run's command as it would be typed from the repository root."""
    python = os.path.relpath(sys.executable) if sys.executable.startswith(os.getcwd()) else "python"
    return " ".join([python, "-m", "benchmarks.weights", *sys.argv[1:]])


def machine() -> dict[str, Any]:
    """What the figures depend on: CPU capability, cores, library versions."""
    import torch
    import transformers

    return {
        "platform": platform.platform(),
        "processor": platform.processor(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "cpus": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "quantized_engine": torch.backends.quantized.engine,
    }


HEADER = (
    "| variant | load s | prompt tokens/s | decode tokens/s batch 1 | decode tokens/s batch 8 "
    "| max abs change of a last-position logit vs float32 "
    "| median abs change of the label log-probs vs float32 "
    "| label argmax flips vs float32 | peak RSS GB |\n"
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
)


def measure(args: argparse.Namespace, variants: list[str]) -> dict[str, Any]:
    """Run every variant's child and compare each with float32; the report."""
    began = time.perf_counter()
    results: dict[str, dict[str, Any]] = {}
    changes: dict[str, Changes | None] = {}
    with tempfile.TemporaryDirectory(prefix="weights-bench-") as name:
        folder = Path(name)
        reads = verdict_reads()
        (folder / "reads.json").write_text(json.dumps(reads), encoding="utf-8")
        for variant in variants:
            results[variant] = run_child(variant, args, folder)
        base = results.get("float32")
        reference = base if base is not None and "error" not in base else None
        for variant, result in results.items():
            changes[variant] = None
            if reference is not None and "error" not in result:
                changes[variant] = compare(folder, reference, variant, result)
    for variant, change in changes.items():
        if change is not None:
            results[variant]["vs_float32"] = change._asdict()
    return {
        "command": command_line(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": machine(),
        "card": args.card,
        "threads": args.threads,
        "new_tokens": args.tokens,
        "label_reads": [
            {"scorer": r["scorer"], "id": r["id"], "warm_up": r["warm_up"]} for r in reads
        ],
        "results": results,
        "table": [HEADER, *(table_row(v, results[v], changes[v]) for v in variants)],
        "wall_s": time.perf_counter() - began,
    }


def print_report(report: dict[str, Any], out: Path) -> None:
    """The table, then what it ran on, then any child's error."""
    facts = report["machine"]
    print(f"## Weight formats of {report['card']}, {report['threads']} threads\n")
    print("\n".join(report["table"]))
    print(f"\nCommand: `{report['command']}`")
    print(
        f"CPU: {facts['cpu_capability']}, {facts['cpus']} cores ({facts['cpus_usable']} usable),"
        f" {facts['processor'] or facts['platform']}; torch {facts['torch']}, transformers "
        f"{facts['transformers']}; decode {report['new_tokens']} new tokens per row."
    )
    done = [(v, r) for v, r in report["results"].items() if "error" not in r]
    if done:
        print(
            "Resident at the end, anonymous + file-backed GB (float32 weights are a "
            "memory-mapped file): "
            + ", ".join(
                f"{v} {r['rss_end_anon_gb']:.2f} + {r['rss_end_file_gb']:.2f}" for v, r in done
            )
        )
    for variant, result in report["results"].items():
        if "error" in result:
            print(f"\n### {variant} failed\n\n```\n{result['error']}\n```")
    print(f"\nSaved {out} ({report['wall_s']:.0f} s).")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--card", default="qwen2.5-coder-1.5b-instruct")
    parser.add_argument(
        "--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS), help="(float32 first)"
    )
    parser.add_argument("--threads", type=int, default=2, help="torch threads in each child")
    parser.add_argument("--tokens", type=int, default=16, help="decode steps per row")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--child", choices=VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        run_variant(args)
        return
    # float32 runs first: it is the reference every other variant is compared with.
    variants = [v for v in VARIANTS if v in args.variants]
    report = measure(args, variants)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2), encoding="utf-8")
    print_report(report, args.out)
    if any("error" in r for r in report["results"].values()):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
