"""Benchmark: model load time and constrained JSON generation throughput on this machine.

Run it with ``.venv/bin/python -m benchmarks.generation [--repeats N]``.
It prints Markdown tables to stdout and writes every figure to
``benchmarks/results/generation.json`` (git-ignored; ``--out`` picks another path).

What is measured
----------------
1. **Model load** of the embedded default model (``smollm2-135m-instruct``), each load in a
   separate, fresh Python subprocess whose ``OFFLINE_SCORER_CACHE`` points at a new
   temporary folder:

   * *first load*: the cache folder is empty, so the GGUF file is checked against its
     sha256, dequantized and saved as a safetensors copy, then loaded from that copy;
   * *second load*: same cache folder, so the model comes straight from the converted copy.

   Columns: ``load_model s`` is ``time.perf_counter()`` around
   ``offline_scorer.load_model(...)`` inside the child; ``load_seconds`` is what
   ``LoadedModel.load_seconds`` itself reports (nearly the same span); ``import s`` is the
   child's ``import offline_scorer``; ``process wall s`` is measured by the parent from
   starting the child to its exit, so it includes interpreter start-up, imports and teardown.
   ``from cache`` is ``LoadedModel.from_converted_cache`` (expected: no, then yes).

2. **Constrained JSON generation** with ``offline_scorer.TransformersJudge`` (model loaded
   from the converted cache of step 1). Eight short chat prompts ask the model to classify
   a food item into a pydantic schema with an enum field (``kind``) and a list of strings
   (``colors``, at most 3). One warm-up call is made first, so the one-off schema
   compilation is not timed. Then, ``--repeats`` times, alternating so both ways share the
   machine's noise:

   * *batch 1*: eight calls with one prompt each (one sequence per forward pass);
   * *batch 8*: one call with all eight prompts (``GenerationSettings(batch_size=8)``).

   Reported figures are medians over the repeats: wall seconds for the eight prompts,
   generated tokens (from the judge's call log), generated tokens per second, prompt tokens
   per second (prompt tokens / wall seconds), and the batch-8 / batch-1 ratio of generated
   tokens per second (above 1 means batching pays off). ``same outputs`` tells whether the
   batch-8 objects equal the one-by-one objects for every prompt (decoding is greedy; left
   padding may still change float rounding, and so occasionally a token).

How to read it
--------------
Figures depend on the CPU, its load and the thread count (printed under "Machine"); on a
shared machine compare medians from the same run, not single numbers across runs. Nothing
here asserts a time: it is a measurement, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from offline_scorer.judges import outcomes

MODEL = "smollm2-135m-instruct"
CACHE_ENV = "OFFLINE_SCORER_CACHE"
DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "generation.json"

CHILD_CODE = f"""
import json, time
started = time.perf_counter()
import offline_scorer
imported = time.perf_counter()
loaded = offline_scorer.load_model({MODEL!r})
done = time.perf_counter()
print("BENCH-RESULT " + json.dumps({{
    "import_seconds": imported - started,
    "load_model_seconds": done - imported,
    "load_seconds": loaded.load_seconds,
    "from_converted_cache": loaded.from_converted_cache,
    "device": loaded.device,
    "dtype": loaded.dtype,
}}))
"""

ITEMS = ["banana", "carrot", "strawberry", "broccoli", "bread", "lemon", "eggplant", "cheese"]
INSTRUCTION = (
    "You classify food items. Answer in JSON with the item's kind (fruit, vegetable or "
    "other) and up to three typical colors."
)


class FoodItem(BaseModel):
    """The schema the judge must fill: an enum field and a short list of strings."""

    kind: Literal["fruit", "vegetable", "other"]
    colors: list[str] = Field(max_length=3)


# ---------------------------------------------------------------------------- model load


@dataclass
class LoadRun:
    """One model load in a fresh subprocess."""

    label: str
    process_wall_seconds: float
    import_seconds: float
    load_model_seconds: float
    load_seconds: float
    from_converted_cache: bool
    device: str
    dtype: str


def load_in_subprocess(label: str, cache: Path) -> LoadRun:
    """Load the model in a new Python process using ``cache`` as the cache folder."""
    env = {**os.environ, CACHE_ENV: str(cache)}
    started = time.perf_counter()
    completed = subprocess.run(
        [sys.executable, "-c", CHILD_CODE], env=env, capture_output=True, text=True
    )
    wall = time.perf_counter() - started
    if completed.returncode != 0:
        raise RuntimeError(f"{label} failed:\n{completed.stderr[-3000:]}")
    line = next(row for row in completed.stdout.splitlines() if row.startswith("BENCH-RESULT "))
    child = json.loads(line.removeprefix("BENCH-RESULT "))
    return LoadRun(label=label, process_wall_seconds=wall, **child)


# ---------------------------------------------------------------------------- generation


@dataclass
class GenerationRun:
    """Eight prompts generated one way (batch 1 or batch 8), once."""

    way: str
    wall_seconds: float
    prompt_tokens: int
    generated_tokens: int

    @property
    def generated_per_second(self) -> float:
        return self.generated_tokens / self.wall_seconds

    @property
    def prompt_per_second(self) -> float:
        return self.prompt_tokens / self.wall_seconds


def make_prompts() -> list[list[dict[str, str]]]:
    """One chat prompt (system instruction + user item) per food item."""
    return [
        [
            {"role": "system", "content": INSTRUCTION},
            {"role": "user", "content": f"Item: {item}"},
        ]
        for item in ITEMS
    ]


def run_batch1(judge: Any, prompts: list[list[dict[str, str]]]) -> tuple[GenerationRun, list[Any]]:
    """Each prompt in its own call."""
    outputs: list[Any] = []
    prompt_tokens = generated = 0
    started = time.perf_counter()
    for prompt in prompts:
        outputs.extend(outcomes(judge.generate_json([prompt], FoodItem)))
        call = judge.call_log[-1]
        prompt_tokens += call.prompt_tokens
        generated += call.generated_tokens
    wall = time.perf_counter() - started
    return GenerationRun("batch 1", wall, prompt_tokens, generated), outputs


def run_batch8(judge: Any, prompts: list[list[dict[str, str]]]) -> tuple[GenerationRun, list[Any]]:
    """All prompts in one call, one sub-batch of eight."""
    started = time.perf_counter()
    outputs = outcomes(judge.generate_json(prompts, FoodItem))
    wall = time.perf_counter() - started
    call = judge.call_log[-1]
    return GenerationRun("batch 8", wall, call.prompt_tokens, call.generated_tokens), outputs


def as_comparable(output: Any) -> Any:
    """A validated object as a dict; an error as its type name and message."""
    if isinstance(output, BaseModel):
        return output.model_dump()
    return f"{type(output).__name__}: {output}"


def summarize(runs: list[GenerationRun]) -> dict[str, float]:
    """Medians over repeats of one way."""
    return {
        "wall_seconds": statistics.median(r.wall_seconds for r in runs),
        "prompt_tokens": statistics.median(r.prompt_tokens for r in runs),
        "generated_tokens": statistics.median(r.generated_tokens for r in runs),
        "generated_tokens_per_second": statistics.median(r.generated_per_second for r in runs),
        "prompt_tokens_per_second": statistics.median(r.prompt_per_second for r in runs),
    }


def benchmark_generation(repeats: int) -> dict[str, Any]:
    """Warm up, then alternate batch-1 and batch-8 runs; return medians and outputs."""
    import offline_scorer
    from offline_scorer import GenerationSettings, TransformersJudge

    loaded = offline_scorer.load_model(MODEL)
    judge = TransformersJudge(loaded, settings=GenerationSettings(batch_size=8))
    prompts = make_prompts()
    judge.generate_json(prompts[:1], FoodItem)  # schema compilation
    batch1: list[GenerationRun] = []
    batch8: list[GenerationRun] = []
    for _ in range(repeats):
        run1, outputs1 = run_batch1(judge, prompts)
        run8, outputs8 = run_batch8(judge, prompts)
        batch1.append(run1)
        batch8.append(run8)
    one_by_one = [as_comparable(o) for o in outputs1]
    batched = [as_comparable(o) for o in outputs8]
    return {
        "model_load_seconds_in_parent": loaded.load_seconds,
        "from_converted_cache_in_parent": loaded.from_converted_cache,
        "batch1": summarize(batch1),
        "batch8": summarize(batch8),
        "batch1_runs": [asdict(r) for r in batch1],
        "batch8_runs": [asdict(r) for r in batch8],
        "same_outputs": one_by_one == batched,
        "outputs": {"items": ITEMS, "batch1": one_by_one, "batch8": batched},
    }


# ---------------------------------------------------------------------------- report


def machine_info() -> dict[str, Any]:
    """CPU count, torch version and threads (after load_model set them), the command."""
    import torch

    return {
        "cpu_count": os.cpu_count(),
        "torch_version": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "command": shlex.join([sys.executable, *sys.argv]),
    }


def load_table(loads: list[LoadRun]) -> str:
    rows = [
        "| load | process wall s | import s | load_model s | load_seconds | from cache |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for run in loads:
        rows.append(
            f"| {run.label} | {run.process_wall_seconds:.2f} | {run.import_seconds:.2f} | "
            f"{run.load_model_seconds:.2f} | {run.load_seconds:.2f} | "
            f"{'yes' if run.from_converted_cache else 'no'} |"
        )
    return "\n".join(rows)


def generation_table(generation: dict[str, Any], repeats: int) -> str:
    rows = [
        f"| way (8 prompts, median of {repeats}) | wall s | generated tokens | "
        "generated tok/s | prompt tok/s |",
        "|---|---:|---:|---:|---:|",
    ]
    for key, label in (("batch1", "batch 1 (8 calls)"), ("batch8", "batch 8 (1 call)")):
        stats = generation[key]
        rows.append(
            f"| {label} | {stats['wall_seconds']:.2f} | {stats['generated_tokens']:.0f} | "
            f"{stats['generated_tokens_per_second']:.1f} | "
            f"{stats['prompt_tokens_per_second']:.1f} |"
        )
    return "\n".join(rows)


def print_report(result: dict[str, Any]) -> None:
    generation = result["generation"]
    machine = result["machine"]
    print("## Model load (fresh subprocess each)\n")
    print(load_table([LoadRun(**run) for run in result["loads"]]))
    print("\n## Constrained JSON generation\n")
    print(generation_table(generation, result["repeats"]))
    print(f"\nbatch8/batch1 generated tok/s: {result['batch8_over_batch1']:.2f}x")
    print(f"batch-8 outputs equal one-by-one outputs: {generation['same_outputs']}")
    print("\n## Machine\n")
    print(f"- CPUs (os.cpu_count): {machine['cpu_count']}")
    print(f"- torch {machine['torch_version']}, threads: {machine['torch_threads']}")
    print(f"- Python {machine['python']} on {machine['platform']}")
    print(f"- command: `{machine['command']}`")
    print(f"- total benchmark time: {result['total_seconds']:.1f} s")


# ---------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="runs of each way (default 3)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="JSON result path")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="offline-scorer-bench-") as folder:
        cache = Path(folder)
        loads = [load_in_subprocess(label, cache) for label in ("first load", "second load")]
        # The parent uses the same converted copy, so its own load is fast.
        os.environ[CACHE_ENV] = str(cache)
        generation = benchmark_generation(args.repeats)
    ratio = (
        generation["batch8"]["generated_tokens_per_second"]
        / generation["batch1"]["generated_tokens_per_second"]
    )
    result = {
        "model": MODEL,
        "repeats": args.repeats,
        "loads": [asdict(run) for run in loads],
        "generation": generation,
        "batch8_over_batch1": ratio,
        "machine": machine_info(),
        "total_seconds": time.perf_counter() - started,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print_report(result)
    print(f"\nWrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
