"""Hard rows never sink their batch (issue 13): constraint failures stay with their row, and
any Unicode in a constant string works under the constraint.

Real parts: the embedded model (SmolLM2's byte-level BPE tokenizer, as Outlines reads it),
real Outlines indexes and guides. One test injects a fault into the model's generation call,
because no real input makes ``generate`` fail for one row here; it says so.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import pytest
from pydantic import StringConstraints, create_model

from offline_scorer import (
    JudgeOutputError,
    TransformersJudge,
    create_answer_similarity_scorer,
)
from offline_scorer.judges import outcomes
from offline_scorer.judges._keys import schema_text

pytestmark = pytest.mark.slow

ASK = [{"role": "user", "content": "Is Paris in France? Answer in JSON."}]
YesNo = create_model("YesNo", answer=(Literal["yes", "no"], ...))
# A pattern (not a constant) with a character this vocabulary cannot spell as whole tokens:
# Outlines refuses to build its index. Constants are escaped; patterns are the user's.
Unbuildable = create_model(
    "Unbuildable", name=(Annotated[str, StringConstraints(pattern="^Ó+$")], ...)
)

UNICODE_TEXTS = {
    "accents": "Óscar Arnulfo Romero y Galdámez",
    "cjk": "北京市",
    "emoji": "🎉 party 🇫🇷",
    "combining": "Ame\u0301lie",  # e + COMBINING ACUTE ACCENT
    "rtl": "שלום עליכם",
    "mixed": "Zoë — 東京 «ok»",
}


def test_a_row_whose_schema_cannot_be_compiled_fails_alone(judge: TransformersJudge) -> None:
    out = outcomes(judge.generate_json([ASK, ASK, ASK], [YesNo, Unbuildable, YesNo]))

    assert isinstance(out[0], YesNo) and isinstance(out[2], YesNo)
    assert isinstance(out[1], JudgeOutputError)
    message = str(out[1])
    assert "prompt 1" in message and "cannot be enforced" in message
    assert "vocabulary" in message and "other prompts of the batch are not affected" in message


def test_unicode_constants_are_spelled_as_json_escapes_and_decode_back(
    judge: TransformersJudge,
) -> None:
    fields: dict[str, Any] = {
        key: (Literal[text], ...)  # type: ignore[valid-type]
        for key, text in UNICODE_TEXTS.items()
    }
    Constants = create_model("Constants", **fields)
    Choice = create_model(
        "Choice",
        pick=(Literal[tuple(UNICODE_TEXTS.values())], ...),  # type: ignore[misc]
    )

    out = judge.generate_json([ASK, ASK, ASK], [Constants, YesNo, Choice])

    assert out[0].value.model_dump() == UNICODE_TEXTS
    assert isinstance(out[1].value, YesNo)
    assert out[2].value.pick in UNICODE_TEXTS.values()


def test_constants_enter_the_regex_as_ascii_json_escapes() -> None:
    import json

    from outlines_core.json_schema import build_regex_from_schema

    from offline_scorer.judges.transformers._constraint import (
        _escaped_constants,
        _placeholders_for_constants,
    )

    fields: dict[str, Any] = {
        key: (Literal[text], ...)  # type: ignore[valid-type]
        for key, text in UNICODE_TEXTS.items()
    }
    schema = json.loads(schema_text(create_model("Constants", **fields)))
    ascii_schema, constants = _placeholders_for_constants(schema)
    regex = _escaped_constants(build_regex_from_schema(json.dumps(ascii_schema), ""), constants)

    assert regex.isascii()
    assert "\\\\u00d3scar" in regex  # Ó as the JSON escape, its backslash escaped
    assert "\\\\ud83c\\\\udf89" in regex  # 🎉 as a surrogate pair
    assert sorted(constants.values()) == sorted(UNICODE_TEXTS.values())


def test_a_row_whose_guide_fails_mid_generation_stops_alone(judge: TransformersJudge) -> None:
    """Drives the real per-row processor with a token the second row's guide refuses."""
    import torch

    from offline_scorer.judges.transformers._constraint import (
        PerRowSchemaProcessor,
        SchemaCompiler,
    )

    tokenizer = judge.load().tokenizer
    compiler = SchemaCompiler(tokenizer)
    index = compiler.index_for(schema_text(YesNo))
    processor = PerRowSchemaProcessor([index, index], compiler, max_string_chars=50)
    vocab = len(tokenizer)
    brace = tokenizer.convert_tokens_to_ids("{")
    letter = tokenizer.convert_tokens_to_ids("x")

    first = processor(torch.zeros((2, 1), dtype=torch.long), torch.zeros((2, vocab)))
    assert torch.isfinite(first[0, brace]) and torch.isfinite(first[1, brace])

    # Row 0 continues with "{" (allowed); row 1 with "x" (its guide refuses it).
    second = processor(torch.tensor([[0, brace], [0, letter]]), torch.zeros((2, vocab)))

    assert processor.error(0) is None
    assert processor.error(1) is not None
    assert torch.isfinite(second[0]).sum() >= 1
    allowed_for_failed = torch.isfinite(second[1]).nonzero().flatten().tolist()
    assert allowed_for_failed == [tokenizer.eos_token_id]


