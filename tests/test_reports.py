"""Report writers: JSON lines, summary JSON, JUnit XML and the self-contained HTML report.

The HTML report is also opened in headless Chromium (when installed) to check the numbers
a reader sees, that the injected script never runs and that a screenshot renders.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import re
import subprocess
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from html.parser import HTMLParser
from pathlib import Path

import pytest

from offline_scorer._files import write_text_atomically
from offline_scorer.evals._types import (
    EvalItem,
    EvalResult,
    EvalSummary,
    RowProblem,
    ScorerSummary,
    Threshold,
)
from offline_scorer.pipeline._results import ScoreResult, StepStats
from offline_scorer.reports import (
    append_result_lines,
    render_html_report,
    write_html_report,
    write_junit_xml,
    write_results_jsonl,
    write_summary_json,
)
from offline_scorer.scorers._display import (
    StepRow,
    StepTable,
    format_probabilities,
    relevancy_tables,
    similarity_tables,
)
from offline_scorer.scorers._registry import scorer_info

CHROMIUM = Path("/usr/bin/chromium")
REL = "answer-relevancy-scorer"
SIM = "answer-similarity-scorer"
MODEL = "smollm2-135m-instruct"
FINGERPRINT = "smollm2-135m-instruct@sha256:b179c9523d0e6a0f"
PAYLOAD = '<script>document.title="pwned"</script><script>alert(1)</script>'
EVIL_ANSWER = f"{PAYLOAD} Paris\x00 is lovely 🗼🥖"
TITLE = "Nightly <eval> report"


def _prompt(system: str, user: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _steps(*names: str) -> dict[str, StepStats]:
    return {
        name: StepStats(seconds=0.25, prompt_tokens=120, generated_tokens=30, model_call=True)
        for name in names
    }


def _relevancy(run_id: str, output: str, verdicts: list[tuple[str, str, str]], score: float):
    """A scored relevancy result: (statement, verdict, reason) triples."""
    return ScoreResult(
        run_id=run_id,
        scorer_id=REL,
        scorer_options={"uncertainty_weight": 0.3, "scale": 1, "language": "en"},
        status="scored",
        score=score,
        reason=f"The score is {score} because the answer mostly addresses the question.",
        input="What is the capital of France?",
        output=output,
        preprocess_prompt=_prompt("You break an answer into statements.", output),
        preprocess_step_result={"statements": [s for s, _, _ in verdicts]},
        analyze_prompt=_prompt(
            "You judge each statement.", json.dumps([s for s, _, _ in verdicts])
        ),
        analyze_step_result={"results": [{"result": v, "reason": r} for _, v, r in verdicts]},
        generate_reason_prompt=_prompt("Explain the score.", f"score {score}"),
        model_id=MODEL,
        model_fingerprint=FINGERPRINT,
        language="en",
        steps=_steps("preprocess", "analyze", "generate_score", "generate_reason"),
    )


def _similarity_scored() -> ScoreResult:
    return ScoreResult(
        run_id="run-sim-0",
        scorer_id=SIM,
        scorer_options={"semantic_threshold": 0.8, "scale": 1},
        status="scored",
        score=0.67,
        reason="The answer names Paris but not as the capital; no contradictions.",
        input="What is the capital of France?",
        output="Paris is the capital of France. It has the Eiffel Tower.",
        ground_truth="Paris is the capital of France.",
        preprocess_prompt=_prompt("Break both texts into units.", "Paris ..."),
        preprocess_step_result={
            "output_units": ["Paris is the capital of France", "It has the Eiffel Tower"],
            "ground_truth_units": ["Paris is the capital of France"],
        },
        analyze_prompt=_prompt("Match every ground-truth unit.", "units ..."),
        analyze_step_result={
            "matches": [
                {
                    "ground_truth_unit": "Paris is the capital of France",
                    "output_unit": "Paris is the capital of France",
                    "match_type": "semantic",
                    "explanation": "Same fact, same words.",
                }
            ],
            "extra_in_output": ["It has the Eiffel Tower"],
            "contradictions": [],
        },
        generate_reason_prompt=_prompt("Explain the score.", "score 0.67"),
        model_id=MODEL,
        model_fingerprint=FINGERPRINT,
        language="en",
        steps=_steps("preprocess", "analyze", "generate_score", "generate_reason"),
    )


def _failed(run_id: str, scorer_id: str, output: object) -> ScoreResult:
    return ScoreResult(
        run_id=run_id,
        scorer_id=scorer_id,
        status="failed",
        error="Scorer run failed: step 'analyze' raised ValueError: judge returned 0 matches",
        failed_step="analyze",
        output=output,
        preprocess_step_result={"output_units": ["100 °C"], "ground_truth_units": ["100 °C"]},
        model_id=MODEL,
        steps=_steps("preprocess", "analyze"),
    )


def _not_scorable(run_id: str, scorer_id: str, why: str) -> ScoreResult:
    return ScoreResult(
        run_id=run_id, scorer_id=scorer_id, status="not_scorable", not_scorable_reason=why
    )


def build_result() -> EvalResult:
    """Four items: relevancy scores 0.67, 1, 0.5 and one not scorable (threshold >= 0.7);
    similarity: one scored 0.67, two failed and one not scorable (threshold >= 0.8)."""
    chat = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "At what temperature does water boil?"},
    ]
    items = [
        EvalItem(
            index=0,
            item_id="capital-france",
            input="What is the capital of France?",
            output="Paris is the capital of France. It has the Eiffel Tower.",
            ground_truth="Paris is the capital of France.",
            results={
                REL: _relevancy(
                    "run-rel-0",
                    "Paris is the capital of France. It has the Eiffel Tower.",
                    [
                        ("Paris is the capital of France", "yes", "Answers the question."),
                        ("It has the Eiffel Tower", "no", "Not asked."),
                        ("Paris is in Europe", "yes", "Context for the answer."),
                    ],
                    0.67,
                ),
                SIM: _similarity_scored(),
            },
        ),
        EvalItem(
            index=1,
            item_id="boiling",
            input=chat,
            output={"text": "100 °C at sea level"},
            ground_truth="100 degrees Celsius",
            results={
                REL: _relevancy(
                    "run-rel-1",
                    "100 °C at sea level",
                    [("Water boils at 100 °C at sea level", "yes", "Direct answer.")],
                    1.0,
                ),
                SIM: _failed("run-sim-1", SIM, {"text": "100 °C at sea level"}),
            },
        ),
        EvalItem(
            index=2,
            item_id='xss-<b>"bold"</b>',
            input="Tell me about Paris </td></tr></table>",
            output=EVIL_ANSWER,
            ground_truth=None,
            results={
                REL: _relevancy(
                    "run-rel-2",
                    EVIL_ANSWER,
                    [(PAYLOAD, "no", f"Markup {PAYLOAD}"), ("Paris\x00 is lovely 🗼", "yes", "ok")],
                    0.5,
                ),
                SIM: _not_scorable("run-sim-2", SIM, f"no ground truth for {PAYLOAD}"),
            },
        ),
        EvalItem(
            index=3,
            item_id="timeout",
            input="Summarise the report.",
            output=None,
            target_error="TimeoutError: the target took longer than 30 s",
            results={
                REL: _not_scorable("run-rel-3", REL, "no answer to judge"),
                SIM: _failed("run-sim-3", SIM, None),
            },
        ),
    ]
    rel_mean = (0.67 + 1.0 + 0.5) / 3
    summary = EvalSummary(
        total_items=4,
        scorers={
            REL: ScorerSummary(
                scorer_id=REL,
                mean=rel_mean,
                scored=3,
                not_scorable=1,
                failed=0,
                threshold=Threshold(minimum=0.7),
                passed=True,
                histogram=[0, 0, 0, 0, 0, 1, 1, 0, 0, 1],
            ),
            SIM: ScorerSummary(
                scorer_id=SIM,
                mean=0.67,
                scored=1,
                not_scorable=1,
                failed=2,
                threshold=Threshold(minimum=0.8),
                passed=False,
                histogram=[0, 0, 0, 0, 0, 0, 1, 0, 0, 0],
            ),
        },
        verdict="failed",
        model_id=MODEL,
        model_fingerprint=FINGERPRINT,
        seconds=12.5,
        skipped_rows=[RowProblem(line=7, message="missing 'input' <field>")],
    )
    return EvalResult(scores={REL: rel_mean, SIM: 0.67}, summary=summary, items=items)


@pytest.fixture(scope="module")
def result() -> EvalResult:
    return build_result()


# --------------------------------------------------------------------------- JSON


def test_jsonl_has_one_line_per_item_and_scorer(result: EvalResult, tmp_path: Path) -> None:
    path = write_results_jsonl(result, tmp_path / "out" / "results.jsonl")
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 8
    records = [json.loads(line) for line in lines]
    expected = [(item, run) for item in result.items for run in item.results.values()]
    for record, (item, run) in zip(records, expected, strict=True):
        assert record["item_index"] == item.index
        assert record["item_id"] == item.item_id
        assert record["target_error"] == item.target_error
        dumped = run.model_dump(mode="json")
        assert {k: record[k] for k in dumped} == dumped
    assert records[4]["output"] == EVIL_ANSWER  # NUL and emoji survive the round trip
    assert ScoreResult.model_validate({k: records[0][k] for k in ScoreResult.model_fields})


def test_append_result_lines_streams_the_same_lines(result: EvalResult, tmp_path: Path) -> None:
    stream = io.StringIO()
    assert append_result_lines(result.items[:2], stream) == 4
    written = write_results_jsonl(result, tmp_path / "r.jsonl").read_text(encoding="utf-8")
    assert written.startswith(stream.getvalue())


def test_summary_json_equals_the_model(result: EvalResult, tmp_path: Path) -> None:
    path = write_summary_json(result, tmp_path / "summary.json")
    text = path.read_text(encoding="utf-8")
    document = json.loads(text)
    assert document.pop("scores") == result.scores
    assert document == result.summary.model_dump(mode="json")
    assert "\n  " in text  # pretty-printed


def test_atomic_write_leaves_no_temporary_files(tmp_path: Path) -> None:
    target = tmp_path / "report.txt"
    target.write_text("old", encoding="utf-8")
    write_text_atomically(target, "new \ud800 text")  # a lone surrogate does not fail
    assert target.read_text(encoding="utf-8") == "new \\ud800 text"
    assert [p.name for p in tmp_path.iterdir()] == ["report.txt"]
    umask = os.umask(0)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask


# --------------------------------------------------------------------------- JUnit


def test_junit_counts_per_scorer(result: EvalResult, tmp_path: Path) -> None:
    root = ET.parse(write_junit_xml(result, tmp_path / "junit.xml")).getroot()
    assert root.tag == "testsuites"
    suites = {suite.get("name"): suite for suite in root.findall("testsuite")}
    assert set(suites) == {REL, SIM}
    # relevancy >= 0.7: 0.67 and 0.5 fail, 1.0 passes, one not scorable.
    # similarity >= 0.8: 0.67 fails, two failed runs, one not scorable.
    expected = {REL: ("4", "2", "0", "1"), SIM: ("4", "1", "2", "1")}
    for name, (tests, failures, errors, skipped) in expected.items():
        suite = suites[name]
        counts = tuple(suite.get(k) for k in ("tests", "failures", "errors", "skipped"))
        assert counts == (tests, failures, errors, skipped)
        assert len(suite.findall("testcase/failure")) == int(failures)
        assert len(suite.findall("testcase/error")) == int(errors)
        assert len(suite.findall("testcase/skipped")) == int(skipped)
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("8", "3", "2")
    props = {p.get("name"): p.get("value") for p in suites[REL].iter("property")}
    assert float(props["mean"]) == pytest.approx(result.scores[REL])
    assert props["threshold"] == ">= 0.7"


def test_junit_case_names_messages_and_clean_text(result: EvalResult, tmp_path: Path) -> None:
    path = write_junit_xml(result, tmp_path / "junit.xml")
    assert "\x00" not in path.read_text(encoding="utf-8")
    root = ET.parse(path).getroot()
    cases = root.findall(f"testsuite[@name='{SIM}']/testcase")
    assert [c.get("name") for c in cases][:2] == ["item 0: capital-france", "item 1: boiling"]
    assert all(c.get("classname") == SIM for c in cases)
    error = cases[1].find("error")
    assert error is not None and error.get("message", "").startswith("Scorer run failed:")
    skipped = cases[2].find("skipped")
    assert skipped is not None and PAYLOAD in skipped.get("message", "")
    rel_cases = root.findall(f"testsuite[@name='{REL}']/testcase")
    out = rel_cases[2].find("system-out")
    assert out is not None and out.text and out.text.startswith("The score is 0.5")
    failure = rel_cases[2].find("failure")
    assert failure is not None and "below the minimum 0.7" in failure.get("message", "")
    stripped = [s.text for s in rel_cases[2].iter("system-out")]
    assert stripped and all("\x00" not in (s or "") for s in stripped)


def test_junit_missing_result_is_an_error(result: EvalResult, tmp_path: Path) -> None:
    item = result.items[3].model_copy(update={"results": {}})
    partial = result.model_copy(update={"items": [item]})
    root = ET.parse(write_junit_xml(partial, tmp_path / "junit.xml")).getroot()
    errors = root.findall("testsuite/testcase/error")
    assert len(errors) == 2
    assert all("TimeoutError" in e.get("message", "") for e in errors)


# --------------------------------------------------------------------------- HTML (static)

FIXED_TIME = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


@pytest.fixture(scope="module")
def report_html(result: EvalResult) -> str:
    return render_html_report(result, title=TITLE, generated_at=FIXED_TIME)


def test_html_escapes_user_text(report_html: str) -> None:
    assert "<script>alert(1)</script>" not in report_html
    assert '<script>document.title="pwned"' not in report_html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in report_html
    assert report_html.count("<script>") == 1  # only the report's own script
    assert "<b>" not in report_html and "</table></table>" not in report_html
    assert "\x00" not in report_html
    assert "🗼🥖" in report_html
    assert f"<title>{TITLE.replace('<', '&lt;').replace('>', '&gt;')}</title>" in report_html


def test_html_is_self_contained(report_html: str, result: EvalResult, tmp_path: Path) -> None:
    lowered = report_html.lower()
    for reference in ('src="http', "src='http", 'href="http', "@import", "url(", "<link"):
        assert reference not in lowered
    assert "http://" not in lowered and "https://" not in lowered
    assert "content-security-policy" in lowered and "default-src 'none'" in lowered
    path = write_html_report(result, tmp_path / "report.html")
    assert path.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_html_shows_details_and_hooks(report_html: str, result: EvalResult) -> None:
    hooks = _TestIdParser.parse(report_html)
    assert hooks["total-items"] == "4"
    for sid, summary in result.summary.scorers.items():
        assert hooks[f"mean-{sid}"] == f"{summary.mean:.4f}"
        assert hooks[f"scored-{sid}"] == str(summary.scored)
        assert hooks[f"failed-{sid}"] == str(summary.failed)
        assert hooks[f"not-scorable-{sid}"] == str(summary.not_scorable)
    assert report_html.count("<details><summary>Details") == len(result.items)
    assert "statements and verdicts" in report_html and "unit matches" in report_html
    assert "It has the Eiffel Tower" in report_html and "semantic" in report_html
    assert "Scorer run failed: step &#39;analyze&#39;" in report_html
    assert "&#34;role&#34;: &#34;user&#34;" in report_html  # chat input as pretty JSON
    assert "You break an answer into statements." in report_html  # prompts
    assert "2026-01-02T03:04:05+00:00" in report_html


def test_csp_hash_is_the_hash_of_the_inline_script(report_html: str) -> None:
    scripts = re.findall(r"<script>(.*?)</script>", report_html, re.DOTALL)
    assert len(scripts) == 1 and "getElementById" in scripts[0]
    digest = base64.b64encode(hashlib.sha256(scripts[0].encode("utf-8")).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in report_html


HOSTILE = """<script>alert(1)</script> "double" 'single' </textarea><textarea>"""
HOSTILE_ID = 'evil"<b>-scorer'


class _MarkupParser(HTMLParser):
    """Every start tag and every attribute value and text of a page, entities decoded."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.texts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.texts.extend(value or "" for _, value in attrs)

    def handle_data(self, data: str) -> None:
        self.texts.append(data)


