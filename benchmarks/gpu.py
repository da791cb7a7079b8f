"""Benchmark: a card's model on a CUDA GPU, in bfloat16 with large batches (issue 22, item 5).

The GPU machines this project may borrow have no network and take at most 64 MiB along:
they cannot install a card's part wheels, and the weights cannot travel. What this
benchmark measures does not depend on the weights' values (a forward pass of one shape does
the same work whatever its numbers), so it runs in two steps:

1. ``export``, here::

       .venv/bin/python -m benchmarks.gpu export --card qwen2.5-coder-1.5b-instruct \\
           --to .gpu/qwen2.5-coder-1.5b-instruct

   writes the card's model shape (``config.json``, ``generation_config.json``), its
   tokenizer with its chat template, and ``reads.json``: the first ``--reads`` relevancy and
   similarity verdict reads of train-data (and one warm-up read each), built as
   ``benchmarks/read_batching.py`` builds them. No weights: a few MB.

2. ``run``, on the GPU machine::

       python -m benchmarks.gpu run --shape .gpu/qwen2.5-coder-1.5b-instruct \\
           [--dtypes bfloat16 float32] [--batches 1 8 64 256] [--out gpu.json]

   builds a model of that shape with seeded random weights, saves it as safetensors with
   the exported tokenizer, and loads it with ``offline_scorer.load_model(folder,
   device="cuda", dtype=...)``, so our device and dtype choice and ``device_map="auto"`` run
   for real. Per dtype it measures, after one untimed warm-up of each case, medians of
   ``--repeats``:

   * **bandwidth**: a 1 GiB tensor copied on the device (read plus write bytes), and the
     batch-1 decode ceiling it allows: bandwidth / bytes of weights;
   * **prompt tokens/s**: one forward pass over B copies of a real reason prompt (about
     300 tokens, ``benchmarks/decode_speed.py``'s), only the last position's logits;
   * **decode tokens/s, bare**: ``--tokens`` greedy steps of ``model(...)`` with
     transformers' cache on B rows, after the prompt's pass (not timed);
   * **decode tokens/s, ours**: the judge's decode loop (``loop_decode``, no end of
     sequence honoured) on the same B rows, prompt pass included in its own column;
   * **label reads**: every exported read through ``TransformersJudge.score_labels``, at
     each ``--read-sizes`` rows per pass (``read_batch_size``): reads/s, and how far the
     batched reads move from one row per pass (largest change of a label log-probability,
     label flips);
   * **constrained JSON**: B verdict prompts answered through
     ``TransformersJudge.generate_json`` with a two-field schema (a label, a reason string
     held to the judge's ``max_string_tokens``): generated tokens/s, and how many answers
     validated;
   * **judge calls**: every exported prompt through the judge's ``generate_json`` and
     ``generate_text`` at ``--judge-sizes`` prompts per pass and at its default for the
     device (``recommended_accelerator_batch_size`` on a GPU; 64 for a folder without a
     card, as here): generated tokens/s, and how many answers equal the first size's;
   * **peak GPU memory**: ``torch.cuda.max_memory_allocated`` over the dtype's run.

Random weights mean no agreement figure here: a random model ranks answers at chance. The
label flips between batch sizes are still a fair test of rounding, and the speed is the
real shape's. ``--device cpu --layers 2`` runs the same code on a CPU with a 2-layer copy of
the shape, as the test suite does; nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "gpu.json"
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".gguf")


# ------------------------------------------------------------------------------- export


def export(card: str, target: Path, reads: int) -> dict[str, Any]:
    """Write ``card``'s model shape, tokenizer and ``reads`` + 1 reads per scorer to ``target``."""
    from benchmarks.read_batching import reads as build_reads
    from offline_scorer.toolkit import model_folder

    folder = model_folder(card)
    target.mkdir(parents=True, exist_ok=True)
    copied = []
    for path in sorted(folder.iterdir()):
        if path.is_file() and not path.name.endswith(WEIGHT_SUFFIXES):
            shutil.copy2(path, target / path.name)
            copied.append(path.name)
    if "config.json" not in copied:
        raise SystemExit(f"{folder} holds no config.json: cannot export the shape of {card}.")
    batch = build_reads(reads)
    (target / "reads.json").write_text(json.dumps(batch) + "\n", encoding="utf-8")
    summary = {"card": card, "from": str(folder), "files": [*copied, "reads.json"]}
    (target / "export.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return summary


# ------------------------------------------------------------------------------- timing


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _timed(device: str, work: Callable[[], Any]) -> tuple[float, Any]:
    _sync(device)
    began = time.perf_counter()
    out = work()
    _sync(device)
    return time.perf_counter() - began, out


def bandwidth(device: str, repeats: int) -> float:
    """Copy bandwidth on ``device`` in bytes/s: read plus write over the median copy."""
    import torch

    size = (1 << 30) // 4 if device.startswith("cuda") else (256 << 20) // 4
    source = torch.ones(size, device=device)
    target = torch.empty(size, device=device)
    times = [_timed(device, lambda: target.copy_(source))[0] for _ in range(repeats + 1)]
    return 2 * source.numel() * source.element_size() / statistics.median(times[1:])


def build_model(shape: Path, folder: Path, dtype: str, device: str, layers: int | None) -> None:
    """A model of ``shape``'s config with seeded random weights, saved in ``folder``."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(shape, local_files_only=True)
    if layers is not None:
        config.num_hidden_layers = layers
        if getattr(config, "layer_types", None):
            config.layer_types = config.layer_types[:layers]
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype))  # type: ignore[no-untyped-call]
    from offline_scorer.toolkit import quiet_transformers

    with quiet_transformers():
        model.save_pretrained(folder)
    del model
    for path in shape.iterdir():
        if path.is_file() and path.name not in ("config.json", "reads.json", "export.json"):
            shutil.copy2(path, folder / path.name)


def prompt_pass(loaded: Any, row: list[int], batch: int) -> float:
    """Seconds of one forward pass over ``batch`` copies of ``row`` (last logits only)."""
    import torch

    ids = torch.tensor([row] * batch, device=loaded.device)
    with torch.inference_mode():
        seconds, _ = _timed(loaded.device, lambda: loaded.model(input_ids=ids, logits_to_keep=1))
    return seconds


def bare_decode(loaded: Any, row: list[int], batch: int, tokens: int) -> float:
    """Seconds of ``tokens`` greedy steps of ``model(...)`` on ``batch`` rows (prompt untimed)."""
    import torch

    model = loaded.model
    ids = torch.tensor([row] * batch, device=loaded.device)
    with torch.inference_mode():
        out = model(input_ids=ids, use_cache=True, logits_to_keep=1)
        state = {"cache": out.cache, "token": out.logits[:, -1:].argmax(-1)}

        def steps() -> None:
            for _ in range(tokens):
                step = model(
                    input_ids=state["token"], cache=state["cache"], use_cache=True, logits_to_keep=1
                )
                state["cache"], state["token"] = step.cache, step.logits[:, -1:].argmax(-1)

        seconds, _ = _timed(loaded.device, steps)
    return seconds


def loop_decode_time(loaded: Any, row: list[int], batch: int, tokens: int) -> tuple[float, float]:
    """(prompt-pass seconds, decode seconds) of our decode loop on ``batch`` rows."""
    from offline_scorer.toolkit import LoopRow, loop_decode

    def run(count: int) -> Any:
        return loop_decode(
            loaded.model, [LoopRow(list(row), count) for _ in range(batch)], eos_ids=[], pad_id=0
        )

    prefill, _ = _timed(loaded.device, lambda: run(1))
    total, out = _timed(loaded.device, lambda: run(tokens + 1))
    if any(len(ids) != tokens + 1 for ids, _ in out):
        raise RuntimeError("the decode loop stopped a row early with no end of sequence")
    return prefill, total - prefill


# ------------------------------------------------------------------------------- judge


class Verdict(BaseModel):
    """The constrained-JSON case's schema: a label and a short reason."""

    verdict: Literal["yes", "no", "unsure"]
    reason: str


def label_reads(
    loaded: Any, batch: dict[str, Any], sizes: list[int], repeats: int
) -> dict[str, Any]:
    """Every exported read at each rows-per-pass size: reads/s and changes from the first size."""
    from benchmarks.read_batching import changes, timed_reads
    from offline_scorer import GenerationSettings, TransformersJudge

    judges = {
        size: TransformersJudge(loaded, settings=GenerationSettings(read_batch_size=size))
        for size in sizes
    }
    for judge in judges.values():
        for scorer in batch:
            judge.score_labels(batch[scorer]["messages"][-1:], batch[scorer]["labels"][-1:])
    rounds = [{size: timed_reads(judges[size], batch) for size in sizes} for _ in range(repeats)]
    base = sizes[0]
    out = {}
    for size in sizes:
        out[str(size)] = {
            "reads": len(rounds[0][size]["values"]),
            "reads_per_s": statistics.median(
                len(r[size]["values"]) / r[size]["seconds"] for r in rounds
            ),
            "read_tokens_per_s": statistics.median(
                r[size]["tokens"] / r[size]["seconds"] for r in rounds
            ),
            "changes": changes(rounds[0][base]["values"], rounds[0][size]["values"]),
            "same_every_round": all(r[size]["values"] == rounds[0][size]["values"] for r in rounds),
        }
    return out


def constrained_json(loaded: Any, batch: dict[str, Any], rows: int) -> dict[str, Any]:
    """``rows`` verdict prompts answered as :class:`Verdict` in one judge call."""
    from offline_scorer import GenerationSettings, TransformersJudge

    messages = [m for scorer in sorted(batch) for m in batch[scorer]["messages"]]
    prompts = [messages[i % len(messages)] for i in range(rows)]
    judge = TransformersJudge(loaded, settings=GenerationSettings(batch_size=rows))
    judge.generate_json(prompts[:1], Verdict)  # compiles the schema's index, untimed
    seconds, answers = _timed(loaded.device, lambda: judge.generate_json(prompts, Verdict))
    generated = sum(a.usage.generated_tokens for a in answers)
    failed = [str(a.error) for a in answers if not a.ok]
    return {
        "rows": rows,
        "seconds": seconds,
        "generated_tokens": generated,
        "tokens_per_s": generated / seconds,
        "valid": rows - len(failed),
        "first_error": failed[0] if failed else None,
    }


def judge_passes(loaded: Any, batch: dict[str, Any], sizes: list[int | None]) -> dict[str, Any]:
    """Every exported prompt through the judge's JSON and free-text calls, at each prompts
    per pass (None: the judge's default for the device): generated tokens/s, and how many
    answers equal the first size's."""
    from offline_scorer import GenerationSettings, TransformersJudge

    prompts = [m for scorer in sorted(batch) for m in batch[scorer]["messages"]]
    out: dict[str, Any] = {}
    first: dict[str, list[Any]] = {}
    for size in sizes:
        judge = TransformersJudge(loaded, settings=GenerationSettings(batch_size=size))
        resolved = judge.settings.prompts_per_pass(loaded.device, judge.model_card)
        judge.generate_json(prompts[:1], Verdict)  # the schema's index, untimed
        row: dict[str, Any] = {"prompts_per_pass": resolved, "default": size is None}
        for kind, call in (
            ("json", lambda j=judge: j.generate_json(prompts, Verdict)),
            ("text", lambda j=judge: j.generate_text(prompts)),
        ):
            seconds, answers = _timed(loaded.device, call)
            values = [a.value if a.ok else None for a in answers]
            first.setdefault(kind, values)
            generated = sum(a.usage.generated_tokens for a in answers)
            row[kind] = {
                "seconds": seconds,
                "generated_tokens": generated,
                "tokens_per_s": generated / seconds,
                "failed": sum(not a.ok for a in answers),
                "same_as_first": sum(a == b for a, b in zip(values, first[kind])),
            }
        out["default" if size is None else str(size)] = row
    return out


# ------------------------------------------------------------------------------- run


def run_dtype(args: argparse.Namespace, dtype: str, batch: dict[str, Any]) -> dict[str, Any]:
    import torch

    from benchmarks.decode_speed import prompt_ids
    from offline_scorer import load_model
    from offline_scorer.toolkit import pick_device

    device = pick_device(args.device)
    cuda = device.startswith("cuda")
    # "auto" is resolved by load_model; the random weights are built in bfloat16 then
    built = "bfloat16" if dtype == "auto" else dtype
    with tempfile.TemporaryDirectory(prefix="gpu-bench-") as scratch:
        folder = Path(scratch) / "model"
        build_seconds, _ = _timed(
            device, lambda: build_model(args.shape, folder, built, device, args.layers)
        )
        if cuda:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        load_seconds, loaded = _timed(
            device,
            lambda: load_model(folder, device=args.device, dtype=dtype),  # type: ignore[arg-type]
        )
        # the saved files, not the parameters: a layer packed for a CPU holds no parameter
        weight_bytes = sum(f.stat().st_size for f in folder.glob("*.safetensors"))
    copy = bandwidth(loaded.device, args.repeats)
    row = prompt_ids(loaded)
    print(
        f"{dtype}: built in {build_seconds:.1f} s, loaded in {load_seconds:.1f} s on "
        f"{loaded.device} ({loaded.dtype}); {weight_bytes / 1e9:.2f} GB of weights, "
        f"copy bandwidth {copy / 1e9:.0f} GB/s",
        flush=True,
    )
    cases: dict[int, dict[str, list[float]]] = {
        b: {"prompt": [], "bare": [], "loop_prefill": [], "loop": []} for b in args.batches
    }
    for b in args.batches:  # warm-up, untimed
        prompt_pass(loaded, row, b)
        bare_decode(loaded, row, b, 2)
        loop_decode_time(loaded, row, b, 2)
    for _ in range(args.repeats):
        for b in args.batches:
            cases[b]["prompt"].append(prompt_pass(loaded, row, b))
            cases[b]["bare"].append(bare_decode(loaded, row, b, args.tokens))
            prefill, decode = loop_decode_time(loaded, row, b, args.tokens)
            cases[b]["loop_prefill"].append(prefill)
            cases[b]["loop"].append(decode)
    ceiling = copy / weight_bytes
    batches = {}
    for b, samples in cases.items():
        median = {key: statistics.median(values) for key, values in samples.items()}
        batches[str(b)] = {
            "prompt_tokens_per_s": b * len(row) / median["prompt"],
            "bare_decode_tokens_per_s": b * args.tokens / median["bare"],
            "loop_decode_tokens_per_s": b * args.tokens / median["loop"],
            "loop_prompt_pass_s": median["loop_prefill"],
        }
        print(f"  batch {b}: {batches[str(b)]}", flush=True)
    reads = label_reads(loaded, batch, args.read_sizes, args.repeats)
    print(f"  label reads: {reads}", flush=True)
    constrained = constrained_json(loaded, batch, args.json_rows)
    print(f"  constrained JSON: {constrained}", flush=True)
    passes = judge_passes(loaded, batch, [*args.judge_sizes, None])
    print(f"  judge calls: {passes}", flush=True)
    report = {
        "dtype": loaded.dtype,
        "device": loaded.device,
        "build_s": build_seconds,
        "load_s": load_seconds,
        "weight_gb": weight_bytes / 1e9,
        "bandwidth_gb_per_s": copy / 1e9,
        "ceiling_tokens_per_s": ceiling,
        "batch1_bare_of_ceiling": batches[str(args.batches[0])]["bare_decode_tokens_per_s"]
        / ceiling
        if args.batches[0] == 1
        else None,
        "prompt_tokens": len(row),
        "batches": batches,
        "label_reads": reads,
        "constrained_json": constrained,
        "judge_passes": passes,
        "peak_gpu_gb": torch.cuda.max_memory_allocated() / 1e9 if cuda else None,
    }
    del loaded
    if cuda:
        torch.cuda.empty_cache()
    return report


def environment(device: str) -> dict[str, Any]:
    import platform

    import torch
    import transformers

    out: dict[str, Any] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
    }
    if device.startswith("cuda"):
        props = torch.cuda.get_device_properties(0)
        out |= {
            "gpu": props.name,
            "gpu_memory_gb": props.total_memory / 1e9,
            "multiprocessors": props.multi_processor_count,
            "cuda": torch.version.cuda,
        }
    return out


