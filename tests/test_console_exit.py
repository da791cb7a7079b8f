"""The console script ends its process without Python's teardown (``end_process``), and
loses nothing a normal exit would keep: exit statuses, atexit handlers, running threads,
buffered output. The scoring runs through this entry point are in ``test_cli.py``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CONSOLE = """
import atexit, sys, threading, time
from pathlib import Path
marker = Path(sys.argv[1])
def late_writer():
    time.sleep(0.5)
    marker.write_text("written by a thread that was still running")
threading.Thread(target=late_writer).start()
atexit.register(lambda: sys.stderr.write("atexit handler ran\\n"))
sys.stdout.write("buffered line without a flush")
from offline_scorer.cli import console
sys.argv = ["offline-scorer", *sys.argv[2:]]
console()
"""


def _console(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    marker = tmp_path / "marker.txt"
    result = subprocess.run(
        [sys.executable, "-c", CONSOLE, str(marker), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return result, marker


def test_a_finished_command_keeps_its_output_threads_and_atexit_handlers(tmp_path: Path) -> None:
    result, marker = _console(tmp_path, "models")

    assert result.returncode == 0, result.stderr[-2000:]
    assert "smollm2-135m-instruct" in result.stdout
    assert result.stdout.startswith("buffered line without a flush")
    assert "atexit handler ran" in result.stderr
    assert marker.read_text() == "written by a thread that was still running"


def test_a_failed_command_keeps_its_exit_status_and_message(tmp_path: Path) -> None:
    missing = tmp_path / "missing.jsonl"
    result, marker = _console(tmp_path, "score", str(missing))
    plain = subprocess.run(
        [
            sys.executable,
            "-c",
            "from offline_scorer.cli import main; main()",
            "score",
            str(missing),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert plain.returncode != 0
    assert result.returncode == plain.returncode
    assert str(missing.name) in result.stderr
    assert "atexit handler ran" in result.stderr and marker.is_file()


def test_a_text_exit_code_is_printed_and_exits_1() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "from offline_scorer.cli._app import end_process; end_process('what went wrong')",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr == "what went wrong\n"