def _hostile_result() -> EvalResult:
    """One item whose every user-supplied string (and a scorer id) is hostile markup."""
    relevancy = ScoreResult(
        run_id=HOSTILE,
        scorer_id=REL,
        scorer_options={HOSTILE: HOSTILE},
        status="scored",
        score=0.5,
        reason=HOSTILE,
        input=HOSTILE,
        output=HOSTILE,
        preprocess_prompt=_prompt(HOSTILE, HOSTILE),
        preprocess_step_result={"statements": [HOSTILE]},
        analyze_step_result={
            "results": [{"result": HOSTILE, "reason": HOSTILE, "probabilities": {HOSTILE: 1.0}}]
        },
    )
    match = {
        "ground_truth_unit": HOSTILE,
        "output_unit": HOSTILE,
        "match_type": HOSTILE,
        "explanation": HOSTILE,
    }
    similarity = ScoreResult(
        run_id="run-sim",
        scorer_id=SIM,
        status="not_scorable",
        not_scorable_reason=HOSTILE,
        preprocess_step_result={"output_units": [HOSTILE], "ground_truth_units": [HOSTILE]},
        analyze_step_result={
            "matches": [match],
            "extra_in_output": [HOSTILE, {"unit": HOSTILE}],
            "contradictions": [match],
        },
    )
    custom = ScoreResult(
        run_id="run-custom",
        scorer_id=HOSTILE_ID,
        status="failed",
        error=HOSTILE,
        preprocess_step_result={HOSTILE: [HOSTILE]},
        analyze_step_result=HOSTILE,
    )
    item = EvalItem(
        index=0,
        item_id=HOSTILE,
        input=[{"role": "user", "content": HOSTILE}],
        output=HOSTILE,
        ground_truth=HOSTILE,
        target_error=HOSTILE,
        results={REL: relevancy, SIM: similarity, HOSTILE_ID: custom},
    )
    summary = EvalSummary(
        total_items=1,
        scorers={
            HOSTILE_ID: ScorerSummary(
                scorer_id=HOSTILE_ID, threshold=Threshold(minimum=0.5), histogram=[1, 0]
            )
        },
        model_id=HOSTILE,
        model_fingerprint=HOSTILE,
        skipped_rows=[RowProblem(line=1, message=HOSTILE)],
    )
    return EvalResult(scores={HOSTILE_ID: None}, summary=summary, items=[item])


