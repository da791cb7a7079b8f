"""The input of a Ray run: rows read by Ray Data, and the checking pass before any model.

JSONL files are read as text lines and parsed in the workers, so every row means exactly
what it means to a local run; CSV cells of the named fields are read as text, as locally.
In-memory data is checked on the driver first and handed to Ray as JSON rows.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from offline_scorer._exceptions import DataError
from offline_scorer._text import has_ground_truth
from offline_scorer.evals._core import RowFacts
from offline_scorer.evals._data import (
    Dataset,
    Fields,
    _check_row,
    invalid_rows_error,
    load_dataset,
    no_usable_rows_error,
)
from offline_scorer.evals._types import RowProblem
from offline_scorer.evals.ray._cluster import import_ray

if TYPE_CHECKING:
    import pyarrow

# CPUs requested by the read and write tasks. Reading rows and writing results is light next
# to the model, and the actors may hold every core (a 2-core machine, GPU nodes whose CPUs
# all go to actors): a task that asked for a CPU would then wait for ever.
IO_CPUS = 0


@dataclass
class RaySource:
    """The input as a Ray Dataset, and how its rows are decoded."""

    dataset: Any
    row_format: Literal["json", "table"]
    name: str


@dataclass
class RowCheck:
    """What the checking pass learned about the rows (see :func:`scan_rows`)."""

    usable: int = 0
    without_output: list[str] = field(default_factory=list)
    with_ground_truth: int = 0
    problems: list[RowProblem] = field(default_factory=list)

    def facts(self, fields: Fields) -> RowFacts:
        """What the shared row check needs (rows without an output are named by id)."""
        return RowFacts(self.without_output, self.with_ground_truth, f"{fields.id}s")


def ray_source(data: Any, fields: Fields, skip_invalid: bool) -> RaySource:
    """Read ``data`` with Ray Data readers (files) or hand checked rows to Ray (in memory).

    Raises:
        DataError: a missing file, an unknown format, or bad in-memory rows.
    """
    ray = import_ray()
    if isinstance(data, ray.data.Dataset):
        return RaySource(data, "table", "<ray.data.Dataset>")
    if isinstance(data, (str, os.PathLike)):
        path = Path(data)
        if not path.exists():
            raise DataError(f"Dataset file {path} does not exist.")
        suffix = (path.suffix if path.is_file() else _folder_suffix(path)).lower()
        if suffix in (".jsonl", ".ndjson"):
            return RaySource(ray.data.read_text(str(path), num_cpus=IO_CPUS), "json", str(path))
        if suffix == ".csv":
            return RaySource(_read_csv(ray, path, fields), "table", str(path))
        if suffix == ".parquet":
            return RaySource(ray.data.read_parquet(str(path), num_cpus=IO_CPUS), "table", str(path))
        if suffix != ".json":
            raise DataError(
                f"{path}: unknown dataset format '{suffix}'; the Ray backend reads .jsonl, "
                ".csv and .parquet files (and .json, checked on this machine first)."
            )
    dataset = (
        data
        if isinstance(data, Dataset)
        else load_dataset(data, fields=fields, skip_invalid=skip_invalid)
    )
    return RaySource(
        ray.data.from_items([{"text": _item_json(item, fields)} for item in dataset.items]),
        "json",
        dataset.source,
    )


def _folder_suffix(path: Path) -> str:
    """The format of a folder of files (as Ray writes them): the suffix of its files."""
    suffixes = {child.suffix for child in path.iterdir() if child.is_file()}
    return suffixes.pop() if len(suffixes) == 1 else ""


def _read_csv(ray: Any, path: Path, fields: Fields) -> Any:
    from pyarrow import csv, string

    # Locally every CSV cell is text; without this, arrow would turn "8" into the number 8.
    names = (fields.input, fields.output, fields.ground_truth, fields.id)
    convert = csv.ConvertOptions(column_types=dict.fromkeys(names, string()))
    return ray.data.read_csv(str(path), convert_options=convert, num_cpus=IO_CPUS)


def _item_json(item: Any, fields: Fields) -> str:
    """A checked in-memory item as one JSON row, with the id a local run gives it."""
    row: dict[str, Any] = {fields.id: item.item_id, fields.input: item.input}
    if item.has_output:
        row[fields.output] = item.output
    if item.ground_truth is not None:
        row[fields.ground_truth] = item.ground_truth
    if item.request_context is not None:
        row[fields.request_context] = item.request_context
    return json.dumps(row, ensure_ascii=False)


def decode_rows(table: pyarrow.Table, row_format: str) -> Iterator[Any]:
    """The rows of one batch as plain Python values (a parse error becomes a RowProblem)."""
    for row in table.to_pylist():
        if row_format != "json":
            yield row
            continue
        try:
            yield json.loads(row["text"])
        except json.JSONDecodeError as error:
            yield RowProblem(line=0, message=f"invalid JSON: {error.msg}: {row['text'][:80]!r}")


def checked_items(table: pyarrow.Table, row_format: str, fields: Fields) -> Iterator[Any]:
    """Each row of a batch checked as a local run checks it: a DataItem or a RowProblem."""
    for row in decode_rows(table, row_format):
        if isinstance(row, RowProblem):
            yield row
            continue
        checked = _check_row(row, 0, 0, fields)
        if isinstance(checked, RowProblem):
            shown = row.get(fields.id) if isinstance(row, Mapping) else None
            where = f"row with {fields.id}={shown!r}" if shown not in (None, "") else "a row"
            yield RowProblem(line=0, message=f"{where}: {checked.message}")
        elif not isinstance(row, Mapping) or row.get(fields.id) in (None, ""):
            yield RowProblem(
                line=0,
                message=(
                    f"a row has no '{fields.id}': the Ray backend reads files in parallel "
                    "blocks and cannot number rows as a local run does; give every row a "
                    f"unique id (or name the id column with --id-field)"
                ),
            )
        else:
            yield checked


def scan_rows(source: RaySource, fields: Fields, skip_invalid: bool) -> RowCheck:
    """Check every row with cheap Ray tasks before any model loads.

    Raises:
        DataError: invalid rows (unless ``skip_invalid``), or no usable row at all.
    """
    row_format = source.row_format

    def summarize(table: pyarrow.Table) -> dict[str, list[Any]]:
        usable, with_truth = 0, 0
        without_output: list[str] = []
        problems: list[str] = []
        for checked in checked_items(table, row_format, fields):
            if isinstance(checked, RowProblem):
                problems.append(checked.message)
                continue
            usable += 1
            with_truth += has_ground_truth(checked.ground_truth)
            if not checked.has_output:
                without_output.append(checked.item_id)
        return {
            "usable": [usable],
            "with_ground_truth": [with_truth],
            "without_output": [json.dumps(without_output[:10])],
            "problems": [json.dumps(problems[:20])],
            "problem_count": [len(problems)],
        }

    check = RowCheck()
    count = 0
    for part in source.dataset.map_batches(summarize, batch_format="pyarrow").take_all():
        check.usable += int(part["usable"])
        check.with_ground_truth += int(part["with_ground_truth"])
        check.without_output.extend(json.loads(part["without_output"]))
        count += int(part["problem_count"])
        check.problems.extend(RowProblem(line=0, message=m) for m in json.loads(part["problems"]))
    if count and not skip_invalid:
        raise invalid_rows_error(source.name, [p.message for p in check.problems], count)
    if check.usable == 0:
        raise no_usable_rows_error(source.name)
    return check
