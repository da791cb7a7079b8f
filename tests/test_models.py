"""Model references that cannot be used get clear errors (no model load needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from offline_scorer import ModelLoadError, UnknownModelError, list_model_cards, load_model
from offline_scorer.judges._cards import (
    ResolvedModel,
    card_weights_path,
    get_model_card,
    resolve_model,
)
from offline_scorer.judges.transformers._gguf import _converted_gguf, converted_models_dir


def test_embedded_card_is_known_and_installed() -> None:
    card = get_model_card("smollm2-135m-instruct")
    assert card.source.sha256 == "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
    assert card_weights_path(card) is not None
    names = [c.name for c in list_model_cards()]
    assert names == sorted(names) and "smollm2-135m-instruct" in names


def test_unknown_model_name_lists_known_names() -> None:
    with pytest.raises(UnknownModelError) as caught:
        resolve_model("gpt-7")
    assert "smollm2-135m-instruct" in str(caught.value)


def test_missing_path(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="does not exist"):
        resolve_model(str(tmp_path / "nope" / "model.gguf"))


def test_directory_without_weights(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ModelLoadError, match="no weights"):
        load_model(tmp_path)


def test_directory_without_config(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="config.json"):
        load_model(tmp_path)


def test_pickle_only_directory_needs_opt_in(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "pytorch_model.bin").write_bytes(b"not really a pickle")
    with pytest.raises(ModelLoadError, match="allow_pickle"):
        load_model(tmp_path)


def test_non_gguf_file(tmp_path: Path) -> None:
    weights = tmp_path / "model.pt"
    weights.write_bytes(b"x")
    with pytest.raises(ModelLoadError, match=".gguf"):
        load_model(weights)


def test_truncated_gguf_is_refused_and_leaves_nothing_in_cache(tmp_path: Path) -> None:
    original = card_weights_path(get_model_card("smollm2-135m-instruct"))
    assert original is not None
    truncated = tmp_path / "broken.gguf"
    with original.open("rb") as handle:
        truncated.write_bytes(handle.read(5_000_000))
    before = set(converted_models_dir().glob("*")) if converted_models_dir().exists() else set()
    with pytest.raises(ModelLoadError) as caught:
        load_model(truncated)
    assert "broken.gguf" in str(caught.value)
    after = set(converted_models_dir().glob("*")) if converted_models_dir().exists() else set()
    assert after == before


def test_checksum_mismatch_names_file_and_expected_sum(tmp_path: Path) -> None:
    card = get_model_card("smollm2-135m-instruct")
    fake = tmp_path / "SmolLM2-135M-Instruct.Q4_1.gguf"
    fake.write_bytes(b"GGUF but not the real file")
    wrong = ResolvedModel("gguf", fake, model_id=card.name, card=card)
    with pytest.raises(ModelLoadError) as caught:
        _converted_gguf(wrong)
    message = str(caught.value)
    assert str(fake) in message and card.source.sha256 in message and "mismatch" in message


# ------------------------------------------------------------------ the dtype a card runs in


def test_a_cpu_without_native_bfloat16_runs_a_bfloat16_card_in_float32() -> None:
    import torch

    from offline_scorer.judges.transformers._loading import pick_dtype

    assert pick_dtype("auto", "cpu", "bfloat16", native_bf16=False) == torch.float32
    assert pick_dtype("auto", "cpu", "bfloat16", native_bf16=True) == torch.bfloat16
    # A card that recommends float32, or none, stays in float32 even on such a CPU.
    assert pick_dtype("auto", "cpu", "float32", native_bf16=True) == torch.float32
    assert pick_dtype("auto", "cpu", "auto", native_bf16=True) == torch.float32
    # An explicit dtype is taken as it is.
    assert pick_dtype("bfloat16", "cpu", "float32", native_bf16=False) == torch.bfloat16


def test_the_fingerprint_names_a_dtype_other_than_float32() -> None:
    from offline_scorer import TransformersJudge
    from offline_scorer.judges.transformers._loading import fingerprint_with_dtype

    plain = TransformersJudge("smollm2-135m-instruct", dtype="float32").fingerprint
    assert plain.startswith("smollm2-135m-instruct@sha256:") and "+" not in plain
    assert fingerprint_with_dtype(plain, "float32") == plain
    # Known before any load (the result cache keys on it), from the options alone.
    half = TransformersJudge("smollm2-135m-instruct", dtype="bfloat16").fingerprint
    assert half == plain + "+bfloat16"