def test_hostile_strings_show_as_text_never_as_markup() -> None:
    page = render_html_report(_hostile_result(), title=HOSTILE, generated_at=FIXED_TIME)
    for markup in ("<script>alert", "</textarea>", "<textarea>", "<b>", '"double"'):
        assert markup not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &#34;double&#34; &#39;single&#39;" in page
    assert "&lt;/textarea&gt;&lt;textarea&gt;" in page
    parser = _MarkupParser()
    parser.feed(page)
    parser.close()
    assert parser.tags.count("script") == 1 and "textarea" not in parser.tags
    assert "b" not in parser.tags
    # Every place shows the string whole: title, header, item cells, runs, step tables, JSON.
    text = "\n".join(parser.texts)
    assert text.count(HOSTILE) >= 20
    assert f"<h4>{HOSTILE}</h4>" not in page
    hooks = _TestIdParser.parse(page)  # the hostile scorer id round-trips through attributes
    assert hooks[f"scored-{HOSTILE_ID}"] == "0"
    assert f"histogram-{HOSTILE_ID}" in text


def test_custom_scorer_step_results_show_as_json(result: EvalResult) -> None:
    custom = ScoreResult(
        run_id="run-custom-0",
        scorer_id="my-custom-scorer",
        status="scored",
        score=1.0,
        preprocess_step_result={"claims": ["Paris is the capital"]},
        analyze_step_result={"verdicts": [{"claim": 0, "supported": True}]},
    )
    assert scorer_info(custom.scorer_id) is None
    item = result.items[0].model_copy(update={"results": {"my-custom-scorer": custom}})
    page = render_html_report(result.model_copy(update={"items": [item]}))
    for step in ("preprocess", "analyze"):
        shown = json.dumps(getattr(custom, f"{step}_step_result"), indent=2)
        assert f"<h4>{step} result</h4><pre>{_quotes_escaped(shown)}</pre>" in page
    assert "statements and verdicts" not in page and "unit matches" not in page


