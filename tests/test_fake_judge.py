"""offline_scorer.testing.FakeJudge: a scripted judge that behaves like a real one (no model)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, Field

from offline_scorer import (
    CachedJudge,
    ConfigurationError,
    ItemUsage,
    Judge,
    JudgeOutputError,
    PromptStep,
    ReplayMissError,
    StepContext,
    create_scorer,
)
from offline_scorer.judges import outcomes, values
from offline_scorer.judges._protocol import CALL_LOG_SIZE, LabelScores
from offline_scorer.pipeline import Parts
from offline_scorer.testing import Answer, FakeJudge, FakeRequest, Rule, assert_score


class Tone(BaseModel):
    polite: bool
    words: list[str] = Field(max_length=2)


class Topic(BaseModel):
    topic: str


def ask(content: str, system: str = "Judge it.") -> list[dict[str, str]]:
    return [{"role": "system", "content": system}, {"role": "user", "content": content}]


def test_it_satisfies_the_judge_protocol_and_its_names_are_public() -> None:
    import offline_scorer
    import offline_scorer.testing as testing

    assert isinstance(FakeJudge(), Judge)
    assert testing.__all__ == sorted(testing.__all__)
    assert "FakeJudge" in testing.__all__ and "FakeJudge" not in offline_scorer.__all__
    for name in testing.__all__:
        assert (getattr(testing, name).__doc__ or "").strip(), name


def test_json_answers_by_schema_class_name_or_function() -> None:
    judge = FakeJudge(
        json={Tone: {"polite": True, "words": ["please"]}, "Topic": Topic(topic="weather")}
    )
    tone, topic = values(judge.generate_json([ask("a"), ask("b")], [Tone, Topic]))
    assert tone == Tone(polite=True, words=["please"]) and topic == Topic(topic="weather")
    by_function = FakeJudge(json=lambda prompt, schema: {"topic": prompt[-1]["content"].upper()})
    assert values(by_function.generate_json([ask("rain")], Topic)) == [Topic(topic="RAIN")]


def test_a_scripted_json_answer_that_does_not_fit_fails_like_a_model_output() -> None:
    judge = FakeJudge(json={Tone: {"polite": "maybe", "words": ["a", "b", "c"]}, Topic: "{oops"})
    with pytest.raises(JudgeOutputError, match="does not match schema Tone") as caught:
        values(judge.generate_json([ask("a")], Tone))
    assert "polite" in str(caught.value) and "words" in str(caught.value)
    assert caught.value.raw_output == '{"polite": "maybe", "words": ["a", "b", "c"]}'
    (failure,) = outcomes(judge.generate_json([ask("a")], Topic))
    assert isinstance(failure, JudgeOutputError) and failure.raw_output == "{oops"


def test_text_and_label_answers() -> None:
    judge = FakeJudge(text=lambda prompt: f"About {prompt[-1]['content']}.", labels={"yes": -0.1})
    assert values(judge.generate_text([ask("cats"), ask("dogs")])) == ["About cats.", "About dogs."]
    judge = FakeJudge(labels={"yes": -0.10004, "no": math.log(0.1), "unsure": -5})
    (scores,) = values(judge.score_labels([ask("x")], ["yes", "unsure", "no"]))
    assert scores.labels == ("yes", "unsure", "no")
    assert scores.logprobs == (-0.1, -5.0, -2.3026) and scores.best == "yes"
    assert scores.hidden is None


def test_label_answers_from_a_function_or_label_scores() -> None:
    def by_prompt(prompt: Any, labels: tuple[str, ...]) -> Any:
        good = "good" in prompt[-1]["content"]
        return {label: (-0.01 if (label == "yes") == good else -4.6) for label in labels}

    judge = FakeJudge(labels=by_prompt)
    results = values(judge.score_labels([ask("good"), ask("bad")], [["yes", "no"], ["no", "yes"]]))
    assert [r.best for r in results] == ["yes", "no"]
    fixed = LabelScores(("yes", "no"), (-0.5, -1.0))
    assert values(FakeJudge(labels=fixed).score_labels([ask("x")], ["yes", "no"])) == [fixed]


@pytest.mark.parametrize(
    ("script", "message"),
    [
        ({"yes": -0.1}, r"no scripted log-probability for \['no'\]"),
        ({"yes": 0.9, "no": 0.1}, "must be finite and <= 0"),
        (LabelScores(("no", "yes"), (-1.0, -0.5)), "asked"),
        ("yes", "not str"),
    ],
)
def test_a_label_answer_that_does_not_fit_fails_that_prompt(script: Any, message: str) -> None:
    (failure,) = outcomes(FakeJudge(labels=script).score_labels([ask("x")], ["yes", "no"]))
    assert isinstance(failure, ConfigurationError) and re.search(message, str(failure))


def test_bad_label_requests_fail_like_a_real_judge() -> None:
    with pytest.raises(ConfigurationError, match="two distinct"):
        values(FakeJudge(labels={"yes": 0}).score_labels([ask("x")], ["yes"]))


def test_rules_match_the_last_user_message_and_come_first() -> None:
    judge = FakeJudge(
        json={Topic: {"topic": "default"}},
        text="default",
        rules=[
            ("rain", {"topic": "weather"}),
            (re.compile(r"\bgoal\b"), {"topic": "sport"}),
            Rule("rain", '{"topic": "from raw JSON"}', kind="json"),  # never reached
            ("rain", "It is about rain."),
        ],
    )
    prompts = [ask("more rain"), ask("a goal!"), ask("goalkeeper"), ask("x", system="rain")]
    assert [t.topic for t in values(judge.generate_json(prompts, Topic))] == [
        "weather",
        "sport",
        "default",
        "default",  # the rule reads the last user message, not the system message
    ]
    assert values(judge.generate_text(prompts[:2])) == ["It is about rain.", "default"]


def test_rules_with_functions_or_label_dicts_name_their_kind() -> None:
    judge = FakeJudge(
        rules=[
            Rule("x", lambda prompt, labels: {label: -1.0 for label in labels}, kind="labels"),
            Rule("x", lambda prompt: "text from a function", kind="text"),
        ]
    )
    assert values(judge.score_labels([ask("x")], ["a", "b"]))[0].logprobs == (-1.0, -1.0)
    assert values(judge.generate_text([ask("x")])) == ["text from a function"]
    with pytest.raises(ConfigurationError, match="kind="):
        FakeJudge(rules=[("x", lambda prompt: "?")])


def test_exceptions_script_failures_and_return_exceptions_is_honoured() -> None:
    judge = FakeJudge(
        text="fine",
        json={Topic: {"topic": "t"}},
        rules=[("boom", RuntimeError("simulated device failure"))],
    )
    with pytest.raises(RuntimeError, match="simulated device failure"):
        values(judge.generate_text([ask("ok"), ask("boom")]))
    results = outcomes(judge.generate_text([ask("ok"), ask("boom"), ask("ok")]))
    assert results[0] == results[2] == "fine" and isinstance(results[1], RuntimeError)
    failures = outcomes(judge.generate_json([ask("boom")], Topic))
    assert isinstance(failures[0], RuntimeError)  # an exception rule serves every kind
    scripted = FakeJudge(text=lambda prompt: ValueError("returned, not raised"))
    assert isinstance(outcomes(scripted.generate_text([ask("a")]))[0], ValueError)


def test_a_raising_function_makes_the_whole_call_raise() -> None:
    def broken(prompt: Any) -> str:
        raise MemoryError("the model cannot run at all")

    with pytest.raises(MemoryError):
        outcomes(FakeJudge(text=broken).generate_text([ask("a")]))


def test_a_missing_answer_fails_loudly_and_shows_the_prompt() -> None:
    judge = FakeJudge(json={Tone: {"polite": True, "words": []}})
    with pytest.raises(ReplayMissError, match="schema Topic.*'where is it'"):
        values(judge.generate_json([ask("where is it")], Topic))
    (miss,) = outcomes(judge.score_labels([ask("q")], ["yes", "no"]))
    assert isinstance(miss, ReplayMissError) and "labels ['yes', 'no']" in str(miss)
    with pytest.raises(ReplayMissError, match="free text"):
        values(judge.generate_text([ask("q")]))


def test_usage_is_counted_from_characters_or_given_exactly() -> None:
    judge = FakeJudge(
        text="x" * 41,
        json={Topic: Answer({"topic": "t"}, ItemUsage(7, 3, 0.5, truncated=True))},
        labels={"yes": -1, "no": -2},
    )
    prompt = ask("u" * 30, system="s" * 10)  # 40 characters of content
    (text,) = judge.generate_text([prompt])
    assert isinstance(text, Answer) and text.value == "x" * 41
    assert text.usage == ItemUsage(10, 10, 0.0)
    (topic,) = judge.generate_json([prompt], Topic)
    assert topic.value == Topic(topic="t") and topic.usage == ItemUsage(7, 3, 0.5, truncated=True)
    (labels,) = judge.score_labels([prompt], ["yes", "no"])
    assert labels.usage == ItemUsage(10, 0, 0.0)
    assert [call.kind for call in judge.call_log] == ["text", "json", "labels"]
    assert [call.generated_tokens for call in judge.call_log] == [10, 3, 0]
    totals = judge.usage_totals
    assert (totals.calls, totals.prompts, totals.prompt_tokens) == (3, 3, 27)


def test_requests_are_recorded_and_the_call_log_stays_bounded() -> None:
    judge = FakeJudge(text="ok", labels={"a": -1, "b": -1})
    values(judge.generate_text([ask("one"), ask("two")]))
    values(judge.score_labels([ask("three")], ["a", "b"]))
    assert judge.requests == [
        FakeRequest("text", ask("one"), call=0, index=0),
        FakeRequest("text", ask("two"), call=0, index=1),
        FakeRequest("labels", ask("three"), labels=("a", "b"), call=1, index=0),
    ]
    assert judge.requests[1].last_user_message == "two"
    for _ in range(CALL_LOG_SIZE * 2):
        values(judge.generate_text([ask("again")]))
    assert len(judge.call_log) == CALL_LOG_SIZE
    assert judge.usage_totals.calls == CALL_LOG_SIZE * 2 + 2
    quiet = FakeJudge(text="ok", keep_requests=False)
    values(quiet.generate_text([ask("one")]))
    assert quiet.requests == [] and quiet.usage_totals.prompts == 1


def test_empty_calls_are_logged_with_their_kind() -> None:
    judge = FakeJudge()
    assert values(judge.generate_json([], Topic)) == [] and values(judge.generate_text([])) == []
    assert [call.kind for call in judge.call_log] == ["json", "text"]


def test_model_identity_is_settable_and_keys_the_cache(tmp_path: Path) -> None:
    judge = FakeJudge(text=lambda prompt: "first", model_id="my-model")
    assert (judge.model_id, judge.fingerprint) == ("my-model", "my-model@fake")
    cached = CachedJudge(judge, tmp_path / "cache.sqlite")
    assert values(cached.generate_text([ask("q")])) == ["first"]
    assert values(cached.generate_text([ask("q")])) == ["first"] and judge.usage_totals.calls == 1
    judge.fingerprint = "my-model@other-weights"
    assert values(cached.generate_text([ask("q")])) == ["first"] and judge.usage_totals.calls == 2


def _tone_scorer(judge: FakeJudge) -> Any:
    def render(ctx: StepContext) -> list[dict[str, str]]:
        return ask(ctx.output_text, system="Is this polite?")

    return create_scorer(
        id="tone",
        judge=judge,
        analyze=PromptStep(render, schema=Tone),
        generate_score=lambda ctx: 1.0 if ctx.analyze_result["polite"] else 0.0,
        generate_reason=PromptStep(lambda ctx: ask(f"Explain {ctx.score}")),
    )


def test_a_custom_scorer_tested_end_to_end() -> None:
    judge = FakeJudge(
        json={Tone: {"polite": True, "words": ["please"]}},
        text=lambda prompt: "Polite." if "1.0" in prompt[-1]["content"] else "Rude.",
        rules=[("idiot", {"polite": False, "words": ["idiot"]})],
    )
    scorer = _tone_scorer(judge)
    good = assert_score(scorer, output="Please sit.", minimum=1)
    assert good.reason == "Polite." and good.model_id == "fake-judge"
    assert good.steps["analyze"].model_call and good.steps["analyze"].prompt_tokens == 6
    with pytest.raises(AssertionError, match=r"below the minimum 0.5(.|\n)*Rude\."):
        assert_score(scorer, output="Sit, idiot.", minimum=0.5)
    assert [(r.kind, r.schema) for r in judge.requests] == [
        ("json", Tone),
        ("text", None),
        ("json", Tone),
        ("text", None),
    ]
    assert judge.requests[2].messages[-1]["content"] == "Sit, idiot."


def test_a_label_step_and_a_scripted_failure_in_a_batch() -> None:
    judge = FakeJudge(
        labels={"yes": math.log(0.8), "no": math.log(0.2)},
        rules=[("broken", JudgeOutputError("simulated: the model wrote nonsense"))],
    )
    scorer = create_scorer(
        id="verdict",
        judge=judge,
        analyze=PromptStep(lambda ctx: ask(ctx.output_text), labels=("yes", "no")),
        generate_score=lambda ctx: ctx.analyze_result.probabilities["yes"],
    )
    results = scorer.run_batch([{"output": "fine"}, {"output": "broken"}, {"output": "ok"}])
    assert [r.status for r in results] == ["scored", "failed", "scored"]
    assert results[0].score == pytest.approx(0.8, abs=1e-4)
    assert "simulated: the model wrote nonsense" in (results[1].error or "")
    assert judge.usage_totals.calls == 1  # the whole stage in one call, as with a real judge


def test_the_parts_of_a_label_step_can_each_read_their_own_labels() -> None:
    def by_prompt(prompt: Any, labels: tuple[str, ...]) -> Any:
        return {label: math.log(1 / len(labels)) for label in labels}

    judge = FakeJudge(labels=by_prompt)

    def render(ctx: StepContext) -> Parts:
        return Parts(
            prompts=[ask("grade it"), ask("same thing?")],
            merge=lambda ctx, parts: [dict(part.probabilities) for part in parts],
            labels=[("exact", "partial", "missing"), ("yes", "no")],
        )

    scorer = create_scorer(
        id="two-questions",
        judge=judge,
        analyze=PromptStep(render, labels=("exact", "partial", "missing")),
        generate_score=lambda ctx: ctx.analyze_result[1]["yes"],
    )
    result = scorer.run(output="Paris.")
    assert [r.labels for r in judge.requests] == [("exact", "partial", "missing"), ("yes", "no")]
    assert judge.usage_totals.calls == 1  # both parts in one call
    assert result.score == pytest.approx(0.5, abs=1e-4)
    assert set(result.analyze_step_result[0]) == {"exact", "partial", "missing"}
    with pytest.raises(ValueError, match="2 prompts but 1 labels"):
        Parts(prompts=[ask("a"), ask("b")], merge=lambda ctx, parts: parts, labels=[("yes", "no")])


def test_results_survive_a_json_round_trip() -> None:
    judge = FakeJudge(json={Tone: {"polite": False, "words": []}}, text="No.")
    result = _tone_scorer(judge).run(output="Go away.")
    assert json.loads(result.model_dump_json())["analyze_step_result"] == {
        "polite": False,
        "words": [],
    }