class _OneRowBreaks(TransformersJudge):
    """Fault injection: generation raises whenever the poisoned prompt is in the batch.

    No real input makes transformers' ``generate`` fail for one row on this machine (the
    real failures seen were out-of-memory on GPUs and device errors), so the failure is
    injected at the model call; everything else is the real judge and model.
    """

    poison: tuple[int, ...] = ()

    def _forward(self, chunk, processor):  # type: ignore[no-untyped-def]
        if any(tuple(item.token_ids) == self.poison for item in chunk):
            raise RuntimeError("simulated device error in this row")
        return super()._forward(chunk, processor)


def test_a_generation_error_fails_only_its_row(judge: TransformersJudge) -> None:
    breaking = _OneRowBreaks(judge.load())
    poisoned = [{"role": "user", "content": "This prompt breaks the model call."}]
    breaking.poison = tuple(breaking._encode(0, poisoned).token_ids)

    out = outcomes(breaking.generate_json([ASK, poisoned, ASK, ASK], YesNo))

    assert [type(item).__name__ for item in out] == ["YesNo", "JudgeOutputError", "YesNo", "YesNo"]
    assert "prompt 1" in str(out[1]) and "simulated device error" in str(out[1])


def test_similarity_scores_unicode_references_in_both_modes(judge: TransformersJudge) -> None:
    runs = [
        {
            "run_id": "accents",
            "input": "Who was the archbishop of San Salvador killed in 1980?",
            "output": "Óscar Romero, the archbishop, was killed in 1980.",
            "ground_truth": UNICODE_TEXTS["accents"],
        },
        {
            "run_id": "cjk",
            "input": "What is the capital of China?",
            "output": "Beijing (北京市) is the capital.",
            "ground_truth": "北京市 (Beijing)",
        },
        {
            "run_id": "mixed",
            "input": "Say hello.",
            "output": "Hello 🎉",
            "ground_truth": "שלום 🎉 Ame\u0301lie",
        },
    ]
    for mode in ({"verdicts": "generate", "extraction": "model"}, {}):
        scorer = create_answer_similarity_scorer(judge=judge, **mode)
        results = scorer.run_batch(runs)
        for result in results:
            assert result.status == "scored", (mode, result.run_id, result.error)
            assert 0.0 <= result.score <= 1.0
        if mode:
            units = results[0].preprocess_step_result["ground_truth_units"]
            matched = [m["ground_truth_unit"] for m in results[0].analyze_step_result["matches"]]
            assert matched == units  # the constants came back as the reference's own text
            assert any("Ó" in unit or "á" in unit for unit in units)


# ----------------------------------------------------------------------- budgets

# Three constants already need about five times the 16-token budget below (eight needed
# about twelve times): the budget is exceeded either way, and more constants add time.
LONG_CONSTANTS = [f"Unit {n}: the river has {n} bridges." for n in range(1, 4)]


