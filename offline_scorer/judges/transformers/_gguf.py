"""GGUF files: verified, dequantized once into a safetensors copy in the dtype the model runs
in, and that copy reused by every later load.

The copy lives in the user cache folder under ``converted/``, one folder per GGUF file's
sha256 and dtype: ``<sha256>`` holds float32 (the CPU default, and the name earlier
versions used), ``<sha256>+bfloat16`` and ``<sha256>+float16`` the half-precision
weights a GPU or a CPU with native bfloat16 runs. A half-precision load thus reads half
the bytes and never holds a float32 copy beside its own.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from offline_scorer._exceptions import ModelLoadError
from offline_scorer.judges._cards import _SIDECAR, ResolvedModel, sha256_of, split_file
from offline_scorer.judges._parts import join_parts
from offline_scorer.judges._settings import cache_dir
from offline_scorer.judges.transformers._quiet import quiet_transformers

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

logger = logging.getLogger(__name__)


def converted_models_dir() -> Path:
    """Folder holding safetensors copies of GGUF files, one sub-folder per sha256 and dtype."""
    return cache_dir() / "converted"


def converted_folder(sha: str, dtype: str = "float32") -> Path:
    """Where the copy of the GGUF file with this sha256 in this dtype lives."""
    return converted_models_dir() / (sha if dtype == "float32" else f"{sha}+{dtype}")


def _dtype_name(dtype: str | torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _converted_gguf(
    resolved: ResolvedModel, dtype: str | torch.dtype = "float32"
) -> tuple[Path, bool]:
    """Verify a GGUF file and return (its safetensors copy in ``dtype``, whether the copy
    already existed)."""
    if resolved.parts:
        return _converted_split_gguf(resolved, dtype)
    path = resolved.path
    sha = sha256_of(path)
    card = resolved.card
    if card is not None and card.source.sha256 and sha != card.source.sha256:
        raise ModelLoadError(
            f"Checksum mismatch for {path}: sha256 is {sha}, model card '{card.name}' expects "
            f"{card.source.sha256}. The file is corrupt or was replaced; reinstall it"
            + (f" ({card.source.install})." if card.source.install else ".")
        )
    target = converted_folder(sha, _dtype_name(dtype))
    if (target / _SIDECAR).is_file():
        return target, True
    _convert_gguf(path, sha, target, dtype=dtype)
    return target, False


def _converted_split_gguf(resolved: ResolvedModel, dtype: str | torch.dtype) -> tuple[Path, bool]:
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
    target = converted_folder(sha, _dtype_name(dtype))
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
        _convert_gguf(
            joined, sha, target, dtype=dtype, source=f"model card {card.name} (joined parts)"
        )
    finally:
        shutil.rmtree(joining, ignore_errors=True)
    return target, False


def _convert_gguf(
    path: Path,
    sha: str,
    target: Path,
    *,
    dtype: str | torch.dtype = "float32",
    source: str | None = None,
) -> None:
    """Dequantize a GGUF file into a safetensors directory in ``dtype``, atomically.

    ``source`` is what the sidecar records as the origin (default: the file's path).
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    name = _dtype_name(dtype)

    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.parent / f".staging-{sha[:16]}-{uuid.uuid4().hex[:8]}"
    try:
        logger.info(
            "Converting %s (%.0f MB GGUF) to %s safetensors in %s: once, on first use",
            source or path,
            path.stat().st_size / 1e6,
            name,
            target.parent,
        )
        with _parse_gguf_once(), quiet_transformers():
            eos_id = _gguf_eos_id(path)
            try:
                tokenizer = AutoTokenizer.from_pretrained(
                    path.parent, gguf_file=path.name, local_files_only=True
                )
                model = AutoModelForCausalLM.from_pretrained(
                    path.parent,
                    gguf_file=path.name,
                    local_files_only=True,
                    dtype=getattr(torch, name),
                    # Unpacked here, once: without this, transformers first looks for a
                    # packed-weights matmul kernel (a hub download, refused offline) and warns
                    # about a bfloat16 load it then does not make.
                    quantization_config=GgufConfig(dequantize=True),
                    use_kernels=False,  # no layer swapped for a Hub kernel (_offline.py)
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
        sidecar = {
            "source": source or str(path),
            "sha256": sha,
            "dtype": name,
            "gguf_eos_token_id": eos_id,
        }
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
