"""Benchmark: the obvious rows every card must get right, scored with each card's defaults.

    .venv/bin/python -m benchmarks.obvious_pairs                       # every installed card
    .venv/bin/python -m benchmarks.obvious_pairs --model qwen2.5-coder-0.5b-instruct

A person needs no labelled data to judge these rows: a paraphrase of the reference, a wrong
capital, a bare answer against the same word, two unrelated texts, an off-topic answer. The
real-judge issue's targets are a paraphrase of the reference at least 0.85 similarity, a
wrong capital at most 0.35, an off-topic answer at most 0.3 relevancy; the other rows are
printed for reading, with the side they should fall on. Each card is scored with the
scorers' defaults for that card (``create_*_scorer(judge=...)``, no option passed), in its
default dtype unless ``--dtype`` says otherwise, without the reason step (a score does not
depend on it) and without a result cache, in this process, one card after the other. It
prints a Markdown table; nothing here asserts a score (tests/test_qwen_card.py does, for
the cards that are installed).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass

from offline_scorer import (
    TransformersJudge,
    create_answer_relevancy_scorer,
    create_answer_similarity_scorer,
    list_model_cards,
)
from offline_scorer.toolkit import card_status


@dataclass(frozen=True)
class Row:
    name: str
    scorer: str  # "similarity" or "relevancy"
    input: str
    output: str
    ground_truth: str | None
    low: float | None = None  # the score must be at least this (a target)
    high: float | None = None  # ... at most this
    target: bool = False  # one of the targets (else shown for reading)


ROWS = [
    Row(
        "paraphrase of the reference",
        "similarity",
        "What is the capital of France?",
        "The capital of France is Paris.",
        "Paris is the capital of France.",
        low=0.85,
        target=True,
    ),
    Row(
        "wrong capital (Milan for Rome)",
        "similarity",
        "What is the capital of Italy?",
        "The capital of Italy is Milan.",
        "Rome is the capital of Italy.",
        high=0.35,
        target=True,
    ),
    Row("same word", "similarity", "What is the capital of France?", "Paris.", "Paris", low=0.85),
    Row(
        "unrelated texts",
        "similarity",
        "How do I boil an egg?",
        "Stock markets fell sharply on Monday.",
        "Put the egg in boiling water for seven minutes.",
        high=0.3,
    ),
    Row(
        "wrong person",
        "similarity",
        "Who was the first president of the United States?",
        "Abraham Lincoln was the first president of the United States.",
        "George Washington was the first president of the United States.",
        high=0.35,
    ),
    Row(
        "bare answer against a sentence",
        "similarity",
        "How many legs does a spider have?",
        "Eight.",
        "A spider has eight legs.",
        low=0.5,
    ),
    Row(
        "off-topic answer",
        "relevancy",
        "How do I boil an egg?",
        "Stock markets fell sharply on Monday.",
        None,
        high=0.3,
        target=True,
    ),
    Row(
        "bare on-topic answer",
        "relevancy",
        "How many legs does a spider have?",
        "Eight.",
        None,
        low=0.85,
    ),
]


def met(row: Row, score: float) -> bool:
    return (row.low is None or score >= row.low) and (row.high is None or score <= row.high)


def wanted(row: Row) -> str:
    return f">= {row.low}" if row.low is not None else f"<= {row.high}"


def score_card(card: str, dtype: str, threads: int | None) -> tuple[str, list[float], float]:
    """The card's dtype and each row's score with its default scorers, and the seconds."""
    judge = TransformersJudge(card, dtype=dtype, threads=threads)
    loaded = judge.load()
    scorers = {
        "similarity": create_answer_similarity_scorer(judge=judge),
        "relevancy": create_answer_relevancy_scorer(judge=judge),
    }
    for scorer in scorers.values():
        scorer.steps.pop("generate_reason", None)
    started = time.perf_counter()
    scores = []
    for row in ROWS:
        result = scorers[row.scorer].run(
            input=row.input, output=row.output, ground_truth=row.ground_truth
        )
        if result.score is None:
            raise SystemExit(f"{card}: {row.name}: not scored ({result.status})")
        scores.append(float(result.score))
    return loaded.dtype, scores, time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model", action="append", help="a card name (repeatable; default: every installed card)"
    )
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)
    every = list_model_cards()
    known = {card.name for card in every}
    cards = args.model or [card.name for card in every if card_status(card, verify=False).present]
    unknown = [card for card in cards if card not in known]
    if unknown:  # before any model loads
        raise SystemExit(f"obvious_pairs: no model card {unknown}; known cards: {sorted(known)}")
    columns = {}
    for card in cards:
        print(f"{card}: scoring {len(ROWS)} rows ...", file=sys.stderr, flush=True)
        dtype, scores, seconds = score_card(card, args.dtype, args.threads)
        columns[f"{card} ({dtype}, {seconds:.0f} s)"] = scores
    header = ["row", "scorer", "wanted", *columns]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * 3 + "---:|" * len(columns)]
    for index, row in enumerate(ROWS):
        cells = [
            f"**{row.name}** (target)" if row.target else row.name,
            row.scorer,
            wanted(row),
        ]
        for scores in columns.values():
            score = scores[index]
            cells.append(f"{score:.2f}" + ("" if met(row, score) else " ✗"))
        lines.append("| " + " | ".join(cells) + " |")
    print("\n".join(lines))
    print("\n✗: on the wrong side of what is wanted.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