def test_a_schema_that_needs_more_than_the_budget_gets_what_it_needs(
    judge: TransformersJudge,
) -> None:
    from offline_scorer import GenerationSettings
    from offline_scorer.judges.transformers._budget import schema_token_bound

    Units = create_model(
        "Units",
        units=(tuple[tuple(Literal[text] for text in LONG_CONSTANTS)], ...),  # type: ignore[misc,valid-type]
    )
    small = judge.with_settings(GenerationSettings(max_new_tokens_json=16))
    bound = schema_token_bound(schema_text(Units), small.settings.max_string_tokens)
    assert bound is not None and bound > 16

    out = small.generate_json([ASK, ASK], [Units, YesNo])

    assert list(out[0].value.units) == LONG_CONSTANTS
    assert out[0].usage.generated_tokens > 16  # more than the configured budget, as needed
    assert isinstance(out[1].value, YesNo)


def test_schema_bounds_count_every_part() -> None:
    from offline_scorer.judges.transformers._budget import schema_token_bound

    Pick = create_model("Pick", choice=(Literal["yes", "no"], ...))
    # {"choice":"yes"} is 16 characters: braces 2, key 8 + quotes-colon-comma 2, value 5.
    assert schema_token_bound(schema_text(Pick), 64) == 2 + len('"choice"') + 2 + len('"yes"')
    Free = create_model("Free", text=(str, ...))
    assert schema_token_bound(schema_text(Free), 64) == 2 + len('"text"') + 2 + 64 + 3
    Unbounded = create_model("Unbounded", items=(list[str], ...))
    assert schema_token_bound(schema_text(Unbounded), 64) is None


def test_a_budget_shrinks_to_the_window_and_says_why_when_it_cannot_fit() -> None:
    """The window arithmetic alone: a context of 1,000 tokens, no model needed."""
    from types import SimpleNamespace

    from offline_scorer.judges.transformers._budget import (
        Encoded,
        budget_message,
        fit_to_window,
    )

    loaded: Any = SimpleNamespace(context_length=1000, model_id="tiny-window")
    items = [Encoded(0, [1] * 100), Encoded(1, [1] * 400), Encoded(2, [1] * 900)]
    results: list[Any] = [None] * 3
    usages: list[Any] = [None] * 3

    valid = fit_to_window(items, [800, 800, 800], 500, loaded, results, usages)

    assert [item.position for item in valid] == [0, 1]
    assert items[0].budget == 800  # fits as asked
    assert items[1].budget == 600 and items[1].wanted == 800  # shrunk to the window
    assert "context window of 1000" in str(results[2])
    message = budget_message(items[1], 1000, '{"units":[')
    assert "may need 800" in message and "leaves 600" in message


def test_a_long_answer_gets_a_reason_whose_prompt_stays_bounded(judge: TransformersJudge) -> None:
    """A 16,000-character answer: its last unit folds in the rest of the text, which the
    reason prompt once quoted two or three times over (12,000 tokens: past the window)."""
    from offline_scorer import create_answer_relevancy_scorer

    sentences = [
        f"Point {n}: the kidneys filter about {n + 100} litres of blood in one of their cycles."
        for n in range(220)
    ]
    output = " ".join(sentences)
    assert len(output) > 16000
    run = {
        "input": "What do the kidneys do?",
        "output": output,
        "ground_truth": "The kidneys filter blood. " + " ".join(sentences[:60]),
    }
    for scorer in (
        create_answer_similarity_scorer(judge=judge),
        create_answer_relevancy_scorer(judge=judge),
    ):
        result = scorer.run(**run)
        assert result.status == "scored" and result.reason
        assert result.reason.startswith("The score is")
        assert result.steps["generate_reason"].prompt_tokens < 3000
        shown = result.generate_reason_prompt[-2]["content"]  # type: ignore[index]
        assert "more characters]" in shown  # the long texts are clipped, and say so