def _quotes_escaped(text: str) -> str:
    return text.replace('"', "&#34;")


def test_builtin_scorer_with_unexpected_step_results_falls_back_to_json(
    result: EvalResult,
) -> None:
    odd = _not_scorable("run-odd", REL, "no answer").model_copy(
        update={"preprocess_step_result": {"sentences": ["one"]}}
    )
    assert relevancy_tables(odd) == []
    item = result.items[0].model_copy(update={"results": {REL: odd}})
    page = render_html_report(result.model_copy(update={"items": [item]}))
    assert "<h4>preprocess result</h4><pre>{\n  &#34;sentences&#34;" in page


# --------------------------------------------------------------------------- step displays


def test_scorers_register_their_displays() -> None:
    relevancy, similarity = scorer_info(REL), scorer_info(SIM)
    assert relevancy is not None and relevancy.display is relevancy_tables
    assert similarity is not None and similarity.display is similarity_tables


def test_probabilities_format() -> None:
    probabilities = {"yes": 0.8249, "unsure": 0.1, "no": 0.0751}
    assert format_probabilities(probabilities) == "yes 0.82 · unsure 0.10 · no 0.08"
    assert format_probabilities(None) is None
    assert format_probabilities({"yes": "high"}) == {"yes": "high"}  # shown as JSON


