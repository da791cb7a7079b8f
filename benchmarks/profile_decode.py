"""Profile: where the time of one batched scoring run goes, step by step of the pipeline.

Run it with ``.venv/bin/python -m benchmarks.profile_decode [--items 8] [--scorers ...]``.
It scores ``--items`` items of ``throughput.py`` with the reference's procedure
(``verdicts="generate", extraction="model"``, every step a judge call) on the embedded
model, after one warm-up item, and wraps three things with timers while it runs:

* the model's forward pass, split into *prefill* (a pass over more than one new token per
  row: the prompt, or forced tokens fed together) and *decode* (one new token per row);
* the JSON constraint (``PerRowSchemaProcessor.__call__``: guides advance, masks written);
* everything else inside the judge's calls (``generate`` bookkeeping, padding, tokenizing).

Per judge call (one pipeline step) it prints seconds in each part, forward passes, rows per
pass, prompt tokens, generated tokens, and how much of the work was waste or avoidable:

* ``idle row-steps``: decode steps a row spent after it had finished (padding while the
  batch waits for its longest row);
* ``forced row-steps``: decode steps where the constraint allowed exactly one token, so
  the forward pass chose nothing;
* ``shared prefix``: prompt tokens that are the step's system block, the same for every
  item (a prefix cache computes them once per step instead of once per row).

Nothing here asserts a time; compare figures from the same run.
"""

from __future__ import annotations

import argparse
import json
import time
import weakref
from collections import defaultdict
from pathlib import Path
from typing import Any

from benchmarks.throughput import WARM_UP, item_runs

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "profile_decode.json"


class Timers:
    """Seconds and counts per part, for the judge call that is running."""

    def __init__(self) -> None:
        self.parts: dict[str, float] = defaultdict(float)
        self.counts: dict[str, int] = defaultdict(int)

    def add(self, part: str, seconds: float, count: int = 1) -> None:
        self.parts[part] += seconds
        self.counts[part] += count


# The timers of the run being profiled (the constraint's methods are wrapped once).
ACTIVE: list[list[Timers]] = []


def instrument(judge: Any, timers: list[Timers]) -> None:
    """Wrap the model's forward and the constraint's methods with timers (this process only)."""
    from offline_scorer.toolkit import PerRowSchemaProcessor

    ACTIVE[:] = [timers]
    model = judge.load().model
    forward = model.forward

    seen: weakref.WeakSet[Any] = weakref.WeakSet()

    def timed_forward(*args: Any, **kwargs: Any) -> Any:
        ids = kwargs.get("input_ids", args[0] if args else None)
        cache = kwargs.get("cache", kwargs.get("past_key_values"))
        # The first pass on a new cache is the prompt's; later ones decode (one token per
        # row, or a few when forced tokens ride along).
        part = "decode" if cache is not None and cache in seen else "prefill"
        if cache is not None:
            seen.add(cache)
        began = time.perf_counter()
        out = forward(*args, **kwargs)
        timers[-1].add(part, time.perf_counter() - began)
        timers[-1].counts["rows " + part] += 1 if ids is None else int(ids.shape[0])
        return out

    model.forward = timed_forward
    processor = PerRowSchemaProcessor
    if getattr(processor, "_profiled", False):
        return
    processor._profiled = True  # type: ignore[attr-defined]
    originals = {name: getattr(processor, name) for name in ("allowed", "advance", "forced")}

    def timed(name: str) -> Any:
        def call(self: Any, row: Any, *args: Any) -> Any:
            began = time.perf_counter()
            out = originals[name](self, row, *args)
            timers = ACTIVE[0]
            timers[-1].add("constraint", time.perf_counter() - began)
            if name == "allowed":
                counts = out.sum(dim=1).tolist()
                done = [bool(self._guides[r].is_finished()) for r in row]
                timers[-1].counts["forced row-steps"] += sum(
                    n == 1 and not d for n, d in zip(counts, done)
                )
                timers[-1].counts["idle row-steps"] += sum(done)
                timers[-1].counts["row-steps"] += len(counts)
            if name == "forced" and out is not None:
                timers[-1].counts["jumped tokens"] += 1
            return out

        return call

    for name in originals:
        setattr(processor, name, timed(name))


def shared_prefix_tokens(judge: Any, prompts: list[list[Any]]) -> list[int]:
    """Per call, the prompt tokens that belong to the step's system block (all rows), as
    the judge itself counts them."""
    return [sum(judge._encode(i, p).prefix for i, p in enumerate(batch)) for batch in prompts]


VARIANTS: dict[str, dict[str, Any]] = {
    "generate": {"decoder": "generate"},
    "loop-plain": {"decoder": "loop", "prefix_cache": False, "jump_forward": False},
    "loop-prefix": {"decoder": "loop", "prefix_cache": True, "jump_forward": False},
    "loop": {"decoder": "loop", "prefix_cache": True, "jump_forward": True},
}