def print_tables(report: dict[str, Any]) -> None:
    env = report["environment"]
    print(f"\n{report['card']} shape, random weights; {env}")
    print(f"prompt {report['runs'][0]['prompt_tokens']} tokens, {report['tokens']} decode steps\n")
    print(
        "| dtype | batch | prompt tok/s | decode tok/s, bare | decode tok/s, our loop "
        "| bare of ceiling |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for run in report["runs"]:
        for b, row in run["batches"].items():
            share = (
                f"{row['bare_decode_tokens_per_s'] / run['ceiling_tokens_per_s']:.0%}"
                if b == "1"
                else ""
            )
            print(
                f"| {run['dtype']} | {b} | {row['prompt_tokens_per_s']:.0f} | "
                f"{row['bare_decode_tokens_per_s']:.0f} | {row['loop_decode_tokens_per_s']:.0f} "
                f"| {share} |"
            )
    print("\n| dtype | rows per pass | reads/s | read tok/s | max change | label flips |")
    print("|---|---:|---:|---:|---:|---:|")
    for run in report["runs"]:
        for size, row in run["label_reads"].items():
            change = row["changes"]
            print(
                f"| {run['dtype']} | {size} | {row['reads_per_s']:.1f} | "
                f"{row['read_tokens_per_s']:.0f} | {change['max_abs']:.4f} | "
                f"{change['flips']}/{row['reads']} |"
            )
    print(
        "\n| dtype | weights GB | bandwidth GB/s | load s | peak GPU GB | JSON rows valid | JSON tok/s |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for run in report["runs"]:
        peak = f"{run['peak_gpu_gb']:.1f}" if run["peak_gpu_gb"] is not None else "-"
        js = run["constrained_json"]
        print(
            f"| {run['dtype']} | {run['weight_gb']:.2f} | {run['bandwidth_gb_per_s']:.0f} | "
            f"{run['load_s']:.1f} | {peak} | {js['valid']}/{js['rows']} | "
            f"{js['tokens_per_s']:.0f} |"
        )


def print_passes(report: dict[str, Any]) -> None:
    print(
        "\n| dtype | prompts per pass | JSON tok/s | JSON same as first | text tok/s "
        "| text same as first | failed |"
    )
    print("|---|---|---:|---:|---:|---:|---:|")
    for run in report["runs"]:
        for row in run["judge_passes"].values():
            size = f"{row['prompts_per_pass']}" + (" (default)" if row["default"] else "")
            js, tx = row["json"], row["text"]
            total = js["failed"] + tx["failed"]
            print(
                f"| {run['dtype']} | {size} | {js['tokens_per_s']:.0f} | {js['same_as_first']} "
                f"| {tx['tokens_per_s']:.0f} | {tx['same_as_first']} | {total} |"
            )


def run(args: argparse.Namespace) -> dict[str, Any]:
    from offline_scorer.toolkit import pick_device

    exported = json.loads((args.shape / "export.json").read_text(encoding="utf-8"))
    batch = json.loads((args.shape / "reads.json").read_text(encoding="utf-8"))
    report: dict[str, Any] = {
        "card": exported["card"],
        "environment": environment(pick_device(args.device)),
        "tokens": args.tokens,
        "repeats": args.repeats,
        "layers": args.layers,
        "runs": [],
    }
    for dtype in args.dtypes:
        report["runs"].append(run_dtype(args, dtype, batch))
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print_tables(report)
    print_passes(report)
    print(f"\nwritten: {args.out}")
    return report


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    steps = parser.add_subparsers(dest="step", required=True)
    out = steps.add_parser("export", help="here: write a card's shape, tokenizer and reads")
    out.add_argument("--card", default="qwen2.5-coder-1.5b-instruct")
    out.add_argument("--to", type=Path, required=True)
    out.add_argument("--reads", type=int, default=64, help="measured reads per scorer")
    go = steps.add_parser("run", help="on the GPU: measure a random-weight model of that shape")
    go.add_argument("--shape", type=Path, required=True, help="a folder written by export")
    go.add_argument("--device", default="cuda", help="cuda, cpu or auto (load_model's choice)")
    go.add_argument(
        "--dtypes", nargs="+", default=["bfloat16"], help="each loaded apart; auto: load_model's"
    )
    go.add_argument("--batches", type=int, nargs="+", default=[1, 8, 64, 256])
    go.add_argument("--read-sizes", type=int, nargs="+", default=[1, 16, 64])
    go.add_argument("--json-rows", type=int, default=64)
    go.add_argument(
        "--judge-sizes",
        type=int,
        nargs="*",
        default=[8],
        help="prompts per pass to time the judge's calls at, besides its default",
    )
    go.add_argument("--tokens", type=int, default=32, help="decode steps per row")
    go.add_argument("--repeats", type=int, default=3)
    go.add_argument("--layers", type=int, help="keep only this many decoder layers (a quick check)")
    go.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    if args.step == "export":
        print(json.dumps(export(args.card, args.to, args.reads), indent=2))
    else:
        run(args)


if __name__ == "__main__":
    main()
