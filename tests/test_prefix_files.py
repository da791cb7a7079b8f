"""Shared prompt prefixes kept on disk (``_prefix_files.py``), with the real embedded model.

A later process reads a system block's keys and values instead of computing them: what it
reads must be exactly what it would have computed, and anything else on disk (another
model's file, a damaged file, a folder that cannot be written) must cost only the saving.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from offline_scorer import TransformersJudge
from offline_scorer.judges.transformers._kvcache import PrefixStore
from offline_scorer.judges.transformers._prefix_files import PrefixFiles

if TYPE_CHECKING:
    from torch import Tensor

pytestmark = pytest.mark.slow

IDS = tuple(range(200, 240))


def _equal(first: list[tuple[Tensor, Tensor]], second: list[tuple[Tensor, Tensor]]) -> bool:
    import torch

    return len(first) == len(second) and all(
        torch.equal(k1, k2) and torch.equal(v1, v2) and k1.dtype == k2.dtype
        for (k1, v1), (k2, v2) in zip(first, second, strict=True)
    )


def test_the_judge_keeps_its_prefixes_in_the_cache_folder(
    judge: TransformersJudge, isolated_cache: Path
) -> None:
    files = judge.load().prefixes.files
    assert files is not None
    assert files.folder == isolated_cache / "prefixes"
    for part in ("smollm2-135m-instruct", "float32", "cpu", "torch ", "threads "):
        assert part in files.identity


def test_a_kept_prefix_reads_back_equal_to_the_computed_one(
    judge: TransformersJudge, tmp_path: Path
) -> None:
    model = judge.load().model
    writer = PrefixFiles(tmp_path, "identity A")
    computed = PrefixStore(files=writer).get(model, IDS)
    assert writer.saves == 1 and writer.path(IDS).is_file()

    reader = PrefixFiles(tmp_path, "identity A")
    read = PrefixStore(files=reader).get(model, IDS)
    assert reader.loads == 1 and reader.saves == 0
    assert _equal(read, computed)
    assert len(read) == model.config.num_hidden_layers


def test_another_identity_a_damaged_file_or_a_moved_file_is_computed_again(
    judge: TransformersJudge, tmp_path: Path
) -> None:
    model = judge.load().model
    first = PrefixFiles(tmp_path, "identity A")
    computed = PrefixStore(files=first).get(model, IDS)

    # Another model (or dtype, or torch) never reads A's file: it computes and writes its own.
    other = PrefixFiles(tmp_path, "identity B")
    PrefixStore(files=other).get(model, IDS)
    assert other.loads == 0 and other.saves == 1 and other.path(IDS) != first.path(IDS)

    # A damaged file is deleted, computed again and written whole.
    first.path(IDS).write_bytes(b"not a safetensors file")
    again = PrefixFiles(tmp_path, "identity A")
    assert _equal(PrefixStore(files=again).get(model, IDS), computed)
    assert again.loads == 0 and again.saves == 1
    assert PrefixFiles(tmp_path, "identity A").load(IDS) is not None

    # A file renamed to another prefix's name is refused by its metadata.
    shorter = IDS[:30]
    first.path(IDS).rename(first.path(shorter))
    assert first.load(shorter) is None and not first.path(shorter).exists()


def test_a_folder_that_cannot_be_written_costs_only_the_saving(
    judge: TransformersJudge, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model = judge.load().model
    blocked = tmp_path / "a-file-not-a-folder"
    blocked.write_text("")
    files = PrefixFiles(blocked, "identity A")
    with caplog.at_level(logging.WARNING):
        layers = PrefixStore(files=files).get(model, IDS)
        PrefixStore(files=files).get(model, IDS[:30])
    assert _equal(layers, PrefixStore().get(model, IDS))
    assert files.saves == 0
    warnings = [r.getMessage() for r in caplog.records if "prompt prefix" in r.getMessage()]
    assert len(warnings) == 1 and str(blocked) in warnings[0]


def test_only_the_most_recent_files_are_kept(judge: TransformersJudge, tmp_path: Path) -> None:
    import os

    model = judge.load().model
    files = PrefixFiles(tmp_path, "identity A", max_files=2)
    prefixes = [tuple(range(300 + n, 320 + n)) for n in range(3)]
    for age, ids in enumerate(prefixes):
        PrefixStore(files=files).get(model, ids)
        os.utime(files.path(ids), (1_000_000 + age, 1_000_000 + age))
    PrefixStore(files=files).get(model, tuple(range(400, 420)))
    kept = {p.name for p in tmp_path.glob("*.safetensors")}
    assert kept == {files.path(prefixes[2]).name, files.path(tuple(range(400, 420))).name}
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging file


NEW_PROCESS = """
import json, sys
from safetensors import safe_open
from offline_scorer import load_model
from offline_scorer.judges.transformers._kvcache import PrefixStore
ids = tuple(json.loads(sys.argv[1]))
loaded = load_model()
computed = PrefixStore().get(loaded.model, ids)
with safe_open(str(loaded.prefixes.files.path(ids)), framework="pt") as kept:
    equal = all(
        kept.get_tensor(f"keys.{i}").equal(k) and kept.get_tensor(f"values.{i}").equal(v)
        for i, (k, v) in enumerate(computed)
    )
print(json.dumps({"identity": loaded.prefixes.files.identity, "equal": equal}))
"""


def test_a_new_process_computes_exactly_what_this_one_kept(judge: TransformersJudge) -> None:
    loaded = judge.load()
    assert loaded.prefixes.files is not None
    ids = tuple(range(500, 540))
    loaded.prefixes.get(loaded.model, ids)
    assert loaded.prefixes.files.path(ids).is_file()

    result = subprocess.run(
        [sys.executable, "-c", NEW_PROCESS, json.dumps(list(ids))],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    answer = json.loads(result.stdout.strip().splitlines()[-1])
    assert answer == {"identity": loaded.prefixes.files.identity, "equal": True}