def test_relevancy_table_rows_kinds_and_probabilities(result: EvalResult) -> None:
    run = result.items[0].results[REL]
    [table] = relevancy_tables(run)
    assert table.columns == ("#", "statement", "verdict", "reason")
    assert table.rows[1] == StepRow((2, "It has the Eiffel Tower", "no", "Not asked."), "bad")
    analysis = {
        "results": [
            {"result": "yes", "reason": "r", "probabilities": {"yes": 0.82, "unsure": 0.1}},
            {"result": "unsure", "reason": "r"},
        ]
    }
    [table] = relevancy_tables(run.model_copy(update={"analyze_step_result": analysis}))
    assert table.columns[-1] == "probabilities"
    assert [row.cells[-1] for row in table.rows] == ["yes 0.82 · unsure 0.10", None, None]
    assert [row.kind for row in table.rows] == ["ok", "warn", None]  # no verdict: no kind
    page = render_html_report(
        _with_run(result, run.model_copy(update={"analyze_step_result": analysis}))
    )
    assert "<td>yes 0.82 · unsure 0.10</td>" in page


def test_read_verdicts_show_no_empty_reason_or_explanation_column(result: EvalResult) -> None:
    read = {"yes": 0.9, "unsure": 0.06, "no": 0.04}
    run = (
        result.items[0]
        .results[REL]
        .model_copy(
            update={
                "preprocess_step_result": {"statements": ["Paris."]},
                "analyze_step_result": {"results": [{"result": "yes", "probabilities": read}]},
            }
        )
    )
    [table] = relevancy_tables(run)
    assert table.columns == ("#", "statement", "verdict", "probabilities")
    assert table.rows[0].cells == (1, "Paris.", "yes", "yes 0.90 · unsure 0.06 · no 0.04")
    match = {
        "ground_truth_unit": "Paris",
        "output_unit": "Paris.",
        "match_type": "exact",
        "explanation": "",
        "probabilities": {"exact": 0.7, "semantic": 0.2, "partial": 0.1, "missing": 0.0},
    }
    sim = result.items[0].results[SIM]
    analysis = {"matches": [match], "extra_in_output": [], "contradictions": []}
    tables = {
        t.heading: t
        for t in similarity_tables(sim.model_copy(update={"analyze_step_result": analysis}))
    }
    assert tables["unit matches"].columns == (
        "ground-truth unit",
        "answer unit",
        "match type",
        "probabilities",
    )


