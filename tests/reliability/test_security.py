"""Security: no network from the CLI, pickle weights only on explicit request."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from offline_scorer import ModelLoadError, TransformersJudge, load_model
from offline_scorer.judges.transformers._gguf import converted_models_dir

BLOCK_NETWORK_AND_RUN_CLI = """
import socket, sys
attempts = []
def refuse(*args, **kwargs):
    attempts.append(repr(args)[:80])
    sys.stderr.write("NETWORK ATTEMPT %r\\n" % (args,))
    raise OSError("network access blocked by the test")
socket.socket.connect = refuse
socket.socket.connect_ex = refuse
socket.create_connection = refuse
socket.getaddrinfo = refuse
from offline_scorer.cli import main
sys.argv = ["offline-scorer"] + sys.argv[1:]
try:
    main()
finally:
    sys.stderr.write("ATTEMPTS %d\\n" % len(attempts))
"""


@pytest.mark.slow
def test_cli_scores_end_to_end_with_every_socket_blocked(
    tmp_path: Path, judge: TransformersJudge
) -> None:
    data = tmp_path / "one.jsonl"
    data.write_text(
        json.dumps({"input": "Who wrote Hamlet?", "output": "Shakespeare wrote it."}) + "\n"
    )
    out = tmp_path / "out.jsonl"
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            BLOCK_NETWORK_AND_RUN_CLI,
            "score",
            str(data),
            "--no-cache",
            "--out",
            str(out),
            "-q",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "ATTEMPTS 0" in result.stderr and "NETWORK ATTEMPT" not in result.stderr
    (line,) = out.read_text().splitlines()
    assert json.loads(line)["status"] == "scored"


def _tiny_pickle_model(folder: Path, tokenizer_source: Path) -> Path:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    folder.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        if (tokenizer_source / name).exists():
            shutil.copy(tokenizer_source / name, folder / name)
    config = LlamaConfig(
        vocab_size=49152,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=256,
    )
    model = LlamaForCausalLM(config)
    config.save_pretrained(folder)
    torch.save(model.state_dict(), folder / "pytorch_model.bin")
    return folder


@pytest.mark.slow
def test_pickle_weights_need_the_flag_and_warn(tmp_path: Path, judge: TransformersJudge) -> None:
    converted = next(converted_models_dir().iterdir())
    folder = _tiny_pickle_model(tmp_path / "pickled", converted)
    with pytest.raises(ModelLoadError, match="allow_pickle"):
        load_model(folder)
    with pytest.warns(UserWarning, match="pickle"):
        loaded = load_model(folder, allow_pickle=True)
    assert loaded.fingerprint.startswith("pickled@")


def test_trust_remote_code_is_off_by_default() -> None:
    import inspect

    assert inspect.signature(load_model).parameters["trust_remote_code"].default is False
    assert inspect.signature(TransformersJudge).parameters["trust_remote_code"].default is False
