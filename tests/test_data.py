"""Dataset reading: formats, field names, and bad rows reported with their lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from offline_scorer import DataError, Fields, load_dataset


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_jsonl_json_csv_and_lists_give_the_same_items(tmp_path: Path) -> None:
    rows = [
        {"id": "a", "input": "Q1", "output": "A1", "ground_truth": "G1"},
        {"id": "b", "input": "Q2", "output": "A2", "ground_truth": "G2"},
    ]
    jsonl = write(tmp_path / "d.jsonl", "\n".join(json.dumps(r) for r in rows) + "\n\n")
    as_json = write(tmp_path / "d.json", json.dumps(rows))
    as_csv = write(tmp_path / "d.csv", "id,input,output,ground_truth\na,Q1,A1,G1\nb,Q2,A2,G2\n")
    for source in (jsonl, as_json, as_csv, rows):
        data = load_dataset(source)
        assert [(i.item_id, i.input, i.output, i.ground_truth) for i in data.items] == [
            ("a", "Q1", "A1", "G1"),
            ("b", "Q2", "A2", "G2"),
        ]


def test_custom_field_names(tmp_path: Path) -> None:
    path = write(tmp_path / "d.jsonl", json.dumps({"question": "Q", "answer": "A", "ref": "R"}))
    data = load_dataset(path, fields=Fields(input="question", output="answer", ground_truth="ref"))
    assert (data.items[0].input, data.items[0].output, data.items[0].ground_truth) == (
        "Q",
        "A",
        "R",
    )


def test_bad_rows_are_listed_with_line_numbers(tmp_path: Path) -> None:
    text = "\n".join(
        [
            json.dumps({"input": "ok", "output": "fine"}),
            "{not json",
            json.dumps({"output": "no input"}),
            json.dumps({"input": "Q", "output": 42}),
            json.dumps(["not", "an", "object"]),
        ]
    )
    path = write(tmp_path / "d.jsonl", text)
    with pytest.raises(DataError) as caught:
        load_dataset(path)
    message = str(caught.value)
    for line in ("line 2: invalid JSON", "line 3: missing 'input'", "line 4:", "line 5:"):
        assert line in message
    assert "--skip-invalid" in message
    kept = load_dataset(path, skip_invalid=True)
    assert len(kept) == 1 and [p.line for p in kept.problems] == [2, 3, 4, 5]


def test_missing_output_column_means_no_output(tmp_path: Path) -> None:
    data = load_dataset([{"input": "Q"}, {"input": "Q", "output": None}])
    assert not data.items[0].has_output
    assert data.items[1].has_output and data.items[1].output == ""


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("empty.jsonl", "", "no usable rows"),
        ("bad.json", "{", "invalid JSON"),
        ("obj.json", '{"a": 1}', "list of objects"),
        ("data.txt", "x", "unknown dataset format"),
        ("noheader.csv", "", "no header"),
    ],
)
def test_unusable_files(tmp_path: Path, name: str, content: str, message: str) -> None:
    with pytest.raises(DataError, match=message):
        load_dataset(write(tmp_path / name, content))


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="does not exist"):
        load_dataset(tmp_path / "nope.jsonl")


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin.jsonl"
    path.write_bytes(b'{"input": "caf\xe9"}\n')
    with pytest.raises(DataError, match="UTF-8"):
        load_dataset(path)
