"""Model cards and turning a model reference into a loaded model and tokenizer.

A model reference is one of: the name of a card in ``models/`` (the embedded default is
one), a local Hugging Face model directory, or a local ``.gguf`` file. Nothing here ever
asks a model hub for anything: every load is ``local_files_only``.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from offline_scorer._exceptions import ModelLoadError
from offline_scorer.judges._settings import Device, DType, cache_dir

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

import psutil

from offline_scorer._offline import force_offline
from offline_scorer.judges._cards import (
    DEFAULT_MODEL,
    ModelCard,
    ResolvedModel,
    _check_hf_directory,
    model_fingerprint,
    resolve_model,
)
from offline_scorer.judges.transformers._gguf import (
    _check_eos_against_sidecar,
    _converted_gguf,
)
from offline_scorer.judges.transformers._kvcache import PrefixStore
from offline_scorer.judges.transformers._loop import LoopStats
from offline_scorer.judges.transformers._packing import PackingReport, pack_linear_layers
from offline_scorer.judges.transformers._prefix_files import PrefixFiles, prefix_identity
from offline_scorer.judges.transformers._quiet import quiet_transformers

logger = logging.getLogger(__name__)


def _folder_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.glob("*.safetensors"))


# --------------------------------------------------------------------------- loading


@dataclass
class LoadedModel:
    """A model and tokenizer ready to generate, with what is known about them."""

    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    model_id: str
    fingerprint: str
    device: str
    dtype: str
    context_length: int
    load_seconds: float
    from_converted_cache: bool
    packing: PackingReport | None = None
    """The linear layers packed for the CPU's bfloat16 kernel (``_packing.py``), if tried."""
    prefixes: PrefixStore = field(default_factory=PrefixStore, repr=False, compare=False)
    """Keys and values of the shared prompt prefixes seen so far (see ``_loop.py``)."""
    loop_stats: LoopStats = field(default_factory=LoopStats, repr=False, compare=False)
    """Counts summed over every run of our decode loop on this model: forward passes,
    forced tokens, guessed tokens fed and taken (for benchmarks and profiles)."""


