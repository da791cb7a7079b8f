"""Prompt templates: exact rendered text, languages, and template safety."""

from __future__ import annotations

from pathlib import Path

import pytest

from offline_scorer import ConfigurationError
from offline_scorer.pipeline._prompts import LANGUAGES, render_prompt

STEPS = {
    "answer-relevancy": {
        "preprocess": {"output": "Paris. It is big."},
        "analyze": {"input": "Capital?", "statements": ["Paris.", "It is big."]},
        "reason": {
            "input": "Capital?",
            "output": "Paris.",
            "score": "0.65",
            "scale": "1",
            "statements": ["Paris.", "It is big."],
            "verdicts": [{"result": "yes", "reason": "r1"}, {"result": "unsure", "reason": "r2"}],
        },
    },
    "answer-similarity": {
        "preprocess": {"output": "Paris", "ground_truth": "Paris is the capital"},
        "analyze": {"output_units": ["Paris"], "ground_truth_units": ["Paris is the capital"]},
        "reason": {
            "output": "Paris",
            "ground_truth": "Paris is the capital",
            "score": "0.67",
            "scale": "1",
            "analysis": {
                "matches": [
                    {
                        "ground_truth_unit": "Paris is the capital",
                        "output_unit": "Paris",
                        "match_type": "semantic",
                        "explanation": "e",
                    }
                ],
                "extra_in_output": [],
                "contradictions": [],
            },
        },
    },
}


def other(value: object) -> object:
    """Another item's value of the same shape."""
    if isinstance(value, str):
        return value + " (other)"
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [v + " (other)" for v in value]
    return value


@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize("scorer", sorted(STEPS))
@pytest.mark.parametrize("step", ["preprocess", "analyze", "reason"])
def test_every_step_renders_system_first_and_identical_across_items(
    scorer: str, step: str, language: str
) -> None:
    first = render_prompt(scorer, language, step, STEPS[scorer][step])
    other_vars = {k: other(v) for k, v in STEPS[scorer][step].items()}
    second = render_prompt(scorer, language, step, other_vars)
    assert first[0]["role"] == "system" and first[1]["role"] == "user"
    assert first[0]["content"] == second[0]["content"]  # the instruction never varies
    assert first[1]["content"] != second[1]["content"]
    if step == "reason":
        assert first[2]["role"] == "assistant"
        assert first[2]["content"] in (
            "The score is 0.65 because",
            "The score is 0.67 because",
            "Le score est de 0.65 car",
            "Le score est de 0.67 car",
        )


def test_relevancy_analyze_user_text_is_pinned() -> None:
    messages = render_prompt(
        "answer-relevancy", "en", "analyze", STEPS["answer-relevancy"]["analyze"]
    )
    assert messages[1]["content"] == (
        'Question:\n"""\nCapital?\n"""\n\nStatements to judge:\n1. Paris.\n2. It is big.'
    )


def test_similarity_preprocess_user_text_is_pinned() -> None:
    messages = render_prompt(
        "answer-similarity", "en", "preprocess", STEPS["answer-similarity"]["preprocess"]
    )
    assert messages[1]["content"] == (
        'Answer:\n"""\nParis\n"""\n\nReference answer:\n"""\nParis is the capital\n"""'
    )


def test_missing_variable_is_an_error_not_an_empty_string() -> None:
    with pytest.raises(ConfigurationError, match="undefined"):
        render_prompt("answer-relevancy", "en", "analyze", {"input": "q"})


def test_unknown_template_and_escape_attempts(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="No prompt template"):
        render_prompt("answer-relevancy", "de", "analyze", {})
    (tmp_path / "secret.jinja").write_text(
        "{% block system %}x{% endblock %}{% block user %}y{% endblock %}"
    )
    folder = tmp_path / "prompts"
    folder.mkdir()
    with pytest.raises(ConfigurationError):
        render_prompt("..", "..", "secret", {}, folder=folder)


def test_user_templates_are_sandboxed(tmp_path: Path) -> None:
    step = tmp_path / "custom" / "en"
    step.mkdir(parents=True)
    (step / "preprocess.jinja").write_text(
        "{% block system %}s{% endblock %}{% block user %}{{ output.__class__.__mro__ }}{% endblock %}"
    )
    with pytest.raises(Exception, match="unsafe|access"):
        render_prompt("custom", "en", "preprocess", {"output": "x"}, folder=tmp_path)
