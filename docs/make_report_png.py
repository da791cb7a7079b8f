"""Render docs/report.png: a screenshot of the real HTML report that ``offline-scorer demo`` writes.

Runs the demo (the embedded model scores the built-in dataset; a few minutes on a small CPU)
with the Python that runs this script, into a temporary folder outside the repository, then
opens that report in headless Chromium, expands the first items' details and captures the page.

    .venv/bin/python docs/make_report_png.py                      # run the demo, then the shot
    .venv/bin/python docs/make_report_png.py --report report.html  # shoot an existing report

Chromium is driven as in tests/test_reports.py (the same binary and flags), over the DevTools
protocol on a pipe (``--remote-debugging-pipe``: standard library only, no port, no extra
package), so that the page can be measured and the shot can cover its whole height.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import select
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "docs" / "report.png"
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)
INSTALL_HINT = "apt-get install chromium chromium-driver"
# Opens the first `n` item details with the page's own markup (the "Details: steps and
# prompts" <details> of each item row), then reports the page's full height in CSS pixels.
EXPAND_AND_MEASURE = """
(function (n) {
  var details = document.querySelectorAll("tr.more > td > details");
  for (var i = 0; i < details.length && i < n; i += 1) { details[i].open = true; }
  var root = document.documentElement;
  return JSON.stringify({
    items: document.querySelectorAll("tbody.item").length,
    opened: Math.min(n, details.length),
    height: Math.max(root.scrollHeight, document.body.scrollHeight),
  });
})(%d)
"""


class ScreenshotError(RuntimeError):
    """Chromium is missing, did not start, or did not answer as expected."""


def find_chromium() -> str:
    """The Chromium binary: on PATH, else the Debian path the browser tests use."""
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    if Path("/usr/bin/chromium").exists():
        return "/usr/bin/chromium"
    raise ScreenshotError(f"headless Chromium not found: run `{INSTALL_HINT}`")


def run_demo(folder: Path) -> Path:
    """Run ``offline-scorer demo`` in this interpreter's environment; return its report path."""
    report = folder / "report.html"
    command = [sys.executable, "-m", "offline_scorer", "demo", "--report", str(report)]
    print("$ " + " ".join(command), flush=True)
    started = time.monotonic()
    done = subprocess.run(command, cwd=ROOT, check=False)
    if done.returncode != 0 or not report.is_file():
        raise ScreenshotError(
            f"offline-scorer demo exited with {done.returncode} and wrote no report at {report}"
        )
    print(f"demo finished in {time.monotonic() - started:.0f} s", flush=True)
    return report


