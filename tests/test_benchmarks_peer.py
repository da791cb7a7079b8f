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
