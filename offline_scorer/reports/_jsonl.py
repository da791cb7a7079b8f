"""Results as JSON lines: one line per item × scorer result, written whole or streamed."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TextIO

from offline_scorer._files import write_text_atomically
from offline_scorer.evals._types import EvalItem, EvalResult
from offline_scorer.pipeline._results import ScoreResult
from offline_scorer.reports._common import StrPath


def result_line(item: EvalItem, result: ScoreResult) -> dict[str, Any]:
    """One JSON-lines record: the item's position and id, the target error and the result.

    Args:
        item: the dataset item the result belongs to.
        result: one scorer's result for that item.

    Returns:
        A JSON-ready dict.
    """
    return {
        "item_index": item.index,
        "item_id": item.item_id,
        "target_error": item.target_error,
        **result.model_dump(mode="json"),
    }


def append_result_lines(items: Iterable[EvalItem], handle: TextIO) -> int:
    """Write one JSON line per item × scorer result to an open text stream.

    Args:
        items: evaluated items, e.g. as they finish.
        handle: a text stream opened for writing.

    Returns:
        The number of lines written.
    """
    count = 0
    for item in items:
        for result in item.results.values():
            handle.write(_json_line(result_line(item, result)))
            count += 1
    return count


def _json_line(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")) + "\n"


def iter_results(result: EvalResult) -> Iterator[tuple[EvalItem, ScoreResult]]:
    """Every (item, scorer result) pair, items in order.

    Args:
        result: the evaluation result.

    Yields:
        Pairs of an item and one of its results.
    """
    for item in result.items:
        for run in item.results.values():
            yield item, run


def write_results_jsonl(result: EvalResult, path: StrPath) -> Path:
    """Write every scorer result of every item as JSON lines.

    Each line holds every field of the :class:`ScoreResult` plus ``item_index``,
    ``item_id`` and ``target_error``. Items are written in order, and within an item the
    scorers in the order of ``item.results``. An item without results writes no line.

    Args:
        result: the evaluation result.
        path: the ``.jsonl`` file to write.

    Returns:
        The written path.
    """
    lines = (_json_line(result_line(item, run)) for item, run in iter_results(result))
    return write_text_atomically(path, "".join(lines))
