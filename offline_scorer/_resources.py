"""Where the shipped data folders (model cards, prompt templates) live.

In a built wheel they are mapped into ``offline_scorer/_data/``; in a source checkout
(including an editable install) they sit at the repository root.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def data_folder(name: str) -> Path:
    """Return the shipped folder ``name`` (``models`` or ``prompts``)."""
    for candidate in (_PACKAGE / "_data" / name, _PACKAGE.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(
        f"offline-scorer's '{name}' folder is missing from the installation "
        f"(looked in {_PACKAGE / '_data'} and {_PACKAGE.parent}); reinstall the package."
    )
