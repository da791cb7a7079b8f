"""Answers longer than the context window: a clear error by default, chunks on request."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from offline_scorer import TransformersJudge, create_answer_relevancy_scorer
from offline_scorer.scorers._common import split_text

SENTENCES = [
    "Paris is the capital of France.",
    "It lies on the river Seine in the north of the country.",
    "About two million people live in the city itself.",
    "The Eiffel Tower was finished in 1889 for a world fair.",
    "The Louvre is the most visited art museum in the world.",
    "Paris hosted the Olympic Games in 1900, 1924 and 2024.",
    "Its metro opened in 1900 and has sixteen lines today.",
    "The city is divided into twenty districts called arrondissements.",
    "Many visitors also enjoy its cafes, bakeries and parks.",
    "Notre-Dame cathedral reopened in December 2024 after a fire.",
]


@given(st.lists(st.text(min_size=1, max_size=80), max_size=30), st.integers(20, 300))
def test_split_text_keeps_every_word_within_the_limit(parts: list[str], limit: int) -> None:
    text = ". ".join(parts)
    chunks = split_text(text, limit)
    assert all(0 < len(chunk) <= limit for chunk in chunks)
    # Every character but white space survives, in order (a word longer than the limit is
    # cut at the limit, so words may be split but nothing is lost).
    assert "".join("".join(chunks).split()) == "".join(text.split())


def test_split_text_cuts_at_sentence_ends() -> None:
    chunks = split_text(" ".join(SENTENCES[:4]), 100)
    assert (
        chunks[0]
        == "Paris is the capital of France. It lies on the river Seine in the north of the country."
    )


@pytest.mark.slow
def test_too_long_answer_fails_clearly_by_default(judge: TransformersJudge) -> None:
    scorer = create_answer_relevancy_scorer(judge=judge, verdicts="generate", extraction="model")
    long_answer = " ".join(SENTENCES) * 120  # about 14,000 tokens, more than 8,192
    results = scorer.run_batch(
        [{"input": "Tell me about Paris.", "output": long_answer}, {"input": "Hi?", "output": ""}]
    )
    assert results[0].status == "failed" and results[0].failed_step == "preprocess"
    assert "context window of 8192" in results[0].error and "truncated silently" in results[0].error
    assert results[1].status == "scored"


@pytest.mark.slow
def test_split_long_answers_chunks_preprocess_and_merges_statements(
    judge: TransformersJudge,
) -> None:
    # Tiny chunks keep the test fast; the mechanism is the same for an answer of 40,000
    # characters in chunks of 3,000.
    scorer = create_answer_relevancy_scorer(
        judge=judge,
        split_long_answers=True,
        chunk_chars=60,
        verdicts="generate",
        extraction="model",
    )
    answer = " ".join(SENTENCES[:2])
    result = scorer.run(input="Tell me about Paris.", output=answer)
    assert result.status == "scored", result.error
    chunks = split_text(answer, 60)
    assert len(chunks) >= 2
    users = [m["content"] for m in result.preprocess_prompt if m["role"] == "user"]
    assert len(users) == len(chunks) and all(chunk in user for chunk, user in zip(chunks, users))
    statements = result.preprocess_step_result["statements"]
    verdicts = result.analyze_step_result["results"]
    assert len(statements) == len(verdicts) >= len(chunks)
    assert result.reason.startswith("The score is")


@pytest.mark.slow
def test_read_verdicts_on_a_too_long_answer(judge: TransformersJudge) -> None:
    """Read verdicts need no model call until the reason, whose prompt shows the start of
    a long answer (and clipped statements), so a text far past the context window is scored
    and explained, with or without split_long_answers."""
    long_answer = " ".join(SENTENCES) * 120
    run = {"input": "Tell me about Paris.", "output": long_answer}
    for split in (False, True):
        scored = create_answer_relevancy_scorer(judge=judge, split_long_answers=split).run(**run)
        assert scored.status == "scored" and scored.score is not None
        assert scored.preprocess_step_result["statements"]
        assert scored.reason.startswith("The score is")
        assert scored.steps["generate_reason"].prompt_tokens < 3000