class DevTools:
    """A minimal DevTools-protocol client over Chromium's ``--remote-debugging-pipe``.

    Chromium reads NUL-terminated JSON commands on its fd 3 and writes replies and events on
    its fd 4.
    """

    def __init__(self, chromium: str, folder: Path, width: int, height: int) -> None:
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def onto_fds_3_and_4() -> None:  # in the child, before exec
            import fcntl

            high_r = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD, 10)
            high_w = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD, 10)
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)
            os.close(high_r)
            os.close(high_w)

        command = [
            chromium,
            *CHROMIUM_FLAGS,
            f"--user-data-dir={folder / 'profile'}",
            f"--window-size={width},{height}",
            "--remote-debugging-pipe",
            "about:blank",
        ]
        self._log = folder / "chromium.log"
        with self._log.open("wb") as log:
            self.process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                close_fds=False,  # fds 3 and 4 must survive; Python's own fds are close-on-exec
                preexec_fn=onto_fds_3_and_4,
            )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []

    def send(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        """Send one command and wait for its reply; events read meanwhile are kept."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._read()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise ScreenshotError(f"DevTools {method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result
            self.events.append(reply)

    def wait_for(self, method: str, timeout: float = 30) -> dict[str, Any]:
        """Wait for an event (one already read counts)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for event in self.events:
                if event.get("method") == method:
                    self.events.remove(event)
                    return event
            self.events.append(self._read())
        raise ScreenshotError(f"no {method} event within {timeout:.0f} s")

    def _read(self, timeout: float = 60) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            if not select.select([self._from_browser], [], [], timeout)[0]:
                raise ScreenshotError(f"Chromium did not answer within {timeout:.0f} s")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.process.wait(timeout=10)
                log = self._log.read_text(errors="replace").strip()[-2000:]
                raise ScreenshotError(
                    f"Chromium closed the DevTools pipe (exit {self.process.returncode}): {log}"
                )
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\0", 1)
        message: dict[str, Any] = json.loads(line)
        return message

    def close(self) -> None:
        with contextlib.suppress(ScreenshotError, OSError):
            self.send("Browser.close")
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for fd in (self._to_browser, self._from_browser):
            os.close(fd)


def screenshot(report: Path, png: Path, width: int, max_height: int, expand: int) -> dict[str, Any]:
    """Open `report` in headless Chromium and write a PNG of (up to `max_height` px of) it."""
    chromium = find_chromium()
    with tempfile.TemporaryDirectory(prefix="report-png-") as folder:
        browser = DevTools(chromium, Path(folder), width, 900)
        try:
            page = next(
                t["targetId"]
                for t in browser.send("Target.getTargets")["targetInfos"]
                if t["type"] == "page"
            )
            session = browser.send("Target.attachToTarget", targetId=page, flatten=True)[
                "sessionId"
            ]
            browser.send("Page.enable", session)
            browser.send(
                "Emulation.setDeviceMetricsOverride",
                session,
                width=width,
                height=900,
                deviceScaleFactor=1,
                mobile=False,
            )
            browser.send("Page.navigate", session, url=report.resolve().as_uri())
            browser.wait_for("Page.loadEventFired")
            script = EXPAND_AND_MEASURE % expand
            evaluated = browser.send("Runtime.evaluate", session, expression=script)
            facts: dict[str, Any] = json.loads(evaluated["result"]["value"])
            height = min(int(facts["height"]), max_height)
            browser.send(
                "Emulation.setDeviceMetricsOverride",
                session,
                width=width,
                height=height,
                deviceScaleFactor=1,
                mobile=False,
            )
            time.sleep(0.3)  # let the resized page lay out and paint
            shot = browser.send("Page.captureScreenshot", session, format="png")
        finally:
            browser.close()
    data = base64.b64decode(shot["data"])
    png.parent.mkdir(parents=True, exist_ok=True)
    png.write_bytes(data)
    facts["size"] = png_size(data)
    return facts


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from the PNG's IHDR chunk."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ScreenshotError("Chromium returned something that is not a PNG")
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--report",
        type=Path,
        help="Screenshot this existing report.html instead of running the demo.",
    )
    parser.add_argument("--out", type=Path, default=TARGET, help="PNG to write (docs/report.png).")
    parser.add_argument("--width", type=int, default=1280, help="Window width in px (1280).")
    parser.add_argument(
        "--max-height", type=int, default=2400, help="Cut the full-page shot at this height (2400)."
    )
    parser.add_argument(
        "--expand", type=int, default=2, help="Open the details of this many first items (2)."
    )
    args = parser.parse_args(argv)
    started = time.monotonic()
    try:
        find_chromium()  # fail before a demo run of several minutes
        if args.report is not None:
            if not args.report.is_file():
                raise ScreenshotError(f"no report at {args.report}")
            report = args.report
        else:
            # Kept (outside the repository) so the report behind the PNG can be opened.
            report = run_demo(Path(tempfile.mkdtemp(prefix="offline-scorer-demo-")))
        facts = screenshot(report, args.out, args.width, args.max_height, args.expand)
    except ScreenshotError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    width, height = facts["size"]
    cut = f", cut from {facts['height']} px" if facts["height"] > height else ""
    print(f"report: {report.resolve()} ({facts['items']} items, {facts['opened']} expanded)")
    print(f"png:    {args.out} ({width}x{height} px{cut}, {args.out.stat().st_size // 1024} kB)")
    print(f"took {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
