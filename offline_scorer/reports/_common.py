"""Pieces every report writer shares."""

from __future__ import annotations

import os
import re

from offline_scorer.evals._types import EvalResult

StrPath = str | os.PathLike[str]

# Characters XML 1.0 does not allow (C0 controls other than tab/newline/return, lone
# surrogates, U+FFFE and U+FFFF). They are dropped from XML and replaced in HTML.
INVALID_XML_CHARS = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def scorer_ids(result: EvalResult) -> list[str]:
    """Scorer ids in report order: the summary's, then any others found on items.

    Args:
        result: the evaluation result.

    Returns:
        The ids, each once.
    """
    ids = dict.fromkeys(result.summary.scorers)
    for item in result.items:
        ids.update(dict.fromkeys(item.results))
    return list(ids)
