"""Extraction keeps the facts: judge-extracted items cannot assert numbers or names that
their source lacks (issue 13). The judge is scripted (FakeJudge): the point is what the
scorer does with a statement that changed a fact, which a real small model does only now
and then."""

from __future__ import annotations

from offline_scorer import create_answer_relevancy_scorer, create_answer_similarity_scorer
from offline_scorer.scorers._facts import keep_facts, unsupported_facts
from offline_scorer.testing import FakeJudge

ANSWER = "Osama bin Laden was arrested in Sudan in 1994. He later moved to Afghanistan."


def test_unsupported_numbers_and_names_are_found() -> None:
    assert unsupported_facts("He was arrested in Sudan in 2014.", ANSWER) == ["2014"]
    assert unsupported_facts("He was arrested in Kenya in 1994.", ANSWER) == ["Kenya"]
    # Sentence-initial words, number words written in digits, and case changes are fine.
    assert unsupported_facts("Later he moved to afghanistan.", ANSWER) == []
    assert unsupported_facts("A spider has 8 legs.", "A spider has eight legs.") == []
    assert unsupported_facts("It has one hundred rooms.", "It has 100 rooms.") == []


def test_an_item_with_a_changed_fact_falls_back_to_its_source_sentence() -> None:
    items, fallbacks = keep_facts(
        ["Osama bin Laden was arrested in Sudan in 2014.", "He later moved to Afghanistan."],
        ANSWER,
    )
    assert items == [
        "Osama bin Laden was arrested in Sudan in 1994.",
        "He later moved to Afghanistan.",
    ]
    assert fallbacks == 1


def test_relevancy_judges_the_source_fact_and_counts_the_fallback() -> None:
    judge = FakeJudge(
        json={
            "Statements": {
                "statements": [
                    "Osama bin Laden was arrested in Sudan in 2014.",
                    "He later moved to Afghanistan.",
                ]
            },
            "Verdicts": {"results": [{"result": "yes", "reason": "r"}] * 2},
        },
        text="it answers.",
    )
    scorer = create_answer_relevancy_scorer(judge=judge)
    result = scorer.run(input="When was bin Laden arrested in Sudan?", output=ANSWER)
    statements = result.preprocess_step_result["statements"]
    assert "Osama bin Laden was arrested in Sudan in 1994." in statements
    assert not any("2014" in s for s in statements)
    assert result.preprocess_step_result["fact_fallbacks"] == 1
    assert "2014" not in result.analyze_prompt[-1]["content"]  # the judged text is the source's


def test_similarity_units_are_checked_against_their_own_text() -> None:
    judge = FakeJudge(
        json={
            "Units": {
                "output_units": ["Bin Laden was arrested in 2014."],
                "ground_truth_units": ["He was arrested in Sudan in 1994."],
            },
            "RunAnalysis": lambda prompt, schema: {
                "matches": [
                    {
                        "ground_truth_unit": "He was arrested in Sudan in 1994.",
                        "output_unit": None,
                        "match_type": "missing",
                        "explanation": "e",
                    }
                ],
                "extra_in_output": [],
                "contradictions": [],
            },
        },
        text="it differs.",
    )
    scorer = create_answer_similarity_scorer(judge=judge)
    result = scorer.run(
        input="When?", output=ANSWER, ground_truth="He was arrested in Sudan in 1994."
    )
    units = result.preprocess_step_result
    assert units["output_units"] == ["Osama bin Laden was arrested in Sudan in 1994."]
    assert units["ground_truth_units"] == ["He was arrested in Sudan in 1994."]
    assert units["fact_fallbacks"] == 1
