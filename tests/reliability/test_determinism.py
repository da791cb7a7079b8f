"""Same input, same answer: one item alone and inside batches of any composition.

The judge sorts prompts by length and left-pads them; with correct attention masks and
position ids, padding must not change a greedy result. Real embedded model.
"""

from __future__ import annotations

import pytest

from offline_scorer import TransformersJudge
from offline_scorer._prompts import render_prompt
from offline_scorer.scorers._answer_relevancy import statements_schema

ITEM = "Paris is the capital of France. It has about two million inhabitants."
SHORTER = ["Yes.", "No.", "Paris.", "Eight.", "Blue.", "Soon.", "Rome."]
LONGER = [
    "The French capital, Paris, sits on the Seine and has been the seat of government for centuries.",
    "Water boils at one hundred degrees Celsius at sea level, and at lower temperatures on mountains.",
    "William Shakespeare wrote Hamlet around 1600; it is one of the most performed plays in the world.",
    "A spider has eight legs, two body segments and usually eight eyes, unlike insects with six legs.",
    "The stock market fell sharply yesterday after the central bank raised its interest rates again.",
    "To boil an egg, place it in boiling water for about eight minutes, then cool it in cold water.",
    "Mount Everest is the highest mountain above sea level, at about 8,849 metres in the Himalayas.",
]


def prompts_for(answers: list[str]):  # type: ignore[no-untyped-def]
    prompts = [
        render_prompt("answer-relevancy", "en", "preprocess", {"output": a}) for a in answers
    ]
    schemas = [statements_schema(4) for _ in answers]
    return prompts, schemas


@pytest.mark.slow
def test_item_alone_equals_item_in_any_batch(judge: TransformersJudge) -> None:
    prompts, schemas = prompts_for([ITEM])
    alone = judge.generate_json(prompts, schemas)[0]
    compositions = {
        "with 7 shorter (the item is the longest)": [ITEM, *SHORTER],
        "mixed, the item padded by longer ones": [*SHORTER[:3], *LONGER[:4], ITEM],
    }
    for name, answers in compositions.items():
        batch_prompts, batch_schemas = prompts_for(answers)
        results = judge.generate_json(batch_prompts, batch_schemas)
        assert results[answers.index(ITEM)] == alone, name
