"""bfloat16 linear layers on a CPU, their weights laid out once for the matrix kernel.

On a CPU, torch computes a bfloat16 ``nn.Linear`` with oneDNN, and ``F.linear`` hands it the
weight in its plain row-major layout every call: oneDNN first copies it into the blocked
layout its kernel reads, a second pass over every weight for each token. Decoding at batch 1
reads each weight once, so that copy halves the speed (measured here on the 1.5B card's
shapes: 2x at batch 1, 1.6x at batch 8, 1.16x for a 200-token prompt). This module does the
copy once, at load time (``torch.ops.mkldnn._reorder_linear_weight``, the prepacking torch's
own compiler uses for CPU linear layers), and swaps each ``nn.Linear`` for a
:class:`PackedLinear` that calls the same oneDNN kernel on the packed weight. The kernel is
the same, so the outputs are the same bits: :func:`pack_linear_layers` checks that on every
layer it packs (one row of random input) and leaves the model as it was where they differ.
The plain weight is dropped, so the packed one does not double the memory: transformers
maps the weights file into memory, and each plain weight's pages are handed back to the
system as soon as its packed copy exists (``madvise``; Linux). The weights left (the
embedding table, the norms) stay pages of the file, as they are without packing: a decode
step reads one row of the embedding table, so most of it is never resident. A weight the
model shares with another module (an output head tied to the embedding table) is packed as
a copy and the shared one stays.

The check that the packed kernel gives the same bits runs once per kind of layer (shape,
bias or none): layers of one kind run the same kernel on the same layout, and checking
every one of them cost a second pass over all weights at load.
"""

from __future__ import annotations

import ctypes
import logging
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PackingReport:
    """What :func:`pack_linear_layers` did to a model."""

    layers: int
    """Linear layers now computed on a packed weight."""
    bytes: int
    """Bytes of packed weights."""
    copied_bytes: int
    """Of those, the bytes of weights shared with another module and so packed as a copy."""
    refused: str = ""
    """Why nothing was packed, when nothing was (empty otherwise)."""


def packing_available(device: str, dtype: torch.dtype) -> str:
    """Why bfloat16 packing cannot serve this device and dtype, or ``""`` when it can."""
    import torch

    if device != "cpu" or dtype != torch.bfloat16:
        return "packing serves bfloat16 weights on a CPU only"
    if not torch.backends.mkldnn.is_available():  # type: ignore[no-untyped-call]
        return "this torch build has no oneDNN"
    ops = torch.ops.mkldnn
    if not all(hasattr(ops, name) for name in ("_reorder_linear_weight", "_linear_pointwise")):
        return "this torch build has no oneDNN linear prepacking"
    if not ops._is_mkldnn_bf16_supported():
        return "oneDNN computes no bfloat16 on this processor"
    return ""