def test_similarity_tables(result: EvalResult) -> None:
    run = result.items[0].results[SIM]
    tables = {table.heading: table for table in similarity_tables(run)}
    assert list(tables) == [
        "ground-truth units",
        "answer units",
        "unit matches",
        "extra units in the answer",
        "contradictions",
    ]
    assert tables["unit matches"].rows[0].kind == "ok"
    assert tables["contradictions"].rows == ()
    assert tables["extra units in the answer"].rows == (StepRow(("It has the Eiffel Tower",)),)
    analysis = dict(run.analyze_step_result)
    analysis["matches"] = [
        {**analysis["matches"][0], "probabilities": {"exact": 0.2, "semantic": 0.8}},
        {"ground_truth_unit": "g", "output_unit": None, "match_type": "missing"},
    ]
    analysis["contradictions"] = [{"output_unit": "o", "ground_truth_unit": "g"}]
    tables = {
        t.heading: t
        for t in similarity_tables(run.model_copy(update={"analyze_step_result": analysis}))
    }
    matches = tables["unit matches"]
    assert matches.columns[-1] == "probabilities" and matches.kind_column == 2
    assert [row.cells[-1] for row in matches.rows] == ["exact 0.20 · semantic 0.80", None]
    assert [row.kind for row in matches.rows] == ["ok", "bad"]
    assert tables["contradictions"].rows == (StepRow(("o", "g", None), "bad"),)


