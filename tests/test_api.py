"""The public surface, option validation and scorer construction (no model needed)."""

from __future__ import annotations

import math
import sys

import pytest

import offline_scorer
from offline_scorer import (
    ConfigurationError,
    UnknownScorerError,
    create_answer_relevancy_scorer,
    create_answer_similarity_scorer,
    create_scorer,
    get_scorer,
    not_scorable,
)


def test_all_is_sorted_importable_and_documented() -> None:
    names = offline_scorer.__all__
    assert names == sorted(names)
    for name in names:
        value = getattr(offline_scorer, name)
        if not isinstance(value, str):
            assert (value.__doc__ or "").strip(), f"{name} has no docstring"


def test_import_is_cheap() -> None:
    import subprocess

    code = "import sys, offline_scorer; print(sorted(m for m in ('torch','transformers','outlines') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("kwargs", "option"),
    [
        ({"uncertainty_weight": -0.1}, "uncertainty_weight"),
        ({"uncertainty_weight": 1.5}, "uncertainty_weight"),
        ({"uncertainty_weight": math.nan}, "uncertainty_weight"),
        ({"scale": 0}, "scale"),
        ({"scale": math.inf}, "scale"),
    ],
)
def test_relevancy_options_out_of_range(kwargs: dict[str, float], option: str) -> None:
    with pytest.raises(ValueError, match=option):
        create_answer_relevancy_scorer(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "option"),
    [
        ({"missing_penalty": -1}, "missing_penalty"),
        ({"contradiction_penalty": math.nan}, "contradiction_penalty"),
        ({"extra_info_penalty": -0.01}, "extra_info_penalty"),
        ({"semantic_threshold": math.inf}, "semantic_threshold"),
        ({"exact_match_bonus": -0.2}, "exact_match_bonus"),
        ({"scale": 0}, "scale"),
    ],
)
def test_similarity_options_out_of_range(kwargs: dict[str, float], option: str) -> None:
    with pytest.raises(ValueError, match=option):
        create_answer_similarity_scorer(**kwargs)


def test_options_are_merged_over_defaults() -> None:
    scorer = create_answer_similarity_scorer(scale=10)
    assert scorer.options_dict()["missing_penalty"] == 0.15
    assert scorer.options_dict()["scale"] == 10


def test_unknown_language() -> None:
    with pytest.raises(ConfigurationError, match="language"):
        create_answer_relevancy_scorer(language="de")


def test_missing_generate_score_fails_at_construction() -> None:
    with pytest.raises(ConfigurationError, match="generate_score"):
        create_scorer(id="x", preprocess=lambda ctx: {})


def test_unknown_scorer_id_lists_known() -> None:
    with pytest.raises(UnknownScorerError) as caught:
        get_scorer("answer-relevance")
    assert "answer-relevancy" in str(caught.value) and "answer-similarity" in str(caught.value)
    assert isinstance(caught.value, KeyError)


def test_function_only_scorer_and_not_scorable() -> None:
    def preprocess(ctx):  # type: ignore[no-untyped-def]
        return not_scorable("no answer") if not ctx.output_text else {"n": len(ctx.output_text)}

    scorer = create_scorer(
        id="length", preprocess=preprocess, generate_score=lambda ctx: ctx.preprocess_result["n"]
    )
    assert scorer.run(input="q", output="four").score == 4.0
    result = scorer.run(input="q", output="")
    assert result.status == "not_scorable" and result.score is None
    assert result.not_scorable_reason == "no answer"


def test_failing_function_step_fails_only_its_run() -> None:
    def score(ctx):  # type: ignore[no-untyped-def]
        if ctx.output_text == "bad":
            raise RuntimeError("boom")
        return 1

    scorer = create_scorer(id="s", generate_score=score)
    results = scorer.run_batch([{"output": "good"}, {"output": "bad"}, {"output": "fine"}])
    assert [r.status for r in results] == ["scored", "failed", "scored"]
    assert results[1].error.startswith("Scorer run failed:")
    assert results[1].failed_step == "generate_score" and "boom" in results[1].error
    with pytest.raises(offline_scorer.ScorerRunError, match="^Scorer run failed:"):
        scorer.run(output="bad")


def test_bad_output_shape_is_a_type_error() -> None:
    scorer = create_scorer(id="s", generate_score=lambda ctx: 1)
    with pytest.raises(TypeError, match="Accepted"):
        scorer.run(input="q", output=12345)


def test_similarity_missing_ground_truth_required_fails_without_model_call() -> None:
    # No judge can be built or called: the default model would need loading; a failing
    # judge factory proves no model call is attempted.
    def no_judge():  # type: ignore[no-untyped-def]
        raise AssertionError("the judge must not be used")

    scorer = create_answer_similarity_scorer(judge=None, model=None)
    scorer._judge_source = no_judge  # the factory is private; replaced to watch for use
    scorer._judge = None
    result = scorer.run_batch([{"input": "q", "output": "a", "ground_truth": "  "}])[0]
    assert result.status == "failed" and result.failed_step == "preprocess"
    assert "requires a ground truth" in result.error


def test_similarity_missing_ground_truth_optional_scores_zero_without_model_call() -> None:
    def no_judge():  # type: ignore[no-untyped-def]
        raise AssertionError("the judge must not be used")

    scorer = create_answer_similarity_scorer(require_ground_truth=False)
    scorer._judge_source = no_judge
    scorer._judge = None
    result = scorer.run(input="q", output="a", ground_truth=None)
    assert result.score == 0 and "no ground truth" in (result.reason or "")


def test_custom_scorer_from_a_template_folder_with_a_replayed_judge(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A user-defined prompt step rendered from the user's own template folder."""
    import json

    from pydantic import BaseModel

    from offline_scorer import PromptStep, ReplayJudge, template_prompt
    from offline_scorer.judges._keys import request_key, schema_text

    class Tone(BaseModel):
        polite: bool

    folder = tmp_path / "prompts" / "tone" / "en"
    folder.mkdir(parents=True)
    (folder / "analyze.jinja").write_text(
        "{% block system %}Is the answer polite?{% endblock %}"
        "{% block user %}{{ output }} (max {{ options.get('scale', 1) }}){% endblock %}"
    )
    render = template_prompt("tone", "analyze", folder=tmp_path / "prompts")
    messages = [
        {"role": "system", "content": "Is the answer polite?"},
        {"role": "user", "content": "Thanks! (max 1)"},
    ]
    key = request_key("fake@1", messages, schema_text(Tone))
    recording = tmp_path / "rec.json"
    recording.write_text(
        json.dumps(
            {
                "format": "offline-scorer-recording/1",
                "entries": {
                    key: {
                        "model": "fake@1",
                        "kind": "json",
                        "messages": messages,
                        "schema": None,
                        "output": '{"polite":true}',
                    }
                },
            }
        )
    )
    scorer = create_scorer(
        id="tone",
        judge=ReplayJudge(recording),
        analyze=PromptStep(render, schema=Tone),
        generate_score=lambda ctx: 1.0 if ctx.analyze_result["polite"] else 0.0,
    )
    result = scorer.run(input="q", output="Thanks!")
    assert result.score == 1.0 and result.analyze_prompt == messages


def test_model_and_judge_are_exclusive() -> None:
    with pytest.raises(ConfigurationError, match="either"):
        create_scorer(id="x", judge=object(), model="m", generate_score=lambda ctx: 1)  # type: ignore[arg-type]