def profile(loaded: Any, variant: str, scorer_id: str, items: int) -> dict[str, Any]:
    """Score ``items`` items one way, with timers; return the per-call rows and totals."""
    from offline_scorer import GenerationSettings, TransformersJudge, get_scorer

    judge = TransformersJudge(loaded, settings=GenerationSettings(**VARIANTS[variant]))
    scorer = get_scorer(scorer_id, judge=judge, verdicts="generate", extraction="model")
    scorer.run_batch([{"input": WARM_UP[0], "output": WARM_UP[1], "ground_truth": WARM_UP[2]}])

    timers: list[Timers] = [Timers()]
    prompts: list[list[Any]] = []
    instrument(judge, timers)
    # Every call of the judge goes through its one method, answer(request).
    method = judge.answer

    def wrapped(request: Any) -> Any:
        timers.append(Timers())
        prompts.append(list(request.prompts))
        began = time.perf_counter()
        out = method(request)
        timers[-1].add("call", time.perf_counter() - began)
        return out

    judge.answer = wrapped  # type: ignore[method-assign]

    calls_before = len(judge.call_log)
    began = time.perf_counter()
    results = scorer.run_batch(item_runs(items))
    total = time.perf_counter() - began
    loaded.model.forward = type(loaded.model).forward.__get__(loaded.model)
    calls = judge.call_log[calls_before:]
    shared = shared_prefix_tokens(judge, prompts)
    rows = []
    for call, timer, prefix in zip(calls, timers[1:], shared):
        parts = timer.parts
        other = parts["call"] - parts["prefill"] - parts["decode"] - parts["constraint"]
        rows.append(
            {
                "step": call.kind,
                "prompts": len(call.items),
                "seconds": parts["call"],
                "prefill_s": parts["prefill"],
                "decode_s": parts["decode"],
                "constraint_s": parts["constraint"],
                "other_s": other,
                "forward_passes": timer.counts["prefill"] + timer.counts["decode"],
                "rows_per_decode_pass": timer.counts["rows decode"]
                / max(1, timer.counts["decode"]),
                "prompt_tokens": call.prompt_tokens,
                "shared_prefix_tokens": prefix,
                "generated_tokens": call.generated_tokens,
                "row_steps": timer.counts["row-steps"],
                "idle_row_steps": timer.counts["idle row-steps"],
                "forced_row_steps": timer.counts["forced row-steps"],
                "forced_found": timer.counts["jumped tokens"],
            }
        )
    return {
        "variant": variant,
        "scorer": scorer_id,
        "items": items,
        "seconds": total,
        "items_per_s": items / total,
        "failed": sum(r.status == "failed" for r in results),
        "scores": [r.score for r in results],
        "calls": rows,
    }


def markdown(report: dict[str, Any]) -> str:
    """One table per run, then a summary of all runs."""
    lines = []
    for run in report["runs"]:
        lines.append(
            f"### {run['scorer']}, {run['variant']}: {run['seconds']:.1f} s for "
            f"{run['items']} items ({run['items_per_s']:.3f} items/s), failed {run['failed']}\n"
        )
        heads = list(run["calls"][0]) if run["calls"] else []
        lines.append("| " + " | ".join(heads) + " |")
        lines.append("|" + "---|" * len(heads))
        for row in run["calls"]:
            cells = [f"{v:.1f}" if isinstance(v, float) else str(v) for v in row.values()]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    lines.append("### Summary\n")
    lines.append(
        "| scorer | variant | s | items/s | vs generate | prefill s | decode s | constraint s | forward passes | same scores as generate |"
    )
    lines.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
    base = {r["scorer"]: r for r in report["runs"] if r["variant"] == "generate"}
    for run in report["runs"]:
        ref = base.get(run["scorer"])
        ratio = f"{run['items_per_s'] / ref['items_per_s']:.2f}x" if ref else "n/a"
        same = "n/a" if ref is None else ("yes" if run["scores"] == ref["scores"] else "NO")
        part = {
            k: sum(c[k] for c in run["calls"])
            for k in ("prefill_s", "decode_s", "constraint_s", "forward_passes")
        }
        lines.append(
            f"| {run['scorer']} | {run['variant']} | {run['seconds']:.1f} | "
            f"{run['items_per_s']:.3f} | {ratio} | {part['prefill_s']:.1f} | "
            f"{part['decode_s']:.1f} | {part['constraint_s']:.1f} | {part['forward_passes']} | {same} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=8)
    parser.add_argument(
        "--scorers",
        nargs="+",
        default=["answer-relevancy", "answer-similarity"],
        choices=("answer-relevancy", "answer-similarity"),
    )
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()

    import torch

    from offline_scorer import load_model

    loaded = load_model("smollm2-135m-instruct")
    runs = [
        profile(loaded, variant, scorer_id, args.items)
        for scorer_id in args.scorers
        for variant in args.variants
    ]
    report = {"threads": torch.get_num_threads(), "runs": runs}
    print(markdown(report))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
