"""Benchmark: the JSON constraint's cost per decode step, packed masks against unpacked ones.

Run it with ``.venv/bin/python -m benchmarks.constraint_masks [--card qwen2.5-coder-1.5b-instruct]
[--rows 8 64] [--repeats 5]``. Only the card's tokenizer is loaded (its vocabulary is what
the masks cover: 151,665 tokens for the Qwen cards, 49,152 for the embedded one).

On a GPU the 1.5B card's shape took 79–131 ms per 64-row JSON step where the model's own
step took about 20 (``benchmarks/gpu.py``, RESULTS.md): the constraint, computed on the
CPU row by row, bounded the step. Each row's mask now stays packed (Outlines' int32 words,
32 tokens a word) until the step's masks are unpacked in one operation on the logits'
device; whether one token is forced is read off the words. This script replays the same
constrained steps both ways in one run, alternating, on this CPU:

* ``unpacked``: the way before: per row, the words unpacked into a boolean vector over the
  vocabulary by shifting each word by 0..31, the forced token found with ``nonzero`` on
  it, the vectors stacked;
* ``packed``: ``PerRowSchemaProcessor`` as shipped: the forced token read off the words,
  every row's words unpacked at once through a byte table.

Each of ``--rows`` rows follows a fixed valid answer of a verdict schema (a label and a
reason) token by token; a step is, per row, ``forced`` then ``allowed`` over all rows then
``advance``. It prints milliseconds per step and per row-step (medians of ``--repeats``),
the ratio, and whether both ways gave the same masks. Nothing here asserts a time; the
device side of the change (32 times fewer bytes to a GPU) is not measured here.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "constraint_masks.json"


class Verdict(BaseModel):
    """The replayed answers' schema."""

    verdict: Literal["yes", "no", "unsure"]
    reason: str = Field(max_length=200)


ANSWER = (
    '{"verdict":"unsure","reason":"The statement is about heat and battery wear, which the '
    'question about making a battery last longer only touches on."}'
)


def tokenizer_of(card: str) -> Any:
    from transformers import AutoTokenizer

    from offline_scorer.toolkit import model_folder

    return AutoTokenizer.from_pretrained(model_folder(card), local_files_only=True)


def unpacked_processor(base: type) -> type:
    """``base`` with the masks of the way before: each row's words unpacked alone, by
    shifting every word by 0..31, and the forced token found on the unpacked vector."""
    import torch

    positions = torch.arange(32, dtype=torch.int32)

    def unpack(words: torch.Tensor, vocab: int) -> torch.Tensor:
        return ((words.unsqueeze(-1) >> positions) & 1).bool().view(-1)[:vocab]

    class Unpacked(base):  # type: ignore[misc]
        def forced(self, row: int, vocab: int) -> int | None:
            self._start()
            flags = unpack(self._row_bits(row, vocab), vocab)
            self._pending[row] = flags
            found = flags.nonzero()
            return int(found[0, 0]) if found.shape[0] == 1 else None

        def allowed(self, rows: Any, vocab: int, device: Any = None) -> torch.Tensor:
            self._start()
            masks = [self._pending.pop(row, None) for row in rows]
            return torch.stack(
                [
                    m if m is not None else unpack(self._row_bits(row, vocab), vocab)
                    for row, m in zip(rows, masks)
                ]
            )

    return Unpacked


def replay(processor: Any, answer: list[int], rows: int, vocab: int) -> tuple[float, list[Any]]:
    """Seconds over every step of ``answer`` on ``rows`` rows, and the step masks of row 0."""
    masks = []
    began = time.perf_counter()
    for token in answer:
        for row in range(rows):
            processor.forced(row, vocab)
        allowed = processor.allowed(range(rows), vocab)
        masks.append(allowed[0].clone())
        for row in range(rows):
            processor.advance(row, token)
    return time.perf_counter() - began, masks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--card", default="qwen2.5-coder-1.5b-instruct")
    parser.add_argument("--rows", type=int, nargs="+", default=[8, 64])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()

    import torch

    from offline_scorer.toolkit import PerRowSchemaProcessor, SchemaCompiler, schema_text

    torch.set_num_threads(1)
    tokenizer = tokenizer_of(args.card)
    vocab = len(tokenizer)
    compiler = SchemaCompiler(tokenizer)
    index = compiler.index_for(schema_text(Verdict))
    answer = list(tokenizer(ANSWER, add_special_tokens=False)["input_ids"])
    ways = {"unpacked": unpacked_processor(PerRowSchemaProcessor), "packed": PerRowSchemaProcessor}
    report: dict[str, Any] = {"card": args.card, "vocab": vocab, "steps": len(answer), "rows": {}}
    for rows in args.rows:
        seconds: dict[str, list[float]] = {way: [] for way in ways}
        masks: dict[str, list[Any]] = {}
        for _ in range(args.repeats + 1):  # the first round warms up, untimed
            for way, kind in ways.items():
                processor = kind([index] * rows, compiler, 200, 64)
                spent, masks[way] = replay(processor, answer, rows, vocab)
                seconds[way].append(spent)
        same = all(torch.equal(a, b) for a, b in zip(masks["unpacked"], masks["packed"]))
        per_step = {way: statistics.median(s[1:]) / len(answer) for way, s in seconds.items()}
        report["rows"][str(rows)] = {
            "ms_per_step": {way: 1000 * v for way, v in per_step.items()},
            "ms_per_row_step": {way: 1000 * v / rows for way, v in per_step.items()},
            "ratio": per_step["unpacked"] / per_step["packed"],
            "same_masks": same,
        }
    print(
        f"{args.card}: vocabulary {vocab}, {len(answer)} steps of a verdict answer, 1 thread, "
        f"medians of {args.repeats}\n"
    )
    print(
        "| rows | unpacked ms/step | packed ms/step | unpacked ms/row-step | packed ms/row-step "
        "| unpacked / packed | same masks |"
    )
    print("|---:|---:|---:|---:|---:|---:|---|")
    for rows, row in report["rows"].items():
        ms, per_row = row["ms_per_step"], row["ms_per_row_step"]
        print(
            f"| {rows} | {ms['unpacked']:.1f} | {ms['packed']:.1f} | {per_row['unpacked']:.2f} "
            f"| {per_row['packed']:.2f} | {row['ratio']:.2f}x | {row['same_masks']} |"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