def test_failed_similarity_run_still_shows_its_units(result: EvalResult) -> None:
    headings = [table.heading for table in similarity_tables(result.items[1].results[SIM])]
    assert headings == ["ground-truth units", "answer units"]


def test_a_registered_display_renders_generically(
    result: EvalResult, monkeypatch: pytest.MonkeyPatch
) -> None:
    from offline_scorer.scorers import _registry

    table = StepTable(
        "things",
        ("name", "value"),
        (StepRow(("a", {"k": [1]}), "warn"), StepRow(("b", None))),
        kind_column=0,
    )
    info = _registry.ScorerInfo(
        id="tabled-scorer",
        short_id="tabled",
        factory=dict,
        options=dict,
        display=lambda run: [table],
    )
    monkeypatch.setitem(_registry._SCORERS, "tabled", info)
    run = ScoreResult(run_id="run-t", scorer_id="tabled-scorer", status="scored", score=1.0)
    page = render_html_report(_with_run(result, run))
    assert "<h4>things</h4>" in page
    assert '<tr class="kind-warn"><td><span class="badge warn">a</span></td>' in page
    assert '<div class="text json">{\n  &#34;k&#34;: [\n    1\n  ]\n}</div>' in page
    assert '<td><span class="muted">—</span></td>' in page


def _with_run(result: EvalResult, run: ScoreResult) -> EvalResult:
    item = result.items[0].model_copy(update={"results": {run.scorer_id: run}})
    return result.model_copy(update={"items": [item]})


# --------------------------------------------------------------------------- HTML in Chromium