def _packed_linear_class() -> type[torch.nn.Module]:
    import torch

    class PackedLinear(torch.nn.Module):
        """An ``nn.Linear`` whose bfloat16 weight oneDNN has laid out for its kernel."""

        def __init__(self, packed: torch.Tensor, bias: torch.Tensor | None, shape: Any) -> None:
            super().__init__()
            self.out_features, self.in_features = int(shape[0]), int(shape[1])
            # Not a parameter: an opaque oneDNN tensor, neither saved nor moved nor trained.
            self.packed = packed
            self.bias = None if bias is None else torch.nn.Parameter(bias, requires_grad=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            out: torch.Tensor = torch.ops.mkldnn._linear_pointwise(
                x, self.packed, self.bias, "none", [], ""
            )
            return out

        def extra_repr(self) -> str:
            return f"in_features={self.in_features}, out_features={self.out_features}, packed"

    return PackedLinear


def _weight_file_mappings() -> list[tuple[int, int]]:
    """The address ranges where this process maps a ``.safetensors`` file (Linux only)."""
    if not sys.platform.startswith("linux"):
        return []
    ranges = []
    with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
        for line in maps:
            fields = line.split(maxsplit=5)
            if len(fields) == 6 and fields[5].rstrip().endswith(".safetensors"):
                start, end = (int(a, 16) for a in fields[0].split("-"))
                ranges.append((start, end))
    return ranges


def _mapped(tensor: torch.Tensor, mappings: list[tuple[int, int]]) -> bool:
    """Whether ``tensor`` lies in one of the mapped weights files."""
    start = tensor.data_ptr()
    end = start + tensor.numel() * tensor.element_size()
    return any(low <= start and end <= high for low, high in mappings)


def _release_pages(tensor: torch.Tensor, mappings: list[tuple[int, int]]) -> None:
    """Hand the pages a file-mapped tensor wholly covers back to the system.

    Only inside a mapped weights file, whose pages the kernel reads again from the file if
    anything touches them later: anonymous memory would lose its contents instead.
    """
    if not _mapped(tensor, mappings):
        return
    page = 4096
    start = tensor.data_ptr()
    first = -(-start // page) * page
    last = (start + tensor.numel() * tensor.element_size()) // page * page
    if last > first:
        madvise = ctypes.CDLL(None, use_errno=True).madvise
        madvise(ctypes.c_void_p(first), ctypes.c_size_t(last - first), 4)  # MADV_DONTNEED


def pack_linear_layers(model: torch.nn.Module) -> PackingReport:
    """Swap every bfloat16 CPU ``nn.Linear`` of ``model`` for a packed one, in place.

    Args:
        model: a loaded model in eval mode, on the CPU, in bfloat16.

    Returns:
        How many layers were packed and how many bytes they hold.
    """
    import torch

    first = next(model.parameters(), None)
    refused = "the model has no weights" if first is None else ""
    refused = refused or packing_available(first.device.type, first.dtype)  # type: ignore[union-attr]
    if refused:
        return PackingReport(0, 0, 0, refused)
    packed_linear = _packed_linear_class()
    owners: dict[int, int] = {}
    for module in model.modules():
        for parameter in module.parameters(recurse=False):
            owners[id(parameter)] = owners.get(id(parameter), 0) + 1
    layers, total, copied = 0, 0, 0
    generator = torch.Generator().manual_seed(0)
    same_bits: dict[tuple[Any, ...], bool] = {}  # per kind of layer: packed == plain
    mappings = _weight_file_mappings()
    refused_layers: list[str] = []
    with torch.no_grad():
        for name, module in list(model.named_modules()):
            if type(module) is not torch.nn.Linear or module.weight.dtype != torch.bfloat16:
                continue
            weight = module.weight.detach()
            packed = torch.ops.mkldnn._reorder_linear_weight(weight, 1)
            bias = None if module.bias is None else module.bias.detach().clone()
            replacement = packed_linear(packed, bias, weight.shape)
            kind = (tuple(weight.shape), bias is not None)
            if kind not in same_bits:
                probe = torch.randn(1, weight.shape[1], generator=generator).to(torch.bfloat16)
                plain = torch.nn.functional.linear(probe, weight, bias)
                same_bits[kind] = torch.equal(replacement(probe), plain)
            if not same_bits[kind]:
                refused_layers.append(name)
                continue
            parent_name, _, child = name.rpartition(".")
            setattr(model.get_submodule(parent_name), child, replacement)
            layers += 1
            total += weight.numel() * weight.element_size()
            if owners.get(id(module.weight), 0) > 1:
                copied += weight.numel() * weight.element_size()
            else:
                _release_pages(weight, mappings)
    if refused_layers:
        # One line for them all: a kind of layer is refused in every block of the model.
        logger.warning(
            "Not packing %d linear layers (%s%s): on this processor the packed kernel gives "
            "other numbers for their shapes, so they keep the plain layout",
            len(refused_layers),
            ", ".join(refused_layers[:2]),
            ", ..." if len(refused_layers) > 2 else "",
        )
    return PackingReport(layers, total, copied)
