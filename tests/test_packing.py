"""bfloat16 linear layers packed once for oneDNN on a CPU: the same numbers, nothing doubled."""

from __future__ import annotations

import sys

import pytest

torch = pytest.importorskip("torch")

from offline_scorer.judges.transformers._packing import (  # noqa: E402
    _weight_file_mappings,
    pack_linear_layers,
    packing_available,
)

WHY_NOT = packing_available("cpu", torch.bfloat16)
needs_packing = pytest.mark.skipif(bool(WHY_NOT), reason=f"no bfloat16 packing here: {WHY_NOT}")


class TinyLM(torch.nn.Module):
    """An embedding, two linear layers (with and without bias) and a head tied to the table."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(50, 24)
        self.up = torch.nn.Linear(24, 40)
        self.down = torch.nn.Linear(40, 24, bias=False)
        self.head = torch.nn.Linear(24, 50, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.down(torch.relu(self.up(self.embed(ids)))))


def tiny(dtype: torch.dtype) -> TinyLM:
    torch.manual_seed(3)
    return TinyLM().to(dtype).eval()


@needs_packing
def test_packed_layers_give_the_same_bits_and_keep_a_tied_table() -> None:
    plain, packed = tiny(torch.bfloat16), tiny(torch.bfloat16)
    report = pack_linear_layers(packed)
    assert report.layers == 3
    assert report.bytes == 2 * (24 * 40 + 40 * 24 + 50 * 24)
    assert report.copied_bytes == 2 * 50 * 24  # the head shares the embedding table
    assert report.refused == ""
    assert type(packed.up).__name__ == "PackedLinear"
    # the plain weights are gone from the layers; the table the head shared stays
    assert "up.weight" not in dict(packed.named_parameters())
    assert torch.equal(packed.embed.weight, plain.embed.weight)
    ids = torch.tensor([[1, 7, 3, 49], [0, 2, 2, 5]])  # a batch of rows, as the loop runs
    with torch.inference_mode():
        assert torch.equal(packed(ids), plain(ids))
        assert torch.equal(packed(ids[:1, :1]), plain(ids[:1, :1]))  # one decode step


def test_float32_and_other_devices_are_left_as_they_are() -> None:
    model = tiny(torch.float32)
    report = pack_linear_layers(model)
    assert report.layers == 0 and report.bytes == 0
    assert "bfloat16 weights on a CPU" in report.refused
    assert type(model.up) is torch.nn.Linear
    assert "CPU only" in packing_available("cuda", torch.bfloat16)


@needs_packing
@pytest.mark.slow
def test_the_embedded_model_packed_in_bfloat16_reads_the_same_logits() -> None:
    """The real model through load_model: packed by default on a CPU in bfloat16, bit for bit
    the logits of the plain layers, its tied output head packed as a copy."""
    from offline_scorer import load_model

    packed = load_model("smollm2-135m-instruct", dtype="bfloat16")
    plain = load_model("smollm2-135m-instruct", dtype="bfloat16", pack_weights=False)
    assert plain.packing is None
    assert packed.packing is not None and packed.packing.layers > 0
    assert packed.packing.copied_bytes > 0  # SmolLM2 ties its head to the embedding table
    text = "Question: what is the capital of France? Answer: Paris is the capital."
    ids = packed.tokenizer(text, return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        assert torch.equal(packed.model(input_ids=ids).logits, plain.model(input_ids=ids).logits)
    # every linear layer is packed; what stays in the mapped weights file (as it does without
    # packing) is the embedding table and the norms, never a linear layer's plain weight
    assert not any(type(m) is torch.nn.Linear for m in packed.model.modules())
    mappings = _weight_file_mappings()
    if sys.platform.startswith("linux"):
        assert mappings  # the models map their file: the check can see a mapping
    in_file = {
        type(module).__name__
        for module in packed.model.modules()
        for parameter in module.parameters(recurse=False)
        if any(low <= parameter.data_ptr() < high for low, high in mappings)
    }
    if sys.platform.startswith("linux"):
        assert "Embedding" in in_file
    assert not in_file & {"Linear", "PackedLinear"}
    # float32, the embedded card's choice on a CPU, is not packed
    float32 = load_model("smollm2-135m-instruct", dtype="float32").packing
    assert float32 is not None and float32.layers == 0 and float32.refused
