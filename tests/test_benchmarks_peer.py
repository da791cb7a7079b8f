"""The peer benchmark starts DeepEval's child from a relative python path (no DeepEval
needed: a stand-in interpreter answers like the child and records where it ran)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from benchmarks.throughput import run_peer_child


def test_a_relative_peer_python_is_found_from_the_scratch_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    venv_bin = tmp_path / ".venv-peer" / "bin"
    venv_bin.mkdir(parents=True)
    fake = venv_bin / "python"
    # Stands in for the peer venv's python: prints the child's result line.
    fake.write_text(
        '#!/bin/sh\nprintf \'BENCH-RESULT {"cwd": "%s", "args": "%s"}\\n\' "$(pwd)" "$*"\n'
    )
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.chdir(tmp_path)
    result = run_peer_child(["child", "deepeval"], Path(".venv-peer/bin/python"))
    # It ran, in a scratch folder (not here), with this module's arguments.
    assert result["args"] == "-m benchmarks.throughput child deepeval"
    assert os.path.realpath(result["cwd"]) != os.path.realpath(tmp_path)
    assert "offline-scorer-peer-" in result["cwd"]


def test_the_model_and_dtype_of_the_benchmark_reach_every_child(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from benchmarks.throughput import DTYPE_VARIABLE, MODEL_VARIABLE, bench_judge
    from offline_scorer import GenerationSettings

    settings = GenerationSettings(batch_size=2)
    monkeypatch.delenv(MODEL_VARIABLE, raising=False)
    monkeypatch.delenv(DTYPE_VARIABLE, raising=False)
    default = bench_judge(settings).config  # nothing loads until first use
    assert (default.model, default.load_options["dtype"]) == ("smollm2-135m-instruct", "auto")
    # throughput.py --model/--dtype set these before it starts the children (ours run with
    # this environment, the peer's with a copy of it).
    monkeypatch.setenv(MODEL_VARIABLE, "qwen2.5-coder-1.5b-instruct")
    monkeypatch.setenv(DTYPE_VARIABLE, "bfloat16")
    chosen = bench_judge(settings).config
    assert chosen.model == "qwen2.5-coder-1.5b-instruct"
    assert chosen.load_options["dtype"] == "bfloat16"
    assert chosen.generation.batch_size == 2
