"""Writing files atomically: readers never see a half-written file."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

StrPath = str | os.PathLike[str]


def write_text_atomically(path: StrPath, text: str) -> Path:
    """Write ``text`` as UTF-8 to a temporary file next to ``path``, then rename it over ``path``.

    Lone surrogates (possible in strings decoded from JSON) are written as ``\\uXXXX``
    escapes instead of failing; inside a JSON string that escape decodes back to the same
    character.

    Args:
        path: the file to write; missing parent folders are created.
        text: the whole content.

    Returns:
        The written path.
    """
    return _write_atomically(path, text, "w", encoding="utf-8", errors="backslashreplace")


def write_bytes_atomically(path: StrPath, data: bytes) -> Path:
    """Write ``data`` to a temporary file next to ``path``, then rename it over ``path``
    (missing parent folders are created); returns the written path."""
    return _write_atomically(path, data, "wb")


def _write_atomically(
    path: StrPath,
    content: str | bytes,
    mode: str,
    encoding: str | None = None,
    errors: str | None = None,
) -> Path:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(handle, mode, encoding=encoding, errors=errors) as stream:
            stream.write(content)
        make_readable(temporary)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return target


def make_readable(path: str) -> None:
    """Give a ``mkstemp`` file (private, 0600) the permissions a plain ``open`` would give."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, 0o666 & ~umask)
