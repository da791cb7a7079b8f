"""The transformers judge with the REAL embedded model (no mocks of transformers/Outlines)."""

from __future__ import annotations

import socket
from typing import Literal

import pytest
from pydantic import BaseModel, Field

from offline_scorer import (
    ContextLengthError,
    GenerationSettings,
    JudgeOutputError,
    TransformersJudge,
    load_model,
)

pytestmark = pytest.mark.slow

ITEMS = ["banana", "carrot", "a granite rock", "strawberry", "broccoli"]


class Food(BaseModel):
    kind: Literal["fruit", "vegetable", "other"]
    colors: list[str] = Field(max_length=3)


def prompt(item: str) -> list[dict[str, str]]:
    return [
        {
            "role": "system",
            "content": "Classify the item as fruit, vegetable or other and list its usual colours.",
        },
        {"role": "user", "content": item},
    ]


def test_batch_returns_valid_objects_and_equals_one_by_one(judge: TransformersJudge) -> None:
    batched = judge.generate_json([prompt(item) for item in ITEMS], Food)
    assert len(batched) == len(ITEMS)
    assert all(isinstance(result, Food) for result in batched)
    call = judge.call_log[-1]
    assert call.kind == "json" and len(call.items) == len(ITEMS)
    assert all(item.prompt_tokens > 0 and item.generated_tokens > 0 for item in call.items)
    one_by_one = [judge.generate_json([prompt(item)], Food)[0] for item in ITEMS]
    assert one_by_one == batched


def test_per_prompt_schemas_in_one_batch(judge: TransformersJudge) -> None:
    class Three(BaseModel):
        words: list[str] = Field(min_length=3, max_length=3)

    class One(BaseModel):
        words: list[str] = Field(min_length=1, max_length=1)

    prompts = [prompt("list three words"), prompt("list one word")]
    three, one = judge.generate_json(prompts, [Three, One])
    assert len(three.words) == 3 and len(one.words) == 1


def test_empty_prompt_list(judge: TransformersJudge) -> None:
    assert judge.generate_json([], Food) == []
    assert judge.generate_text([]) == []


def test_text_generation_is_bounded_and_uses_prefill(judge: TransformersJudge) -> None:
    messages = prompt("banana") + [{"role": "assistant", "content": "The banana is"}]
    (text,) = judge.generate_text([messages])
    assert text.startswith("The banana is")
    assert judge.call_log[-1].items[0].generated_tokens <= judge.settings.max_new_tokens_text


def test_second_load_uses_converted_copy(judge: TransformersJudge) -> None:
    again = load_model("smollm2-135m-instruct")
    assert again.from_converted_cache
    assert again.fingerprint == judge.fingerprint


def test_prompt_longer_than_context_is_a_clear_error(judge: TransformersJudge) -> None:
    long_prompt = prompt("word " * 9000)
    with pytest.raises(ContextLengthError, match="context window of 8192"):
        judge.generate_json([long_prompt], Food)
    results = judge.generate_json([long_prompt, prompt("banana")], Food, return_exceptions=True)
    assert isinstance(results[0], ContextLengthError) and isinstance(results[1], Food)


def test_budget_exhausted_before_json_closes(judge: TransformersJudge) -> None:
    tight = TransformersJudge(judge.load(), settings=GenerationSettings(max_new_tokens_json=16))

    class Long(BaseModel):
        sentences: list[str] = Field(min_length=6)

    with pytest.raises(JudgeOutputError, match="max_new_tokens_json=16"):
        tight.generate_json([prompt("write six sentences")], Long)


def test_strings_are_closed_at_their_token_cap(judge: TransformersJudge) -> None:
    """A loop of one-character tokens (digits) is cut by max_string_tokens, not only by chars."""
    capped = TransformersJudge(
        judge.load(), settings=GenerationSettings(max_string_tokens=12, max_string_chars=1000)
    )

    class Digits(BaseModel):
        number: str

    ask = [
        {"role": "system", "content": "Answer in JSON."},
        {"role": "user", "content": "Write the digits 1234567890 ten times in a row, no spaces."},
    ]
    result = capped.generate_json([ask], Digits)[0]
    tokenizer = judge.load().tokenizer
    # The opening token may carry the quote and a first character; 12 more at most follow.
    assert len(tokenizer(result.number, add_special_tokens=False)["input_ids"]) <= 13
    assert capped.call_log[-1].generated_tokens <= 24


def test_load_and_generate_with_every_socket_blocked(
    judge: TransformersJudge, monkeypatch: pytest.MonkeyPatch
) -> None:
    attempts: list[object] = []

    def refuse(self: socket.socket, address: object) -> None:
        attempts.append(address)
        raise OSError(f"network access attempted: {address}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    fresh = TransformersJudge()  # a new load, from the converted copy
    (result,) = fresh.generate_json([prompt("banana")], Food)
    assert isinstance(result, Food)
    assert fresh.generate_text([prompt("banana")])[0]
    assert attempts == []
