"""Model cards and turning a model reference into a loaded model and tokenizer.

A model reference is one of: the name of a card in ``models/`` (the embedded default is
one), a local Hugging Face model directory, or a local ``.gguf`` file. Nothing here ever
asks a model hub for anything: every load is ``local_files_only``.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, model_validator

from offline_scorer._exceptions import ModelLoadError, UnknownModelError
from offline_scorer._resources import data_folder
from offline_scorer.judges._parts import (
    FilePart,
    SplitFile,
    check_parts_present,
    locate_parts,
    module_file,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

logger = logging.getLogger(__name__)

DEFAULT_MODEL = "smollm2-135m-instruct"
"""The model every judge uses when none is named: the embedded card."""
FALLBACK_BATCH_SIZE = 8
"""Prompts per forward pass on a CPU for a card that recommends none, and for a model
without a card."""
ACCELERATOR_BATCH_SIZE = 64
"""Prompts per forward pass on a GPU (or MPS) for a card that recommends none, and for a
model without a card. A decode step there costs about the same from 1 to 64 rows (the 1.5B
card's shape on an H200: 437 generated tokens/s at 8 rows, 3,261 at 64; RESULTS.md), and a
pass that runs out of memory is retried in halves."""
_PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")
_SIDECAR = "offline_scorer.json"


class ModelSource(BaseModel):
    """Where a model card's weights come from.

    Three kinds: ``package-file`` (a file inside one installed package), ``path`` (a local
    file) and ``package-parts`` (one file split into consecutive pieces across several
    packages, listed in ``parts``; ``file`` then names the joined file, and ``size_bytes``
    and ``sha256`` describe the whole).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["package-file", "path", "package-parts"]
    package: str | None = None
    module: str | None = None
    file: str
    size_bytes: int | None = None
    sha256: str | None = None
    install: str | None = None
    parts: tuple[FilePart, ...] = ()
    """The pieces of a ``package-parts`` file, in order."""

    @model_validator(mode="after")
    def _parts_add_up(self) -> ModelSource:
        if self.kind != "package-parts":
            if self.parts:
                raise ValueError(f"a '{self.kind}' source has no parts")
            return self
        if not self.parts or self.size_bytes is None or self.sha256 is None:
            raise ValueError("a 'package-parts' source needs parts, size_bytes and sha256")
        if sum(part.size_bytes for part in self.parts) != self.size_bytes:
            raise ValueError("the parts' sizes do not add up to size_bytes")
        if len({part.package for part in self.parts}) != len(self.parts):
            raise ValueError("two parts name the same package")
        return self

    @property
    def split(self) -> bool:
        """Whether the file is split across packages (``package-parts``)."""
        return self.kind == "package-parts"


class VerdictModelFile(BaseModel):
    """A card's fitted verdict models: a JSON file next to the card, checked by sha256."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    file: str
    sha256: str


class ModelCard(BaseModel):
    """One known model: where its weights are and how to run it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str
    license: str
    parameters: int
    context_length: int
    chat_format: str
    recommended_dtype: str = "auto"
    recommended_batch_size: int = FALLBACK_BATCH_SIZE
    """Prompts per forward pass on a CPU."""
    recommended_accelerator_batch_size: int = ACCELERATOR_BATCH_SIZE
    """Prompts per forward pass on a GPU or MPS."""
    extraction: Literal["model", "split"] = "model"
    """How the built-in scorers extract statements and units by default: the judge writes
    them (``model``) or a deterministic sentence splitter cuts them (``split``, for judges
    too small to list statements faithfully)."""
    source: ModelSource
    verdicts: VerdictModelFile | None = None
    """Verdict models fitted for this judge (scorers read verdicts with them by default)."""


def list_model_cards() -> list[ModelCard]:
    """Return every model card shipped in ``models/``, sorted by name."""
    cards = []
    for path in sorted(data_folder("models").glob("*.toml")):
        with path.open("rb") as handle:
            cards.append(ModelCard.model_validate(tomllib.load(handle)))
    return cards


def card_for(reference: object) -> ModelCard | None:
    """The card a model reference names, or None (a path, a loaded model, an unknown name)."""
    if not isinstance(reference, str) or os.sep in reference or Path(reference).exists():
        return None
    return {card.name: card for card in list_model_cards()}.get(reference)


def card_summary(card: ModelCard) -> dict[str, object]:
    """What ``offline-scorer models`` shows of a card: presence, size, checksum, modes.

    For a card split across packages, ``parts_present`` / ``parts_total`` count its pieces,
    ``size_bytes`` is the installed pieces' total and ``path`` is None (no single file).
    """
    status = card_status(card)
    return {
        "name": card.name,
        "present": status.present,
        "path": str(status.path) if status.path else None,
        "size_bytes": status.size_bytes,
        "card_size_bytes": card.source.size_bytes,
        "parts_present": status.parts_present,
        "parts_total": len(card.source.parts) if card.source.split else None,
        "checksum": status.checksum,
        "license": card.license,
        "install": card.source.install,
        "verdicts": "read (fitted verdict model)" if card.verdicts else "generate",
        "extraction": card.extraction,
    }


def get_model_card(name: str) -> ModelCard:
    """Return the card called ``name``.

    Raises:
        UnknownModelError: no card has that name; the message lists the known names.
    """
    cards = {card.name: card for card in list_model_cards()}
    if name not in cards:
        known = ", ".join(sorted(cards))
        raise UnknownModelError(
            f"Unknown model '{name}': it is not a model card name and no such path exists. "
            f"Known model cards: {known}. Or pass a local Hugging Face model directory or a "
            ".gguf file."
        )
    return cards[name]


def card_weights_path(card: ModelCard) -> Path | None:
    """Where the card's weight file is on this machine, or None when it is not installed.

    Always None for a card split across packages: it has no single file until it is joined.
    """
    return source_path(card.source)


def source_path(source: ModelSource) -> Path | None:
    """Where a card source's file is on this machine, or None when it is not installed."""
    if source.kind == "path":
        path = Path(source.file).expanduser()
        return path if path.exists() else None
    if source.split:
        return None
    assert source.module is not None
    # Located, not imported: the package's __init__ imports dependencies we don't install.
    return module_file(source.module, source.file)


def split_file(card: ModelCard) -> SplitFile:
    """The pieces of a card split across packages, with what errors about them name."""
    return SplitFile(card.name, card.source.install, card.source.parts)


_SHA_MEMO: dict[tuple[str, int, int], str] = {}


def sha256_of(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB blocks (memoized per path, size and mtime)."""
    stat = path.stat()
    memo_key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if memo_key in _SHA_MEMO:
        return _SHA_MEMO[memo_key]
    _SHA_MEMO[memo_key] = _hash_file(path)
    return _SHA_MEMO[memo_key]


def _hash_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True)
class CardStatus:
    """Whether a model card's weights are on this machine and intact."""

    card: ModelCard
    path: Path | None
    size_bytes: int | None
    checksum: Literal["ok", "mismatch", "unknown", "absent", "incomplete"]
    """``incomplete``: some, not all, pieces of a split card are installed."""
    parts_present: int | None = None
    """How many pieces of a split card are installed (None for a single-file card)."""

    @property
    def present(self) -> bool:
        """Whether the card's weights (every piece of a split card) are on this machine."""
        if self.parts_present is not None:
            return self.parts_present == len(self.card.source.parts)
        return self.path is not None


def card_status(card: ModelCard, *, verify: bool = True) -> CardStatus:
    """Check a card against this machine (presence, size, and sha256 when ``verify``).

    A split card is checked piece by piece: each piece's size, and with ``verify`` its
    sha256 (memoized like any file's, so a second check in one process reads nothing).
    """
    if card.source.split:
        return _split_status(card, verify=verify)
    path = card_weights_path(card)
    if path is None:
        return CardStatus(card, None, None, "absent")
    size = path.stat().st_size
    if not verify or card.source.sha256 is None:
        return CardStatus(card, path, size, "unknown")
    ok = sha256_of(path) == card.source.sha256
    return CardStatus(card, path, size, "ok" if ok else "mismatch")


def _split_status(card: ModelCard, *, verify: bool) -> CardStatus:
    found = locate_parts(card.source.parts)
    size = found.size_on_disk()
    if not found.complete:
        checksum: Literal["absent", "incomplete"] = "incomplete" if found.present else "absent"
        return CardStatus(card, None, size, checksum, parts_present=found.present)
    pairs = [(part, path) for part, path in zip(found.parts, found.paths) if path is not None]
    if any(path.stat().st_size != part.size_bytes for part, path in pairs):
        return CardStatus(card, None, size, "mismatch", parts_present=found.present)
    if not verify:
        return CardStatus(card, None, size, "unknown", parts_present=found.present)
    ok = all(sha256_of(path) == part.sha256 for part, path in pairs)
    return CardStatus(card, None, size, "ok" if ok else "mismatch", parts_present=found.present)


# --------------------------------------------------------------------------- resolution


@dataclass(frozen=True)
class ResolvedModel:
    """A model reference turned into a concrete local source."""

    kind: Literal["gguf", "hf-dir"]
    path: Path
    """The weights; for a card split across packages, its first piece (see ``parts``)."""
    model_id: str
    card: ModelCard | None = None
    parts: tuple[Path, ...] = ()
    """Every piece of a card split across packages, in order; they are verified and joined
    into one .gguf when the model is first converted."""


def resolve_model(reference: str | os.PathLike[str]) -> ResolvedModel:
    """Turn a card name, HF directory or .gguf path into a :class:`ResolvedModel`.

    Raises:
        UnknownModelError: neither a card name nor an existing path.
        ModelLoadError: the card's weights are not installed, or the path holds no weights.
    """
    text = os.fspath(reference)
    path = Path(text).expanduser()
    if path.exists():
        if path.is_file():
            if path.suffix.lower() != ".gguf":
                raise ModelLoadError(
                    f"Model file {path} is not a .gguf file. Pass a .gguf file or a Hugging "
                    "Face model directory (config.json plus *.safetensors)."
                )
            return ResolvedModel("gguf", path.resolve(), model_id=path.name)
        _check_hf_directory(path, allow_pickle=True)  # presence only; safety checked at load
        return ResolvedModel("hf-dir", path.resolve(), model_id=path.resolve().name)
    if os.sep in text or text.endswith(".gguf"):
        raise ModelLoadError(f"Model path {path} does not exist. Check the path and try again.")
    card = get_model_card(text)
    if card.source.split:
        # Presence and sizes only: the sha256 of every piece is checked while joining them,
        # which happens once, when no converted copy exists yet.
        parts = check_parts_present(split_file(card))
        return ResolvedModel("gguf", parts[0], model_id=card.name, card=card, parts=parts)
    weights = card_weights_path(card)
    if weights is None:
        hint = f" Install it with: {card.source.install}" if card.source.install else ""
        raise ModelLoadError(
            f"The weights of model card '{card.name}' ({card.source.file}) are not on this "
            f"machine.{hint}"
        )
    return ResolvedModel("gguf", weights, model_id=card.name, card=card)


def model_fingerprint(resolved: ResolvedModel) -> str:
    """Identity of a resolved model's weights, computed without loading them.

    A card split across packages is named by its whole file's sha256 from the card: the
    pieces are not hashed on every load (their checksums are verified when they are joined).
    """
    if resolved.parts and resolved.card is not None and resolved.card.source.sha256:
        return f"{resolved.model_id}@sha256:{resolved.card.source.sha256[:16]}"
    if resolved.kind == "gguf":
        return f"{resolved.model_id}@sha256:{sha256_of(resolved.path)[:16]}"
    return f"{resolved.model_id}@{_directory_fingerprint(resolved.path)}"


def _check_hf_directory(path: Path, *, allow_pickle: bool) -> None:
    if not (path / "config.json").is_file():
        raise ModelLoadError(
            f"Model directory {path} has no config.json: it is not a Hugging Face model "
            "directory. Pass a directory saved with save_pretrained(), or a .gguf file."
        )
    if any(path.glob("*.safetensors")):
        return
    pickles = [p.name for p in path.iterdir() if p.suffix in _PICKLE_SUFFIXES]
    if not pickles:
        raise ModelLoadError(
            f"Model directory {path} contains no weights (*.safetensors). "
            "Copy the model's safetensors files into it."
        )
    if not allow_pickle:
        raise ModelLoadError(
            f"Model directory {path} only has pickle weights ({', '.join(sorted(pickles))}). "
            "Pickle files can run arbitrary code when loaded. Convert them to safetensors, "
            "or pass allow_pickle=True (CLI: --allow-pickle) if you trust their origin."
        )


def _directory_fingerprint(path: Path) -> str:
    """A cheap identity for a model directory: its config and its weight files' sizes."""
    digest = hashlib.sha256((path / "config.json").read_bytes())
    for weights in sorted(path.glob("*.safetensors")):
        digest.update(f"{weights.name}:{weights.stat().st_size}".encode())
    return f"dir:{digest.hexdigest()[:16]}"