def load_model(
    reference: str | os.PathLike[str] = DEFAULT_MODEL,
    *,
    device: Device = "auto",
    dtype: DType = "auto",
    trust_remote_code: bool = False,
    allow_pickle: bool = False,
    threads: int | None = None,
    pack_weights: bool = True,
) -> LoadedModel:
    """Load a model reference for generation, fully offline.

    GGUF weights (including the embedded default) are verified against their card's sha256,
    dequantized once and cached as safetensors under the user cache folder
    (``$OFFLINE_SCORER_CACHE``), keyed by the file's sha256, so later loads are fast.

    Args:
        reference: a model card name, a local Hugging Face model directory or a .gguf file.
        device: ``auto`` picks CUDA, then Apple MPS, then CPU.
        dtype: ``auto`` picks bfloat16/float16 on accelerators and float32 on CPU.
        trust_remote_code: run custom modelling code shipped in a model directory.
        allow_pickle: accept ``.bin``/``.pt`` (pickle) weights in a model directory.
        threads: CPU threads for torch; defaults to the number of physical cores.
        pack_weights: on a CPU in bfloat16, lay each linear layer's weight out once for the
            matrix kernel (the same numbers, about twice the decode speed); False keeps the
            plain layers (for measuring the difference).

    Returns:
        The loaded model.

    Raises:
        UnknownModelError: the reference names nothing known.
        ModelLoadError: weights missing, unsafe, corrupt or failing their checksum.

    Example:
        >>> loaded = load_model("smollm2-135m-instruct")  # doctest: +SKIP
    """

    force_offline()
    started = time.perf_counter()
    resolved = resolve_model(reference)
    import torch

    torch.set_num_threads(threads or physical_cores())
    chosen_device = pick_device(device)
    recommended = resolved.card.recommended_dtype if resolved.card is not None else "auto"
    torch_dtype = pick_dtype(dtype, chosen_device, recommended)
    if resolved.kind == "gguf":
        directory, from_cache = _converted_gguf(resolved, torch_dtype)
        model, tokenizer = _load_directory(
            directory, chosen_device, torch_dtype, trust_remote_code=False, allow_pickle=False
        )
        _check_eos_against_sidecar(directory, model, tokenizer)
    else:
        _check_hf_directory(resolved.path, allow_pickle=allow_pickle)
        if allow_pickle and not any(resolved.path.glob("*.safetensors")):
            warnings.warn(
                f"Loading pickle weights from {resolved.path}: only do this for files you trust.",
                UserWarning,
                stacklevel=2,
            )
        model, tokenizer = _load_directory(
            resolved.path, chosen_device, torch_dtype, trust_remote_code, allow_pickle
        )
        from_cache = False
    folder = directory if resolved.kind == "gguf" else resolved.path
    packing = pack_linear_layers(model) if pack_weights else None
    logger.info(
        "Loaded %s (%s, %s) from %s%s, %.1f GB of weights, in %.1f s%s",
        resolved.model_id,
        str(torch_dtype).removeprefix("torch."),
        chosen_device,
        folder,
        " (converted cache)" if from_cache else "",
        _folder_bytes(folder) / 1e9,
        time.perf_counter() - started,
        f"; {packing.layers} linear layers packed" if packing and packing.layers else "",
    )
    if not getattr(tokenizer, "chat_template", None):
        raise ModelLoadError(
            f"The tokenizer of {resolved.path} has no chat template; offline-scorer needs an "
            "instruction model with a chat template."
        )
    dtype_name = str(torch_dtype).removeprefix("torch.")
    fingerprint = fingerprint_with_dtype(model_fingerprint(resolved), dtype_name)
    return LoadedModel(
        model=model,
        tokenizer=tokenizer,
        model_id=resolved.model_id,
        fingerprint=fingerprint,
        device=chosen_device,
        dtype=dtype_name,
        context_length=_context_length(model, resolved.card),
        load_seconds=time.perf_counter() - started,
        from_converted_cache=from_cache,
        packing=packing,
        prefixes=PrefixStore(files=_prefix_files(fingerprint, dtype_name, chosen_device, packing)),
    )


def _prefix_files(
    fingerprint: str, dtype: str, device: str, packing: PackingReport | None
) -> PrefixFiles | None:
    """Where a CPU model keeps its shared prefixes for later processes (on a GPU a system
    block costs milliseconds, so nothing is kept)."""
    if device != "cpu":
        return None
    import torch

    packed = packing.layers if packing is not None else 0
    identity = prefix_identity(fingerprint, dtype, torch.get_num_threads(), packed)
    return PrefixFiles(cache_dir() / "prefixes", identity)


_MODELS: dict[tuple[str, tuple[tuple[str, Any], ...]], LoadedModel] = {}
_MODELS_LOCK = threading.Lock()


def shared_model(reference: str, **options: Any) -> LoadedModel:
    """The process's one loaded copy of ``reference`` with these load options.

    Judges that differ only in how they decode (the scorers' judge and the local agent's)
    share the weights instead of loading them twice.
    """
    key = (reference, tuple(sorted(options.items())))
    with _MODELS_LOCK:
        loaded = _MODELS.get(key)
        if loaded is None:
            loaded = _MODELS[key] = load_model(reference, **options)
        return loaded


def physical_cores() -> int:
    """Number of physical CPU cores available (hyper-threads don't speed up matmuls).

    The machine's physical cores, bounded by the CPUs this process may run on (its CPU
    affinity: a container, ``taskset``, a Ray actor).
    """

    process = psutil.Process()
    # cpu_affinity does not exist on macOS; there every CPU is allowed.
    affinity = process.cpu_affinity() if hasattr(process, "cpu_affinity") else None
    allowed = len(affinity) if affinity else (psutil.cpu_count(logical=True) or 1)
    physical = psutil.cpu_count(logical=False) or allowed  # None when it cannot tell
    return max(1, min(int(allowed), int(physical)))


