"""Benchmark: where the reference's procedure spends its time, stage by stage and pass by pass.

Run it with ``.venv/bin/python -m benchmarks.reference_profile [--model CARD] [--dtype auto]
[--items 16] [--scorer answer-relevancy]``. It prints Markdown tables and writes
``benchmarks/results/reference_profile.json`` (git-ignored; ``--out`` picks another path).

It scores the ``--items`` items of ``throughput.py`` with the reference's procedure
(``verdicts="generate", extraction="model"``: statements, verdicts and the reason all
written by the model), on one loaded model after an untimed warm-up item, and times every
forward pass of the decode loop (``_loop._forward`` and the loop's entry are wrapped for
this process only; the passes themselves are unchanged). The first pass of each sub-batch
is its prompt pass, the others are decode passes. It reports:

* per stage (one judge call each): prompts, prompt and generated tokens, seconds;
* prompt passes: their count, seconds and the tokens they fed (a cached system block is
  not fed), so their tokens/s;
* decode passes: their count, seconds, mean rows, and seconds per pass by rows.

From these it derives what bounds the items/s: the same run with no prompt pass at all
(every prompt already cached) would take only the decode passes' time. Nothing here asserts
a time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

DEFAULT_OUT = Path(__file__).with_name("results") / "reference_profile.json"


def profile(model: str, dtype: str, items: int, scorer_id: str) -> dict[str, Any]:
    """Score ``items`` items the reference's way; every forward pass timed."""
    import importlib

    from benchmarks.throughput import WARM_UP, item_runs
    from offline_scorer import TransformersJudge, get_scorer

    # Typed Any: the two module attributes are replaced for this process only.
    loop: Any = importlib.import_module("offline_scorer.judges.transformers._loop")
    decoding: Any = importlib.import_module("offline_scorer.judges.transformers._decoding")

    passes: list[dict[str, Any]] = []
    forward, decode = loop._forward, decoding.decode
    first = [False]

    def entered(*args: Any, **kwargs: Any) -> Any:
        first[0] = True
        return decode(*args, **kwargs)

    def timed(*args: Any) -> Any:
        ids, mask = args[1], args[2]
        began = time.perf_counter()
        logits = forward(*args)
        passes.append(
            {
                "rows": int(ids.shape[0]),
                "width": int(ids.shape[1]),
                "fed": int(mask[:, -ids.shape[1] :].sum()),
                "seconds": time.perf_counter() - began,
                "prompt": first[0],
            }
        )
        first[0] = False
        return logits

    loop._forward, decoding.decode = timed, entered
    judge = TransformersJudge(model, dtype=dtype)  # type: ignore[arg-type]
    judge.load()
    scorer = get_scorer(scorer_id, judge=judge, verdicts="generate", extraction="model")
    scorer.run_batch([{"input": WARM_UP[0], "output": WARM_UP[1], "ground_truth": WARM_UP[2]}])
    calls_before = len(judge.call_log)
    passes.clear()
    began = time.perf_counter()
    results = scorer.run_batch(item_runs(items))
    seconds = time.perf_counter() - began
    loop._forward, decoding.decode = forward, decode
    stages = [
        {
            "kind": call.kind,
            "prompts": len(call.items),
            "prompt_tokens": call.prompt_tokens,
            "generated_tokens": call.generated_tokens,
            "seconds": call.seconds,
        }
        for call in judge.call_log[calls_before:]
    ]
    return {
        "model": judge.fingerprint,
        "scorer": scorer_id,
        "items": items,
        "seconds": seconds,
        "failed": sum(result.status == "failed" for result in results),
        "stages": stages,
        "passes": passes,
    }


def markdown(report: dict[str, Any]) -> str:
    """The report's tables."""
    passes = report["passes"]
    prompt = [p for p in passes if p["prompt"]]
    decode = [p for p in passes if not p["prompt"]]
    seconds = report["seconds"]
    lines = [
        f"{report['model']}, {report['scorer']}, {report['items']} items: {seconds:.1f} s, "
        f"{report['items'] / seconds:.3f} items/s, {report['failed']} failed",
        "",
        "| stage | prompts | prompt tokens | generated tokens | seconds |",
        "|---|---:|---:|---:|---:|",
    ]
    for stage in report["stages"]:
        lines.append(
            f"| {stage['kind']} | {stage['prompts']} | {stage['prompt_tokens']:,} | "
            f"{stage['generated_tokens']:,} | {stage['seconds']:.1f} |"
        )
    prompt_s = sum(p["seconds"] for p in prompt)
    prompt_fed = sum(p["fed"] for p in prompt)
    decode_s = sum(p["seconds"] for p in decode)
    lines += [
        "",
        "| passes | count | seconds | share of the run | tokens fed | tokens/s | mean rows |",
        "|---|---:|---:|---:|---:|---:|---:|",
        f"| prompt | {len(prompt)} | {prompt_s:.1f} | {prompt_s / seconds:.0%} | {prompt_fed:,} | "
        f"{prompt_fed / max(prompt_s, 1e-9):.0f} | "
        f"{statistics.mean(p['rows'] for p in prompt) if prompt else 0:.2f} |",
        f"| decode | {len(decode)} | {decode_s:.1f} | {decode_s / seconds:.0%} | "
        f"{sum(p['fed'] for p in decode):,} | "
        f"{sum(p['fed'] for p in decode) / max(decode_s, 1e-9):.0f} | "
        f"{statistics.mean(p['rows'] for p in decode) if decode else 0:.2f} |",
        "",
        "| decode rows | passes | seconds | median s per pass |",
        "|---:|---:|---:|---:|",
    ]
    for rows in sorted({p["rows"] for p in decode}):
        some = [p["seconds"] for p in decode if p["rows"] == rows]
        lines.append(f"| {rows} | {len(some)} | {sum(some):.1f} | {statistics.median(some):.3f} |")
    lines += [
        "",
        f"With every prompt already cached the run would take at least the decode passes' "
        f"{decode_s:.1f} s: {report['items'] / max(decode_s, 1e-9):.3f} items/s.",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--items", type=int, default=16)
    parser.add_argument(
        "--scorer", default="answer-relevancy", choices=["answer-relevancy", "answer-similarity"]
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    report = profile(args.model, args.dtype, args.items, args.scorer)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1), encoding="utf-8")
    print(markdown(report))


if __name__ == "__main__":
    main()
