"""Model cards and turning a model reference into a loaded model and tokenizer.

A model reference is one of: the name of a card in ``models/`` (the embedded default is
one), a local Hugging Face model directory, or a local ``.gguf`` file. Nothing here ever
asks a model hub for anything: every load is ``local_files_only``.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import threading
import time
import uuid
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from offline_scorer._exceptions import ModelLoadError
from offline_scorer.judges._settings import Device, DType, cache_dir

if sys.version_info >= (3, 11):
    pass
else:  # pragma: no cover - exercised on Python 3.10 only
    pass

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

import psutil

from offline_scorer._offline import force_offline
from offline_scorer.judges._cards import (
    _SIDECAR,
    DEFAULT_MODEL,
    ModelCard,
    ResolvedModel,
    _check_hf_directory,
    model_fingerprint,
    resolve_model,
    sha256_of,
    split_file,
)
from offline_scorer.judges._parts import join_parts
from offline_scorer.judges.transformers._loop import PrefixStore
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
    prefixes: PrefixStore = field(default_factory=PrefixStore, repr=False, compare=False)
    """Keys and values of the shared prompt prefixes seen so far (see ``_loop.py``)."""


def load_model(
    reference: str | os.PathLike[str] = DEFAULT_MODEL,
    *,
    device: Device = "auto",
    dtype: DType = "auto",
    trust_remote_code: bool = False,
    allow_pickle: bool = False,
    threads: int | None = None,
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
        directory, from_cache = _converted_gguf(resolved)
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
    logger.info(
        "Loaded %s (%s, %s) from %s%s, %.1f GB of weights, in %.1f s",
        resolved.model_id,
        str(torch_dtype).removeprefix("torch."),
        chosen_device,
        folder,
        " (converted cache)" if from_cache else "",
        _folder_bytes(folder) / 1e9,
        time.perf_counter() - started,
    )
    if not getattr(tokenizer, "chat_template", None):
        raise ModelLoadError(
            f"The tokenizer of {resolved.path} has no chat template; offline-scorer needs an "
            "instruction model with a chat template."
        )
    return LoadedModel(
        model=model,
        tokenizer=tokenizer,
        model_id=resolved.model_id,
        fingerprint=fingerprint_with_dtype(
            model_fingerprint(resolved), str(torch_dtype).removeprefix("torch.")
        ),
        device=chosen_device,
        dtype=str(torch_dtype).removeprefix("torch."),
        context_length=_context_length(model, resolved.card),
        load_seconds=time.perf_counter() - started,
        from_converted_cache=from_cache,
    )


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


# --------------------------------------------------------------------------- GGUF


def converted_models_dir() -> Path:
    """Folder holding safetensors copies of GGUF files, one sub-folder per file sha256."""
    return cache_dir() / "converted"


def _converted_gguf(resolved: ResolvedModel) -> tuple[Path, bool]:
    """Verify a GGUF file and return (safetensors copy, whether the copy already existed)."""
    if resolved.parts:
        return _converted_split_gguf(resolved)
    path = resolved.path
    sha = sha256_of(path)
    card = resolved.card
    if card is not None and card.source.sha256 and sha != card.source.sha256:
        raise ModelLoadError(
            f"Checksum mismatch for {path}: sha256 is {sha}, model card '{card.name}' expects "
            f"{card.source.sha256}. The file is corrupt or was replaced; reinstall it"
            + (f" ({card.source.install})." if card.source.install else ".")
        )
    target = converted_models_dir() / sha
    if (target / _SIDECAR).is_file():
        return target, True
    _convert_gguf(path, sha, target)
    return target, False


def _converted_split_gguf(resolved: ResolvedModel) -> tuple[Path, bool]:
    """The safetensors copy of a card split across packages, joined and converted once.

    Once a converted copy exists its pieces are not read again (resolution already checked
    that each is installed and of the right size). Otherwise the pieces are streamed into
    one .gguf in a staging folder of the converted cache, each piece's and the whole file's
    sha256 checked on the way; that file is converted, then deleted: the pieces and the
    converted copy are all that stay on disk.
    """
    card = resolved.card
    assert card is not None and card.source.sha256 is not None
    assert card.source.size_bytes is not None
    sha = card.source.sha256
    target = converted_models_dir() / sha
    if (target / _SIDECAR).is_file():
        return target, True
    joining = converted_models_dir() / f".joining-{sha[:16]}-{uuid.uuid4().hex[:8]}"
    joined = joining / Path(card.source.file).name
    try:
        started = time.perf_counter()
        join_parts(
            split_file(card), resolved.parts, joined, size=card.source.size_bytes, sha256=sha
        )
        logger.info(
            "Joined %d parts of %s in %.1f s",
            len(resolved.parts),
            card.name,
            time.perf_counter() - started,
        )
        _convert_gguf(joined, sha, target, source=f"model card {card.name} (joined parts)")
    finally:
        shutil.rmtree(joining, ignore_errors=True)
    return target, False


def _convert_gguf(path: Path, sha: str, target: Path, *, source: str | None = None) -> None:
    """Dequantize a GGUF file into a safetensors directory, atomically.

    ``source`` is what the sidecar records as the origin (default: the file's path).
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.parent / f".staging-{sha[:16]}-{uuid.uuid4().hex[:8]}"
    try:
        logger.info(
            "Converting %s (%.0f MB GGUF) to safetensors in %s: once, on first use",
            source or path,
            path.stat().st_size / 1e6,
            target.parent,
        )
        with _parse_gguf_once(), quiet_transformers():
            eos_id = _gguf_eos_id(path)
            try:
                tokenizer = AutoTokenizer.from_pretrained(
                    path.parent, gguf_file=path.name, local_files_only=True
                )
                model = AutoModelForCausalLM.from_pretrained(
                    path.parent, gguf_file=path.name, local_files_only=True
                )
            except Exception as error:
                raise ModelLoadError(
                    f"Could not read the GGUF file {path}: {error}. The file may be truncated "
                    "or use an architecture transformers cannot load from GGUF."
                ) from error
        # transformers marks a GGUF-loaded model as quantized and refuses to save it; the
        # weights are already dequantized in memory, so the markers can go.
        setattr(model, "hf_quantizer", None)  # noqa: B010 - not a declared attribute
        setattr(model, "is_quantized", False)  # noqa: B010
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        with quiet_transformers():
            model.save_pretrained(staging)
            tokenizer.save_pretrained(staging)
        sidecar = {"source": source or str(path), "sha256": sha, "gguf_eos_token_id": eos_id}
        (staging / _SIDECAR).write_text(json.dumps(sidecar, indent=2))
        try:
            os.rename(staging, target)
        except OSError:
            # Another process finished the same conversion first: keep theirs.
            if not (target / _SIDECAR).is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


@contextmanager
def _parse_gguf_once() -> Iterator[None]:
    """Within this block, each GGUF file's metadata is parsed once, not four times.

    transformers builds a new ``gguf.GGUFReader`` for the config, the tokenizer and the
    weights, and a tensor-name map for every tensor; with a 49k-token vocabulary each
    reader parses about 600k metadata parts in Python (about 7 s here), each map 25 ms.
    Readers are read-only memory maps and maps are only queried, so sharing them is safe.
    transformers imports both names from ``gguf`` at call time, so swapping them on the
    module for the duration of one conversion is enough; they are restored afterwards.
    """
    import gguf

    original_reader, original_map = gguf.GGUFReader, gguf.get_tensor_name_map
    readers: dict[tuple[str, str], Any] = {}

    def shared_reader(file: Any, mode: Any = "r") -> Any:
        key = (str(Path(file).resolve()), mode)
        if key not in readers:
            readers[key] = original_reader(file, mode)
        return readers[key]

    gguf.GGUFReader = shared_reader  # type: ignore[misc,assignment]
    gguf.get_tensor_name_map = lru_cache(maxsize=None)(original_map)
    try:
        yield
    finally:
        gguf.GGUFReader = original_reader  # type: ignore[misc]
        gguf.get_tensor_name_map = original_map
        readers.clear()


def _gguf_eos_id(path: Path) -> int | None:
    """Read the end-of-sequence id from GGUF metadata; a clear error for a broken file."""
    try:
        from gguf import GGUFReader

        reader = GGUFReader(path)
        field = reader.fields.get("tokenizer.ggml.eos_token_id")
        return int(field.contents()) if field is not None else None
    except Exception as error:
        raise ModelLoadError(
            f"{path} is not a readable GGUF file ({type(error).__name__}: {error}). "
            "It is probably truncated or corrupt: download or reinstall it."
        ) from error


def _check_eos_against_sidecar(
    directory: Path, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase
) -> None:
    """Refuse a model whose EOS id disagrees with its GGUF metadata.

    Some transformers releases read the wrong EOS id from GGUF files; every free-text
    generation then runs to its token limit. Better to stop loudly at load time.
    """
    expected = json.loads((directory / _SIDECAR).read_text()).get("gguf_eos_token_id")
    if expected is None:
        return
    generation_eos = model.generation_config.eos_token_id
    generation_ids = generation_eos if isinstance(generation_eos, list) else [generation_eos]
    if tokenizer.eos_token_id != expected or expected not in generation_ids:
        raise ModelLoadError(
            f"End-of-sequence id mismatch: the GGUF file says {expected}, the tokenizer says "
            f"{tokenizer.eos_token_id} and the generation config {generation_eos}. Upgrade "
            "transformers (>= 5.24 reads it correctly) and delete the converted copy in "
            f"{directory}."
        )