def pick_device(device: Device) -> str:
    """Resolve ``auto`` to the best available device; check a forced one exists."""
    import torch

    cuda = torch.cuda.is_available()
    mps = bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available())
    if device == "auto":
        return "cuda" if cuda else "mps" if mps else "cpu"
    if (device == "cuda" and not cuda) or (device == "mps" and not mps):
        raise ModelLoadError(f"Device '{device}' was requested but is not available here.")
    return device


def native_bfloat16() -> bool:
    """Whether this CPU computes bfloat16 matrix products natively (AVX512-BF16 or AMX).

    Without them torch emulates bfloat16 on a CPU, several times slower than float32
    (measured: 3.4 against about 20 prompt tokens/s for the 1.5B card on one AVX2 core).
    """
    import torch

    probes = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(bool(getattr(torch.cpu, name, lambda: False)()) for name in probes)


def pick_dtype(
    dtype: DType, device: str, recommended: str = "auto", *, native_bf16: bool | None = None
) -> torch.dtype:
    """Resolve ``auto``: bfloat16 on CUDA when supported, float16 on MPS; on a CPU, the
    card's ``recommended`` bfloat16 only when the processor has it natively, else float32.

    Args:
        dtype: the asked dtype; anything but ``auto`` is taken as it is.
        device: the resolved device.
        recommended: the card's ``recommended_dtype``.
        native_bf16: whether the CPU has native bfloat16 (None: ask this one).
    """
    import torch

    if dtype != "auto":
        return getattr(torch, dtype)  # type: ignore[no-any-return]
    if device == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    if device == "mps":
        return torch.float16
    if recommended == "bfloat16":
        native = native_bfloat16() if native_bf16 is None else native_bf16
        return torch.bfloat16 if native else torch.float32
    return torch.float32


def fingerprint_with_dtype(fingerprint: str, dtype: str) -> str:
    """A model's fingerprint naming the dtype it runs in; float32, the historical default,
    keeps the plain fingerprint (so earlier result caches and recordings stay valid)."""
    return fingerprint if dtype == "float32" else f"{fingerprint}+{dtype}"


def planned_dtype(resolved: ResolvedModel, device: Device, dtype: DType) -> str:
    """The dtype a load with these options will use, known without loading."""
    recommended = resolved.card.recommended_dtype if resolved.card is not None else "auto"
    return str(pick_dtype(dtype, pick_device(device), recommended)).removeprefix("torch.")


def _load_directory(
    path: Path,
    device: str,
    torch_dtype: torch.dtype,
    trust_remote_code: bool,
    allow_pickle: bool,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kwargs: dict[str, Any] = {
        "dtype": torch_dtype,
        "local_files_only": True,
        "trust_remote_code": trust_remote_code,
        "use_safetensors": not allow_pickle,
        # never layers swapped for kernels from the Hub (a download; see _offline.py)
        "use_kernels": False,
    }
    if device == "cuda":
        # Spread a model larger than one GPU over the GPUs, then CPU memory.
        kwargs["device_map"] = "auto"
    try:
        with quiet_transformers():
            tokenizer = AutoTokenizer.from_pretrained(
                path, local_files_only=True, trust_remote_code=trust_remote_code
            )
            model = AutoModelForCausalLM.from_pretrained(path, **kwargs)
    except Exception as error:
        raise ModelLoadError(f"Could not load the model in {path}: {error}") from error
    if device != "cuda":
        model.to(device)  # type: ignore[arg-type]
    model.eval()  # type: ignore[no-untyped-call]
    return model, tokenizer


def _context_length(model: PreTrainedModel, card: ModelCard | None) -> int:
    if card is not None:
        return card.context_length
    return int(getattr(model.config, "max_position_embeddings", 2048))
