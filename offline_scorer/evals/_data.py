"""Reading evaluation datasets: JSONL, JSON, CSV, Python lists, DataFrames, HF datasets.

Every row is checked before any model loads. Problems are collected with their line
number (JSONL, CSV) or position (JSON, lists); by default all of them are reported at once
in a :class:`DataError`, with ``skip_invalid=True`` the good rows are kept and the bad ones
listed in ``Dataset.problems``.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from offline_scorer._exceptions import DataError
from offline_scorer._text import extract_text, ground_truth_text, has_ground_truth
from offline_scorer.evals._types import RowProblem

MISSING = object()


@dataclass(frozen=True)
class Fields:
    """Which column holds what."""

    input: str = "input"
    output: str = "output"
    ground_truth: str = "ground_truth"
    id: str = "id"
    request_context: str = "request_context"


@dataclass
class DataItem:
    """One usable dataset row."""

    index: int
    item_id: str
    line: int
    input: Any
    output: Any = MISSING
    ground_truth: Any = None
    request_context: dict[str, Any] | None = None

    @property
    def has_output(self) -> bool:
        """Whether the row carries a precomputed output."""
        return self.output is not MISSING


class LazyItems:
    """The usable items of a dataset file, read again from disk on every iteration.

    Only the rows being scored are in memory, whatever the size of the file.
    """

    def __init__(self, data: Any, fields: Fields, count: int):
        self._data = data
        self._fields = fields
        self._count = count

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[DataItem]:
        _, rows = _rows(self._data)
        index = 0
        for line, row in rows:
            if isinstance(row, RowProblem):
                continue
            checked = _check_row(row, line, index, self._fields)
            if isinstance(checked, DataItem):
                index += 1
                yield checked


@dataclass
class Dataset:
    """Usable items (a list, or :class:`LazyItems` for a file read lazily), and the rows
    that were skipped with why."""

    items: list[DataItem] | LazyItems
    problems: list[RowProblem] = field(default_factory=list)
    source: str = "<data>"
    lines_without_output: list[int] = field(default_factory=list)
    rows_with_ground_truth: int = 0

    def __len__(self) -> int:
        return len(self.items)


def load_dataset(
    data: Any,
    *,
    fields: Fields | None = None,
    skip_invalid: bool = False,
    lazy: bool = False,
) -> Dataset:
    """Read and check a dataset.

    Args:
        data: a path (``.jsonl``/``.ndjson``, ``.json``, ``.csv``), a list of dicts, a
            pandas DataFrame or a Hugging Face ``datasets.Dataset``.
        fields: column names (defaults: ``input``, ``output``, ``ground_truth``, ``id``).
        skip_invalid: keep the good rows and list the bad ones instead of failing.
        lazy: for a file, check every row now but keep none of them in memory; the items
            are read again from the file when iterated (for datasets of any size).

    Returns:
        The dataset.

    Raises:
        DataError: the file is missing or unreadable, the dataset is empty, or (without
            ``skip_invalid``) any row is invalid; the message lists every bad row.
    """
    fields = fields or Fields()
    source, rows = _rows(data)
    keep = not (lazy and isinstance(data, (str, os.PathLike)))
    items: list[DataItem] = []
    problems: list[RowProblem] = []
    count = 0
    lines_without_output: list[int] = []
    rows_with_ground_truth = 0
    for line, row in rows:
        if isinstance(row, RowProblem):
            problems.append(row)
            continue
        checked = _check_row(row, line, count, fields)
        if isinstance(checked, RowProblem):
            problems.append(checked)
        else:
            count += 1
            # Facts the callers need, gathered in this one pass (a lazy file is not re-read).
            if not checked.has_output:
                lines_without_output.append(checked.line)
            if has_ground_truth(checked.ground_truth):
                rows_with_ground_truth += 1
            if keep:
                items.append(checked)
    if problems and not skip_invalid:
        shown = [f"line {p.line}: {p.message}" for p in problems[:20]]
        raise invalid_rows_error(source, shown, len(problems))
    if count == 0:
        raise no_usable_rows_error(source)
    return Dataset(
        items if keep else LazyItems(data, fields, count),
        problems,
        source,
        lines_without_output,
        rows_with_ground_truth,
    )


def invalid_rows_error(source: str, shown: Sequence[str], count: int) -> DataError:
    """The error for ``count`` invalid rows of ``source``, listing (up to 20 of) ``shown``."""
    listed = "\n".join(f"  {problem}" for problem in shown[:20])
    more = f"\n  ... and {count - 20} more" if count > 20 else ""
    return DataError(
        f"{source}: {count} invalid row(s); nothing was scored.\n{listed}{more}\n"
        "Fix them, or pass --skip-invalid (skip_invalid=True) to score the other rows."
    )


def no_usable_rows_error(source: str) -> DataError:
    """The error for a dataset of which no row can be scored."""
    return DataError(f"{source}: the dataset has no usable rows.")


def _rows(data: Any) -> tuple[str, Iterator[tuple[int, Any]]]:
    if isinstance(data, (str, os.PathLike)):
        path = Path(data)
        if not path.is_file():
            raise DataError(f"Dataset file {path} does not exist.")
        suffix = path.suffix.lower()
        if suffix in (".jsonl", ".ndjson"):
            return str(path), _jsonl_rows(path)
        if suffix == ".json":
            return str(path), _json_rows(path)
        if suffix == ".csv":
            return str(path), _csv_rows(path)
        raise DataError(f"{path}: unknown dataset format '{suffix}'; use .jsonl, .json or .csv.")
    if _is_dataframe(data):
        return "<DataFrame>", enumerate(data.to_dict(orient="records"), start=1)
    if _is_hf_dataset(data):
        return "<datasets.Dataset>", enumerate(iter(data), start=1)
    if isinstance(data, Iterable) and not isinstance(data, (bytes, Mapping)):
        return "<list>", enumerate(data, start=1)
    raise DataError(
        f"Unsupported dataset of type {type(data).__name__}: pass a .jsonl/.json/.csv path, "
        "a list of dicts, a pandas DataFrame or a datasets.Dataset."
    )


def _read_text(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise DataError(f"{path} is not UTF-8 text (byte {error.start}).") from error
    except OSError as error:
        raise DataError(f"Cannot read {path}: {error}") from error


def _jsonl_rows(path: Path) -> Iterator[tuple[int, Any]]:
    # Line by line: a file of any size is never held in memory whole.
    with _open_text(path) as handle:
        try:
            for number, text in enumerate(handle, start=1):
                if not text.strip():
                    continue
                try:
                    yield number, json.loads(text)
                except json.JSONDecodeError as error:
                    yield number, RowProblem(line=number, message=f"invalid JSON: {error.msg}")
        except UnicodeDecodeError as error:
            raise DataError(f"{path} is not UTF-8 text (byte {error.start} of a block).") from error


def _open_text(path: Path) -> Any:
    try:
        return path.open(encoding="utf-8-sig", newline="")
    except OSError as error:
        raise DataError(f"Cannot read {path}: {error}") from error


def _json_rows(path: Path) -> Iterator[tuple[int, Any]]:
    try:
        value = json.loads(_read_text(path))
    except json.JSONDecodeError as error:
        raise DataError(f"{path}: invalid JSON at line {error.lineno}: {error.msg}") from error
    if isinstance(value, Mapping) and isinstance(value.get("data"), list):
        value = value["data"]
    if not isinstance(value, list):
        raise DataError(f"{path}: a JSON dataset must be a list of objects (or {{'data': [...]}}).")
    return enumerate(value, start=1)


def _csv_rows(path: Path) -> Iterator[tuple[int, Any]]:
    with _open_text(path) as handle:
        try:
            reader = csv.DictReader(handle)
            if not reader.fieldnames:
                raise DataError(f"{path}: the CSV file has no header row.")
            for row in reader:
                # line_num is the physical line of the row's end (quoted cells may span lines).
                yield reader.line_num, {k: v for k, v in row.items() if k is not None}
        except UnicodeDecodeError as error:
            raise DataError(f"{path} is not UTF-8 text (byte {error.start} of a block).") from error
        except csv.Error as error:
            raise DataError(f"{path}: unreadable CSV at line {reader.line_num}: {error}") from error


def _check_row(row: Any, line: int, index: int, fields: Fields) -> DataItem | RowProblem:
    if not isinstance(row, Mapping):
        return RowProblem(line=line, message=f"expected an object, got {type(row).__name__}")
    value = row.get(fields.input)
    if value is None or (isinstance(value, str) and not value.strip()):
        return RowProblem(line=line, message=f"missing '{fields.input}'")
    try:
        extract_text(value, side="input", field=fields.input)
        output = row.get(fields.output, MISSING)
        if output is not MISSING and output is not None:
            extract_text(output, side="output", field=fields.output)
        ground_truth = row.get(fields.ground_truth)
        ground_truth_text(ground_truth)
    except TypeError as error:
        return RowProblem(line=line, message=str(error))
    context = row.get(fields.request_context)
    if context is not None and not isinstance(context, Mapping):
        return RowProblem(line=line, message=f"'{fields.request_context}' must be an object")
    raw_id = row.get(fields.id)
    return DataItem(
        index=index,
        item_id=str(raw_id) if raw_id not in (None, "") else str(index + 1),
        line=line,
        input=value,
        output="" if output is None else output,
        ground_truth=ground_truth,
        request_context=dict(context) if context else None,
    )


def _is_dataframe(data: Any) -> bool:
    return type(data).__name__ == "DataFrame" and hasattr(data, "to_dict")


def _is_hf_dataset(data: Any) -> bool:
    return type(data).__module__.startswith("datasets") and hasattr(data, "column_names")
