"""Render docs/report.png: a screenshot of the HTML report for a small hand-made evaluation.

Needs headless Chromium (``apt-get install chromium``); loads no model.

    .venv/bin/python docs/make_report_screenshot.py
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from offline_scorer.evals._types import EvalItem, EvalResult, EvalSummary, ScorerSummary, Threshold
from offline_scorer.pipeline._results import ScoreResult, StepStats
from offline_scorer.reports import write_html_report

REL = "answer-relevancy-scorer"
SIM = "answer-similarity-scorer"
MODEL = "qwen2.5-3b-instruct"
FINGERPRINT = "qwen2.5-3b-instruct@sha256:4c1f0a9e2b7d3e55"
CHROMIUM = "/usr/bin/chromium"
REASONS = {
    "exact": "The answer states the reference word for word.",
    "semantic": "The answer states the reference in other words.",
    "partial": "The answer states only part of the reference.",
}
TARGET = Path(__file__).resolve().parent / "report.png"

# (item id, question, answer, ground truth, relevancy verdicts, relevancy, similarity)
DEMO = [
    ("capital-fr", "What is the capital of France?", "Paris.", "Paris", ["yes"], 1.0, 1.0),
    (
        "boiling-point",
        "At what temperature does water boil?",
        "100 °C at sea level; less on a mountain.",
        "100 degrees Celsius",
        ["yes", "unsure"],
        0.65,
        0.67,
    ),
    (
        "largest-planet",
        "Which planet is the largest?",
        "Jupiter. Saturn has the most beautiful rings.",
        "Jupiter",
        ["yes", "no"],
        0.5,
        0.62,
    ),
    (
        "speed-of-light",
        "How fast is light in a vacuum?",
        "About 300,000 km per second.",
        "299,792,458 metres per second",
        ["yes"],
        1.0,
        0.4,
    ),
    ("refund-policy", "Can I get a refund?", "I cannot help with that.", None, ["no"], 0.0, None),
]


def _steps() -> dict[str, StepStats]:
    names = ("preprocess", "analyze", "generate_score", "generate_reason")
    return {n: StepStats(seconds=0.4, prompt_tokens=180, generated_tokens=40) for n in names}


def _relevancy(item_id: str, question: str, answer: str, verdicts: list[str], score: float):
    statements = [part.strip() for part in answer.replace(";", ".").split(".") if part.strip()]
    results = [{"result": v, "reason": f"Judged '{v}' for the question."} for v in verdicts]
    return ScoreResult(
        run_id=f"rel-{item_id}",
        scorer_id=REL,
        status="scored",
        score=score,
        reason=f"The score is {score:g} because {len(verdicts)} statement(s) were judged.",
        input=question,
        output=answer,
        preprocess_prompt=[{"role": "user", "content": f"Split into statements: {answer}"}],
        preprocess_step_result={"statements": statements[: len(verdicts)]},
        analyze_step_result={"results": results},
        model_id=MODEL,
        model_fingerprint=FINGERPRINT,
        steps=_steps(),
    )


def _similarity(item_id: str, answer: str, truth: str | None, score: float | None):
    if truth is None:
        return ScoreResult(
            run_id=f"sim-{item_id}",
            scorer_id=SIM,
            status="failed",
            error="Scorer run failed: step 'preprocess': the item has no ground truth",
            failed_step="preprocess",
        )
    kind = "exact" if score == 1.0 else "semantic" if score and score > 0.5 else "partial"
    match = {"ground_truth_unit": truth, "output_unit": answer, "match_type": kind}
    return ScoreResult(
        run_id=f"sim-{item_id}",
        scorer_id=SIM,
        status="scored",
        score=score,
        reason=REASONS[kind],
        analyze_step_result={"matches": [match], "extra_in_output": [], "contradictions": []},
        model_id=MODEL,
        model_fingerprint=FINGERPRINT,
        steps=_steps(),
    )


def _histogram(scores: list[float]) -> list[int]:
    counts = [0] * 10
    for score in scores:
        counts[min(int(score * 10), 9)] += 1
    return counts


def demo_result() -> EvalResult:
    """A five-item evaluation on both scorers, with one failed similarity run."""
    items = [
        EvalItem(
            index=i,
            item_id=item_id,
            input=question,
            output=answer,
            ground_truth=truth,
            results={
                REL: _relevancy(item_id, question, answer, verdicts, rel),
                SIM: _similarity(item_id, answer, truth, sim),
            },
        )
        for i, (item_id, question, answer, truth, verdicts, rel, sim) in enumerate(DEMO)
    ]
    rel_scores = [row[5] for row in DEMO]
    sim_scores = [row[6] for row in DEMO if row[6] is not None]
    rel_mean = sum(rel_scores) / len(rel_scores)
    sim_mean = sum(sim_scores) / len(sim_scores)
    scorers = {
        REL: ScorerSummary(
            scorer_id=REL,
            mean=rel_mean,
            scored=len(rel_scores),
            threshold=Threshold(minimum=0.6),
            passed=rel_mean >= 0.6,
            histogram=_histogram(rel_scores),
        ),
        SIM: ScorerSummary(
            scorer_id=SIM,
            mean=sim_mean,
            scored=len(sim_scores),
            failed=len(rel_scores) - len(sim_scores),
            threshold=Threshold(minimum=0.7),
            passed=sim_mean >= 0.7,
            histogram=_histogram(sim_scores),
        ),
    }
    summary = EvalSummary(
        total_items=len(items),
        scorers=scorers,
        verdict="passed" if all(s.passed for s in scorers.values()) else "failed",
        model_id=MODEL,
        model_fingerprint=FINGERPRINT,
        seconds=21.4,
    )
    return EvalResult(scores={REL: rel_mean, SIM: sim_mean}, summary=summary, items=items)


def main() -> int:
    """Write the demo report to a temporary folder and screenshot it into docs/report.png."""
    with tempfile.TemporaryDirectory() as folder:
        page = Path(folder) / "report.html"
        write_html_report(
            demo_result(),
            page,
            title="offline-scorer report — demo",
            generated_at=datetime(2026, 1, 15, 9, 30, tzinfo=timezone.utc),
        )
        # Show the second item's details open (a plain attribute; the page's script is unchanged).
        html = page.read_text(encoding="utf-8")
        first = html.index("<details><summary>Details")
        second = html.index("<details><summary>Details", first + 1)
        page.write_text(html[:second] + "<details open>" + html[second + 9 :], encoding="utf-8")
        command = [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--hide-scrollbars",
            f"--user-data-dir={Path(folder) / 'profile'}",
            f"--screenshot={TARGET}",
            "--window-size=1280,1500",
            page.as_uri(),
        ]
        subprocess.run(command, check=True, capture_output=True, timeout=60)
    print(f"wrote {TARGET} ({TARGET.stat().st_size // 1024} kB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
