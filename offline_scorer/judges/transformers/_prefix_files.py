"""Shared prefixes kept on disk, so that a new process does not compute them again.

A step's system block is the same for every item and every run: on a CPU its keys and
values cost a forward pass of some 60 tokens each time a process starts (2.3 s for the
1.5B card in float32 on 2 cores). ``PrefixFiles`` keeps them in the user cache folder,
``prefixes/`` next to ``converted/``, one small safetensors file per prefix (about 3.5 MB
for the 1.5B card's 62-token block, 1.1 MB for the embedded card's).

A file is used only by a process that would compute exactly the same numbers: its name
and its metadata hold the model's fingerprint (with its dtype), the device, torch's and
transformers' versions, the CPU kernels torch dispatches to, the thread count and the
packed weight layout, with the prefix's token ids. Anything unreadable or not matching
is deleted and computed again; a folder that cannot be written costs only the saving.
Nothing in this folder is needed: deleting it is always safe.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from offline_scorer._files import write_bytes_atomically

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)

# Files kept per cache folder; the least recently written beyond this are removed.
MAX_FILES = 64
FORMAT = "offline-scorer prefix 1"


def prefix_identity(fingerprint: str, dtype: str, threads: int, packed_layers: int) -> str:
    """Everything the keys and values of a prefix computed on this CPU depend on, but its
    token ids."""
    import torch
    import transformers

    return "|".join(
        (
            FORMAT,
            fingerprint,
            dtype,
            "cpu",
            f"torch {torch.__version__}",
            f"transformers {transformers.__version__}",
            f"kernels {torch.backends.cpu.get_cpu_capability()}",
            f"threads {threads}",
            f"packed {packed_layers}",
        )
    )


class PrefixFiles:
    """The keys and values of shared prefixes of one loaded model, kept in ``folder``."""

    def __init__(self, folder: Path, identity: str, max_files: int = MAX_FILES):
        self.folder = folder
        self.identity = identity
        self.max_files = max_files
        self.loads = 0
        self.saves = 0
        self._warned = False

    def path(self, ids: Sequence[int]) -> Path:
        """The file of this prefix."""
        digest = hashlib.sha256(f"{self.identity}\n{_ids_text(ids)}".encode()).hexdigest()
        return self.folder / f"{digest[:40]}.safetensors"

    def load(self, ids: Sequence[int]) -> list[tuple[torch.Tensor, torch.Tensor]] | None:
        """The stored per-layer (keys, values) of ``ids``, or None when there are none."""
        path = self.path(ids)
        if not path.is_file():
            return None
        try:
            from safetensors import safe_open

            with safe_open(str(path), framework="pt", device="cpu") as stored:
                meta = stored.metadata() or {}
                if meta.get("identity") != self.identity or meta.get("ids") != _ids_text(ids):
                    raise ValueError("its metadata names another model or prefix")
                layers = int(meta["layers"])
                found = [
                    (stored.get_tensor(f"keys.{i}"), stored.get_tensor(f"values.{i}"))
                    for i in range(layers)
                ]
        except Exception as error:  # a damaged or foreign file: compute it again
            logger.debug("Ignoring the stored prefix %s: %s", path, error)
            with contextlib.suppress(OSError):
                path.unlink()
            return None
        self.loads += 1
        return found

    def save(self, ids: Sequence[int], layers: Sequence[tuple[torch.Tensor, torch.Tensor]]) -> None:
        """Store ``layers`` for ``ids`` (written whole or not at all)."""
        try:
            from safetensors.torch import save

            tensors = {}
            for i, (keys, values) in enumerate(layers):
                tensors[f"keys.{i}"] = keys.detach().to("cpu").contiguous()
                tensors[f"values.{i}"] = values.detach().to("cpu").contiguous()
            meta = {"identity": self.identity, "ids": _ids_text(ids), "layers": str(len(layers))}
            write_bytes_atomically(self.path(ids), save(tensors, metadata=meta))
            self.saves += 1
            self._trim()
        except Exception as error:  # read-only or full disk: only the saving is lost
            if not self._warned:
                self._warned = True
                logger.warning(
                    "Could not keep a prompt prefix in %s (%s); later processes compute it again.",
                    self.folder,
                    error,
                )

    def _trim(self) -> None:
        files = sorted(self.folder.glob("*.safetensors"), key=_mtime, reverse=True)
        for stale in files[self.max_files :]:
            with contextlib.suppress(OSError):
                stale.unlink()


def _ids_text(ids: Sequence[int]) -> str:
    return ",".join(str(int(i)) for i in ids)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
