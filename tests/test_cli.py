"""The offline-scorer command through its real entry point.

Usage errors exit 2 with one line before any model loads; the real-model tests score a
5-row dataset, write every report, and check exit statuses and resuming from the cache.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

CLI = [sys.executable, "-m", "offline_scorer"]

ROWS = [
    {
        "id": "capital",
        "input": "What is the capital of France?",
        "output": "Paris is the capital of France.",
    },
    {"id": "egg", "input": "How do I boil an egg?", "output": "The stock market fell yesterday."},
    {"id": "hamlet", "input": "Who wrote Hamlet?", "output": "William Shakespeare."},
    {"id": "empty", "input": "What colour is the sky?", "output": ""},
    {"id": "spider", "input": "How many legs does a spider have?", "output": "Eight."},
]


def run_cli(
    *args: str, env: dict[str, str] | None = None, timeout: int = 600
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def run_in_process(*args: str) -> Any:
    """The same command run by its app in this process (typer's test runner).

    For runs whose point is neither the entry point nor a signal: the command and its exit
    status are the same, without a new interpreter importing torch and loading the model
    again (the app shares the session's loaded model).
    """
    from typer.testing import CliRunner

    from offline_scorer.cli import app

    return CliRunner().invoke(app, list(args))


def dataset(tmp_path: Path, rows: list[dict[str, object]] = ROWS, name: str = "data.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["score", "{empty}"], "no usable rows"),
        (["score", "{data}", "--scorer", "answer-relevance"], "Unknown scorer"),
        (["score", "{data}", "--model", "gpt-7"], "Unknown model"),
        (["score", "{data}", "--threshold", "answer-relevancy=1.5"], "outside 0..1"),
        (["score", "{data}", "--threshold", "answer-relevancy"], "SCORER=MIN..MAX"),
        (["score", "{data}", "--threshold", "answer-relevancy=high"], "must be numbers"),
        (["score", "{data}", "--backend", "ray", "-t", "answer-relevancy=2"], "outside 0..1"),
        (["score", "{missing}"], "does not exist"),
        (["score", "{data}", "--scorer", "answer-similarity"], "needs a ground truth"),
        (["score", "{noout}"], "--agent"),
    ],
)
def test_usage_errors_exit_2_with_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    paths = {
        "empty": str(dataset(tmp_path, [], "empty.jsonl")),
        "data": str(dataset(tmp_path)),
        "missing": str(tmp_path / "missing.jsonl"),
        "noout": str(dataset(tmp_path, [{"input": "q"}], "noout.jsonl")),
    }
    result = run_cli(*[a.format(**paths) for a in args])
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert "Loading weights" not in result.stderr  # nothing was loaded


def test_models_lists_the_embedded_card() -> None:
    result = run_cli("models", "--json")
    assert result.returncode == 0
    cards = {card["name"]: card for card in json.loads(result.stdout)}
    card = cards["smollm2-135m-instruct"]
    assert card["present"] and card["checksum"] == "ok"
    # The Qwen cards are listed whether or not their parts are installed (CI has none).
    assert {"qwen2.5-coder-0.5b-instruct", "qwen2.5-coder-1.5b-instruct"} <= set(cards)
    assert card["verdicts"] == "read (fitted verdict model)" and card["extraction"] == "split"
    # The dtype each card runs in here: the embedded one in float32 on this CPU.
    assert card["device_here"] == "cpu" and card["dtype_here"] == "float32"
    assert cards["qwen2.5-coder-1.5b-instruct"]["dtype_here"] in {"float32", "bfloat16"}


@pytest.fixture(scope="module")
def scored_run(tmp_path_factory: pytest.TempPathFactory, session_cache: Path):  # type: ignore[no-untyped-def]
    """One real scoring run of the 5-row dataset, every report written."""
    folder = tmp_path_factory.mktemp("cli")
    data = dataset(folder)
    cache = folder / "cache.sqlite"
    args = [
        "score",
        str(data),
        "--scorer",
        "answer-relevancy",
        "--batch-size",
        "1",
        "--out",
        str(folder / "results.jsonl"),
        "--summary",
        str(folder / "summary.json"),
        "--report",
        str(folder / "report.html"),
        "--junit",
        str(folder / "junit.xml"),
        "--cache-path",
        str(cache),
        "--threshold",
        "answer-relevancy=0",
    ]
    result = run_cli(*args, env={"OFFLINE_SCORER_CACHE": str(session_cache)})
    return folder, data, cache, result


@pytest.mark.slow
def test_score_writes_every_report(scored_run) -> None:  # type: ignore[no-untyped-def]
    folder, _, _, result = scored_run
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines()]
    assert len(lines) == 5 and {line["status"] for line in lines} == {"scored"}
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["total_items"] == 5 and summary["verdict"] == "passed"
    assert summary["scorers"]["answer-relevancy-scorer"]["scored"] == 5
    assert "<html" in (folder / "report.html").read_text().lower()
    suites = ET.parse(folder / "junit.xml").getroot()
    assert len(suites.findall(".//testcase")) == 5
    # Loading speaks with one line of ours (what, how, from where), not progress bars.
    assert "Loading weights" not in result.stderr and "it/s]" not in result.stderr
    loaded = [line for line in result.stderr.splitlines() if "offline-scorer: Loaded " in line]
    assert len(loaded) == 1, result.stderr
    assert (
        "smollm2-135m-instruct (float32, cpu) from " in loaded[0] and " GB of weights" in loaded[0]
    )


@pytest.mark.slow
def test_threshold_exit_status_from_cached_answers(scored_run) -> None:  # type: ignore[no-untyped-def]
    folder, data, cache, _ = scored_run
    common = ["score", str(data), "--batch-size", "1", "--cache-path", str(cache), "--summary"]
    # The "empty" row always scores 0, so the mean over 5 rows is at most 0.8.
    # In this process: the exit status is the app's (the entry point passes it on, as the
    # other tests here show), and every answer comes from the cache.
    cannot_pass = run_in_process(
        *common, str(folder / "s1.json"), "--threshold", "answer-relevancy=0.9"
    )
    can_pass = run_in_process(*common, str(folder / "s2.json"), "--threshold", "answer-relevancy=0")
    assert cannot_pass.exit_code == 1, cannot_pass.output
    assert "FAIL" in cannot_pass.stdout and "verdict: failed" in cannot_pass.stdout
    assert can_pass.exit_code == 0, can_pass.output
    summary = json.loads((folder / "s2.json").read_text())
    assert summary["cache_misses"] == 0 and summary["cache_hits"] > 0  # no model call at all


@pytest.mark.slow
def test_cli_report_in_a_real_browser_matches_the_summary(scored_run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from test_reports import CHROMIUM, _chromium, _TestIdParser

    if not CHROMIUM.exists():
        pytest.skip(
            "headless Chromium not installed: run `apt-get install chromium` (.ci/run does)"
        )
    folder, _, _, _ = scored_run
    summary = json.loads((folder / "summary.json").read_text())
    dom = _chromium("--dump-dom", (folder / "report.html").as_uri(), profile=tmp_path / "p").stdout
    parser = _TestIdParser()
    parser.feed(dom)
    scorer = summary["scorers"]["answer-relevancy-scorer"]
    assert parser.values["total-items"] == str(summary["total_items"])
    assert float(parser.values["mean-answer-relevancy-scorer"]) == pytest.approx(
        scorer["mean"], abs=5e-5
    )
    assert int(parser.values["scored-answer-relevancy-scorer"]) == scorer["scored"]
    assert parser.bars["answer-relevancy-scorer"] == scorer["histogram"]
    _chromium(
        f"--screenshot={tmp_path / 'report.png'}",
        "--window-size=1280,1400",
        (folder / "report.html").as_uri(),
        profile=tmp_path / "p2",
    )
    assert (tmp_path / "report.png").stat().st_size > 10_000


def _wait_for_cached_calls(cache: Path, process: subprocess.Popen[bytes], count: int) -> int:
    finished = 0
    deadline = time.time() + 400
    while time.time() < deadline and process.poll() is None:
        time.sleep(0.5)
        if cache.exists():
            with sqlite3.connect(cache) as connection:
                finished = connection.execute("SELECT COUNT(*) FROM answers").fetchone()[0]
            if finished >= count:
                break
    return finished


# The resumed run scores these cases of cases.RELEVANCY_CASES, so that the session's one
# uninterrupted batch of every case (conftest's generated_relevancy) is the run it must
# equal. Three rows, seven judge calls ("empty" has only its reason, the others three
# each), are enough: SIGTERM lands once the first row is done and the second has begun
# (call 2), SIGKILL three calls later (call 5), and two calls remain for the resumed run.
RESUME_CASES = ("empty", "relevant", "off_topic")


@pytest.mark.slow
def test_interrupted_and_killed_runs_resume_from_cache_with_identical_results(
    tmp_path: Path,
    session_cache: Path,
    generated_relevancy,  # type: ignore[no-untyped-def]
) -> None:
    from cases import RELEVANCY_CASES

    data = dataset(tmp_path, [{"id": name, **RELEVANCY_CASES[name]} for name in RESUME_CASES])
    cache = tmp_path / "resume.sqlite"
    out = tmp_path / "resumed.jsonl"
    args = [
        "score",
        str(data),
        "--batch-size",
        "1",
        "--cache-path",
        str(cache),
        "--out",
        str(out),
        "-q",
        # Generated verdicts: three judge calls per answered item, slow enough to interrupt
        # midway (read verdicts make one call per item and finish these rows in seconds).
        "--verdicts",
        "generate",
        "--extraction",
        "model",
    ]
    env = {**os.environ, "OFFLINE_SCORER_CACHE": str(session_cache)}

    # SIGTERM (like Ctrl-C) once the second item's first judge call is cached: the first
    # item has then finished and been handed to the writer, so it must be in the output
    # (waiting only for the first item's own calls raced the writer). Exit 130, finished
    # items written whole.
    process = subprocess.Popen(
        [*CLI, *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    first = _wait_for_cached_calls(cache, process, 2)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr
    partial = [json.loads(line) for line in out.read_text().splitlines()]
    assert 1 <= len(partial) < len(RESUME_CASES) and first >= 2

    # SIGKILL a second run part-way: nothing of it is written, but its judge calls are cached.
    out.unlink()
    process = subprocess.Popen(
        [*CLI, *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    second = _wait_for_cached_calls(cache, process, first + 3)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert second >= first and not out.exists()

    # The resumed run needs no signal: it runs in this process, on the session's model.
    resumed = run_in_process(*args, "--summary", str(tmp_path / "resumed-summary.json"))
    assert resumed.exit_code == 0, resumed.output
    summary = json.loads((tmp_path / "resumed-summary.json").read_text())
    assert summary["cache_hits"] >= second  # finished calls were not recomputed
    again = [json.loads(line) for line in out.read_text().splitlines()]
    # The uninterrupted run: the same rows, scorer and model in one batch, no cache at all.
    fresh, _ = generated_relevancy
    assert [(r["item_id"], r["score"], r["reason"]) for r in again] == [
        (name, fresh[name].score, fresh[name].reason) for name in RESUME_CASES
    ]
