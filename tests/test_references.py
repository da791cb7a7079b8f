"""Several acceptable references (issue 13 item 3): scored against each, the best kept.

The pipeline tests use function steps (no model needed: the expansion and the choice of the
winner are the pipeline's). The similarity tests run the real embedded model.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from offline_scorer import (
    TransformersJudge,
    create_answer_similarity_scorer,
    create_scorer,
    load_dataset,
    run_evals,
)
from offline_scorer.scorers._common import reference_alternatives


def _overlap_scorer(reasons: list[str]):  # type: ignore[no-untyped-def]
    """Scores the share of the reference's words in the answer; records each reason asked."""

    def score(ctx):  # type: ignore[no-untyped-def]
        words = str(ctx.ground_truth).lower().split()
        return sum(word in ctx.output_text.lower() for word in words) / len(words)

    def reason(ctx):  # type: ignore[no-untyped-def]
        reasons.append(ctx.ground_truth)
        return f"best against {ctx.ground_truth}"

    return create_scorer(
        id="overlap",
        generate_score=score,
        generate_reason=reason,
        references=reference_alternatives,
    )


def test_the_best_reference_wins_and_only_it_is_explained() -> None:
    reasons: list[str] = []
    scorer = _overlap_scorer(reasons)
    results = scorer.run_batch(
        [
            {
                "input": "q",
                "output": "the city of light",
                "ground_truth": ["Paris", "City of Light"],
            },
            {"input": "q", "output": "paris", "ground_truth": "Paris"},
            {"input": "q", "output": "x", "ground_truth": ["a b", "c d"]},  # a tie at 0
        ]
    )

    first, plain, tie = results
    assert first.score == 1.0 and first.reference_index == 1
    assert first.ground_truth == ["Paris", "City of Light"]  # the caller's value, unchanged
    assert [(r.ground_truth, r.score, r.status) for r in first.references or []] == [
        ("Paris", 0.0, "scored"),
        ("City of Light", 1.0, "scored"),
    ]
    assert first.reason == "best against City of Light"
    assert plain.reference_index is None and plain.references is None
    assert tie.reference_index == 0  # the earliest reference on ties
    assert reasons == ["City of Light", "Paris", "a b"]  # one reason per run, the winner's


def test_a_failing_reference_does_not_lose_the_run() -> None:
    def score(ctx):  # type: ignore[no-untyped-def]
        if ctx.ground_truth == "boom":
            raise ValueError("cannot score this reference")
        return 0.5

    scorer = create_scorer(id="s", generate_score=score, references=reference_alternatives)
    result = scorer.run_batch([{"input": "q", "output": "a", "ground_truth": ["boom", "ok"]}])[0]

    assert result.status == "scored" and result.score == 0.5 and result.reference_index == 1
    failed = (result.references or [])[0]
    assert failed.status == "failed" and failed.score is None
    assert "cannot score this reference" in (failed.error or "")


def test_reference_alternatives_rules() -> None:
    assert reference_alternatives(["Paris", " Paris ", "", "City of Light"]) == [
        "Paris",
        "City of Light",
    ]
    assert reference_alternatives(["Paris"]) == ["Paris"]
    assert reference_alternatives([]) == []
    assert reference_alternatives("Paris / City of Light | Lutetia") == [
        "Paris",
        "City of Light",
        "Lutetia",
    ]
    assert reference_alternatives("Paris / City of Light", split_strings=False) is None
    assert reference_alternatives("Paris") is None
    assert reference_alternatives("1 / 2") is None  # a fraction, not alternatives
    assert reference_alternatives("AC/DC") is None  # no spaces around the slash
    long_text = "word " * 40 + "/ other"
    assert reference_alternatives(long_text) is None
    with pytest.raises(TypeError, match=r"ground_truth\[1\].*dict"):
        reference_alternatives(["Paris", {"a": 1}])


def test_a_list_of_references_with_a_dict_is_refused_before_any_model_call() -> None:
    scorer = create_scorer(
        id="s", generate_score=lambda ctx: 1.0, references=reference_alternatives
    )
    with pytest.raises(TypeError, match=r"runs\[1\]\.ground_truth\[0\]"):
        scorer.run_batch(
            [{"input": "q", "output": "a"}, {"input": "q", "output": "a", "ground_truth": [{}]}]
        )


def test_data_rows_accept_a_list_and_an_empty_list_is_no_reference(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    rows = [
        {"input": "q1", "output": "a", "ground_truth": ["Paris", "City of Light"]},
        {"input": "q2", "output": "a", "ground_truth": []},
        {"input": "q3", "output": "a", "ground_truth": ["", " "]},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    data = load_dataset(path)
    assert data.items[0].ground_truth == ["Paris", "City of Light"]
    assert data.rows_with_ground_truth == 1


@pytest.mark.slow
def test_similarity_keeps_the_best_reference_with_the_real_model(
    judge: TransformersJudge, tmp_path: Path
) -> None:
    path = tmp_path / "qa.jsonl"
    rows = [
        {
            "id": "list",
            "input": "What is the capital of France?",
            "output": "It is known as the City of Light.",
            "ground_truth": ["Paris", "City of Light"],
        },
        {
            "id": "string",
            "input": "What is the capital of France?",
            "output": "Paris.",
            "ground_truth": "Lutetia / Paris",
        },
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    scorer = create_answer_similarity_scorer(judge=judge)
    single = create_answer_similarity_scorer(judge=judge, split_alternatives=False)

    result = run_evals(path, [scorer], progress=False)
    listed, stringed = (item.results[scorer.id] for item in result.items)

    for run in (listed, stringed):
        assert run.status == "scored" and run.references is not None
        scores = [outcome.score for outcome in run.references]
        assert run.score == max(scores)  # type: ignore[type-var]
        assert run.reference_index == scores.index(run.score)
        assert run.reason
    assert listed.reference_index == 1 and stringed.reference_index == 1
    # With split_alternatives off the string is one reference (read verdicts still match
    # either alias inside it, so the score can be the same).
    whole = single.run(**{k: rows[1][k] for k in ("input", "output", "ground_truth")})
    assert whole.status == "scored"
    assert whole.references is None and whole.reference_index is None