class _TestIdParser(HTMLParser):
    """Collects the text of ``data-testid`` elements, histogram bar counts and the title."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.values: dict[str, str] = {}
        self.bars: dict[str, list[int]] = {}
        self._open: list[tuple[str, int]] = []  # (key, depth) of elements being read
        self._depth = 0
        self._histogram: str | None = None

    @classmethod
    def parse(cls, document: str) -> dict[str, str]:
        parser = cls()
        parser.feed(document)
        parser.close()
        return parser.values

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        self._depth += 1
        testid = attributes.get("data-testid")
        if testid and testid.startswith("histogram-"):
            self._histogram = testid.removeprefix("histogram-")
            self.bars[self._histogram] = []
        elif testid or attributes.get("id") == "shown" or (tag == "title" and not self._histogram):
            key = testid or attributes.get("id") or tag
            self.values[key] = ""
            self._open.append((key, self._depth))
        if self._histogram and attributes.get("data-count") is not None:
            self.bars[self._histogram].append(int(attributes["data-count"] or 0))

    def handle_endtag(self, tag: str) -> None:
        if self._open and self._open[-1][1] == self._depth:
            self._open.pop()
        if tag == "svg":
            self._histogram = None
        self._depth -= 1

    def handle_data(self, data: str) -> None:
        for key, _ in self._open:
            self.values[key] += data


def _chromium(*arguments: str, profile: Path) -> subprocess.CompletedProcess[str]:
    command = [
        str(CHROMIUM),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-quic",
        f"--user-data-dir={profile}",
        *arguments,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=True)


@pytest.fixture(scope="module")
def browser_report(result: EvalResult, tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not CHROMIUM.exists():
        pytest.skip(
            "headless Chromium not installed: run `apt-get install chromium` "
            "(.ci/run does) to check the HTML report in a real browser"
        )
    folder = tmp_path_factory.mktemp("browser")
    return write_html_report(result, folder / "report.html", title=TITLE)


def test_browser_shows_the_summary_numbers(
    browser_report: Path, result: EvalResult, tmp_path: Path
) -> None:
    dom = _chromium("--dump-dom", browser_report.as_uri(), profile=tmp_path / "profile").stdout
    parser = _TestIdParser()
    parser.feed(dom)
    hooks = parser.values
    assert hooks["title"] == TITLE  # the injected document.title script never ran
    assert dom.count("<script") == 1  # the payload stayed text, not an element
    assert hooks["total-items"] == str(result.summary.total_items)
    for sid, summary in result.summary.scorers.items():
        assert summary.mean is not None
        assert float(hooks[f"mean-{sid}"]) == pytest.approx(summary.mean, abs=5e-5)
        assert int(hooks[f"scored-{sid}"]) == summary.scored
        assert int(hooks[f"failed-{sid}"]) == summary.failed
        assert int(hooks[f"not-scorable-{sid}"]) == summary.not_scorable
        assert parser.bars[sid] == summary.histogram
    assert hooks["shown"] == "4 of 4 items"  # the report's own script ran under its CSP


def test_browser_renders_a_screenshot(browser_report: Path, tmp_path: Path) -> None:
    png = tmp_path / "report.png"
    _chromium(
        f"--screenshot={png}",
        "--window-size=1280,1600",
        "--hide-scrollbars",
        browser_report.as_uri(),
        profile=tmp_path / "profile",
    )
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert png.stat().st_size > 10_000


def test_no_url_in_report_strings() -> None:
    """The report code and templates carry no URL that a page could load."""
    folder = Path(__file__).parents[1].joinpath("offline_scorer", "reports")
    sources = [
        p for p in folder.rglob("*") if p.suffix in (".py", ".jinja", ".html", ".css", ".js")
    ]
    assert sources
    for source in sources:
        text = source.read_text(encoding="utf-8")
        assert not re.search(r"https?://", text), source
        # Jinja2 autoescaping does all escaping: no hand-written escaping, nothing marked safe.
        assert "html.escape" not in text and "|safe" not in text, source
