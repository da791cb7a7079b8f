"""The evaluation summary as pretty-printed JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from offline_scorer._files import write_text_atomically
from offline_scorer.evals._types import EvalResult
from offline_scorer.reports._common import StrPath


def summary_document(result: EvalResult) -> dict[str, Any]:
    """The summary as a JSON-ready dict: every summary field plus ``scores`` (the means).

    Args:
        result: the evaluation result.

    Returns:
        A JSON-ready dict.
    """
    return {**result.summary.model_dump(mode="json"), "scores": dict(result.scores)}


def write_summary_json(result: EvalResult, path: StrPath) -> Path:
    """Write the evaluation summary as pretty-printed JSON.

    Args:
        result: the evaluation result.
        path: the ``.json`` file to write.

    Returns:
        The written path.
    """
    text = json.dumps(summary_document(result), indent=2, ensure_ascii=False) + "\n"
    return write_text_atomically(path, text)
