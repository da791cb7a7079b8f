"""Same input, same answer: one item alone and at every position of a mixed-length batch.

The judge sorts prompts by length and left-pads them; with correct attention masks and
position ids, padding must not change a greedy result. Real embedded model, whole
answer-relevancy runs (statements, verdicts, score and reason).

Batch ``j`` (j = 0..3) holds two copies of the item at input positions ``2j`` and
``2j + 1``, ``2j`` companions with longer prompts before them and ``6 - 2j`` with shorter
prompts after them. The judge's stable sort keeps that order, so over the four batches the
item sits at every input position and at every row of the padded batch, from unpadded
(with the longest prompt of its batch) to padded by the most. Each copy must equal the
item scored alone.

Cost: the property does not depend on the token budgets, so this test runs the judge with
short ones (JSON strings of at most 32 characters, one-sentence reasons) and one-sentence
companions. With the default budgets and eight batches (the item once per batch) the same
check took 5 minutes here and passed.
"""

from __future__ import annotations

import pytest

from offline_scorer import GenerationSettings, TransformersJudge
from offline_scorer.scorers import create_answer_relevancy_scorer

ITEM = {"input": "What is the capital of France?", "output": "Paris is the capital."}
LONGER = [
    {
        "input": "Which planet of our solar system is known as the red planet, and why?",
        "output": "Mars is called the red planet because of its rusty dust.",
    },
    {
        "input": "Who wrote the famous play about Hamlet, the prince of Denmark?",
        "output": "William Shakespeare wrote Hamlet around the year 1600.",
    },
    {
        "input": "At what temperature does pure water boil at sea level?",
        "output": "Pure water boils at one hundred degrees Celsius.",
    },
    {
        "input": "What is the tallest mountain on the planet above sea level?",
        "output": "Mount Everest is the tallest mountain on Earth.",
    },
    {
        "input": "What is the main gas in the air that we breathe?",
        "output": "Nitrogen is the main gas in the air we breathe.",
    },
    {
        "input": "How many legs does a spider have on its body?",
        "output": "A spider has eight legs on its two-part body.",
    },
]
SHORTER = [
    {"input": "Sky colour?", "output": "Blue."},
    {"input": "Two plus two?", "output": "Four."},
    {"input": "Hot or cold?", "output": "Cold."},
    {"input": "Is ice cold?", "output": "Yes."},
    {"input": "Cat legs?", "output": "Four."},
    {"input": "Italy?", "output": "Rome."},
]
SHORT_BUDGETS = GenerationSettings(
    max_string_chars=32, max_sentences_text=1, max_new_tokens_text=48, max_new_tokens_json=160
)


def batch_with_item_at(slot: int) -> list[dict[str, str]]:
    """Eight runs: ``2 * slot`` longer companions, two copies of the item, shorter ones."""
    longer, shorter = LONGER[: 2 * slot], SHORTER[: 6 - 2 * slot]
    return [*longer, ITEM, ITEM, *shorter]


def outcome(result):  # type: ignore[no-untyped-def]
    return (
        result.status,
        result.score,
        result.reason,
        result.preprocess_step_result,
        result.analyze_step_result,
    )


@pytest.mark.slow
def test_item_alone_equals_item_at_every_position_of_a_batch(judge: TransformersJudge) -> None:
    short_judge = TransformersJudge(judge.load(), settings=SHORT_BUDGETS)
    scorer = create_answer_relevancy_scorer(judge=short_judge)
    alone = scorer.run_batch([ITEM])[0]
    assert alone.status == "scored" and alone.reason, alone.error
    covered: set[int] = set()
    for slot in range(4):
        runs = batch_with_item_at(slot)
        positions = [i for i, run in enumerate(runs) if run is ITEM]
        assert len(runs) == 8 and positions == [2 * slot, 2 * slot + 1]
        results = scorer.run_batch(runs)
        assert all(r.status == "scored" for r in results), [r.error for r in results]
        for position in positions:
            assert outcome(results[position]) == outcome(alone), f"item at position {position}"
            covered.add(position)
    assert covered == set(range(8))
