"""benchmarks/gpu.py on this CPU: the script a GPU machine runs, with a 1-layer model.

The GPU run itself cannot happen here (no CUDA device); this runs the same code paths with
``--device cpu`` on the embedded card's shape cut to one decoder layer, so that a broken
script is found here rather than on a borrowed GPU.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import gpu

pytestmark = pytest.mark.slow


def test_export_then_run_on_cpu(tmp_path: Path, judge) -> None:  # type: ignore[no-untyped-def]
    shape = tmp_path / "shape"
    summary = gpu.export("smollm2-135m-instruct", shape, reads=2)
    assert "config.json" in summary["files"]
    assert not list(shape.glob("*.safetensors")), "the export must hold no weights"
    reads = json.loads((shape / "reads.json").read_text(encoding="utf-8"))
    assert set(reads) == {"relevancy", "similarity"}
    assert all(len(r["messages"]) == 3 for r in reads.values())  # 2 measured + 1 warm-up

    out = tmp_path / "gpu.json"
    gpu.main(
        [
            "run",
            "--shape", str(shape),
            "--device", "cpu",
            "--layers", "1",
            "--dtypes", "float32",
            "--batches", "1", "2",
            "--read-sizes", "1", "2",
            "--json-rows", "2",
            "--judge-sizes", "2",
            "--tokens", "2",
            "--repeats", "1",
            "--out", str(out),
        ]
    )  # fmt: skip
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["card"] == "smollm2-135m-instruct"
    (run,) = report["runs"]
    assert run["dtype"] == "float32" and run["device"] == "cpu"
    assert run["prompt_tokens"] > 100
    assert set(run["batches"]) == {"1", "2"}
    assert all(row["loop_decode_tokens_per_s"] > 0 for row in run["batches"].values())
    reads_1, reads_2 = run["label_reads"]["1"], run["label_reads"]["2"]
    assert reads_1["reads"] == reads_2["reads"] == 4
    assert reads_1["changes"]["max_abs"] == 0.0  # one row per pass against itself
    assert reads_2["changes"]["flips"] == 0
    assert run["constrained_json"]["valid"] == 2
    passes = run["judge_passes"]
    assert passes["2"]["prompts_per_pass"] == 2
    assert passes["default"]["prompts_per_pass"] == 8  # a folder without a card, on a CPU
    assert all(row[kind]["failed"] == 0 for row in passes.values() for kind in ("json", "text"))
    assert run["weight_gb"] > 0 and run["peak_gpu_gb"] is None
