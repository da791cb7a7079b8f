"""Text extraction from the accepted input/output shapes."""

from __future__ import annotations

import pytest

from offline_scorer._text import extract_text, ground_truth_text

MESSAGES = [
    {"role": "system", "content": "be nice"},
    {"role": "user", "content": "first question"},
    {"role": "assistant", "content": "first answer"},
    {"role": "user", "content": [{"type": "text", "text": "second question"}]},
    {"role": "assistant", "content": [{"type": "text", "text": "final answer"}]},
    {"role": "assistant", "content": [{"type": "tool-call", "toolName": "search"}]},
]


def test_plain_string() -> None:
    assert extract_text("hello", side="output") == "hello"


def test_input_takes_first_user_message_with_text() -> None:
    assert extract_text(MESSAGES, side="input") == "first question"


def test_output_takes_last_assistant_message_with_text_skipping_tool_only() -> None:
    assert extract_text(MESSAGES, side="output") == "final answer"


def test_dict_with_text_or_content() -> None:
    assert extract_text({"text": "a"}, side="output") == "a"
    assert extract_text({"content": [{"type": "text", "text": "b"}]}, side="output") == "b"


def test_missing_text_is_empty() -> None:
    assert extract_text(None, side="input") == ""
    assert extract_text([], side="output") == ""
    assert extract_text([{"role": "user", "content": "q"}], side="output") == ""


@pytest.mark.parametrize(
    "value", [42, 3.5, b"bytes", {"other": 1}, [1, 2], [{"role": "assistant", "content": 5}]]
)
def test_unsupported_shapes_raise_type_error_naming_accepted_shapes(value: object) -> None:
    with pytest.raises(TypeError) as caught:
        extract_text(value, side="output")
    assert "output" in str(caught.value)


@pytest.mark.parametrize("value", [None, "", "   ", "\n\t"])
def test_missing_ground_truth(value: object) -> None:
    assert ground_truth_text(value) is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [(0, "0"), ("Paris", "Paris"), ({"a": 1}, '{"a":1}'), ([1, "x"], '[1,"x"]'), (2.5, "2.5")],
)
def test_non_string_ground_truth_is_compact_json(value: object, expected: str) -> None:
    assert ground_truth_text(value) == expected
