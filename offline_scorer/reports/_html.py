"""Report writers for an evaluation result: JSON lines, summary JSON, HTML and JUnit XML.

Every writer builds the whole document in memory and then writes it atomically (a temporary
file in the target folder renamed over the target), so a reader never sees half a report.

The HTML report is one self-contained file: inline CSS, a small inline script (allowed by a
content-security-policy hash, so no other script can run) and inline SVG; it loads nothing
from anywhere and opens offline. Every user-supplied string is escaped with ``html.escape``.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TextIO

from offline_scorer._files import write_text_atomically
from offline_scorer.evals._types import EvalItem, EvalResult, ScorerSummary, Threshold
from offline_scorer.pipeline._results import ScoreResult

StrPath = str | os.PathLike[str]

# Characters XML 1.0 does not allow (C0 controls other than tab/newline/return, lone
# surrogates, U+FFFE and U+FFFF). They are dropped from XML and replaced in HTML.
_INVALID_XML_CHARS = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")

PROMPT_FIELDS = (
    ("preprocess", "preprocess_prompt"),
    ("analyze", "analyze_prompt"),
    ("generate_reason", "generate_reason_prompt"),
)

HISTOGRAM_WIDTH = 320
HISTOGRAM_HEIGHT = 110


# --------------------------------------------------------------------------- atomic writes


# --------------------------------------------------------------------------- JSON writers


def result_line(item: EvalItem, result: ScoreResult) -> dict[str, Any]:
    """One JSON-lines record: the item's position and id, the target error and the result.

    Args:
        item: the dataset item the result belongs to.
        result: one scorer's result for that item.

    Returns:
        A JSON-ready dict.
    """
    return {
        "item_index": item.index,
        "item_id": item.item_id,
        "target_error": item.target_error,
        **result.model_dump(mode="json"),
    }


def append_result_lines(items: Iterable[EvalItem], handle: TextIO) -> int:
    """Write one JSON line per item × scorer result to an open text stream.

    Args:
        items: evaluated items, e.g. as they finish.
        handle: a text stream opened for writing.

    Returns:
        The number of lines written.
    """
    count = 0
    for item in items:
        for result in item.results.values():
            handle.write(_json_line(result_line(item, result)))
            count += 1
    return count


def _json_line(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")) + "\n"


def iter_results(result: EvalResult) -> Iterator[tuple[EvalItem, ScoreResult]]:
    """Every (item, scorer result) pair, items in order.

    Args:
        result: the evaluation result.

    Yields:
        Pairs of an item and one of its results.
    """
    for item in result.items:
        for run in item.results.values():
            yield item, run


def write_results_jsonl(result: EvalResult, path: StrPath) -> Path:
    """Write every scorer result of every item as JSON lines.

    Each line holds every field of the :class:`ScoreResult` plus ``item_index``,
    ``item_id`` and ``target_error``. Items are written in order, and within an item the
    scorers in the order of ``item.results``. An item without results writes no line.

    Args:
        result: the evaluation result.
        path: the ``.jsonl`` file to write.

    Returns:
        The written path.
    """
    lines = (_json_line(result_line(item, run)) for item, run in iter_results(result))
    return write_text_atomically(path, "".join(lines))


def summary_document(result: EvalResult) -> dict[str, Any]:
    """The summary as a JSON-ready dict: every summary field plus ``scores`` (the means).

    Args:
        result: the evaluation result.

    Returns:
        A JSON-ready dict.
    """
    return {**result.summary.model_dump(mode="json"), "scores": dict(result.scores)}


def write_summary_json(result: EvalResult, path: StrPath) -> Path:
    """Write the evaluation summary as pretty-printed JSON.

    Args:
        result: the evaluation result.
        path: the ``.json`` file to write.

    Returns:
        The written path.
    """
    text = json.dumps(summary_document(result), indent=2, ensure_ascii=False) + "\n"
    return write_text_atomically(path, text)


# --------------------------------------------------------------------------- JUnit XML


def write_junit_xml(result: EvalResult, path: StrPath) -> Path:
    """Write the evaluation as JUnit XML: one test suite per scorer, one test case per item.

    A case fails when its score lies outside the scorer's threshold, errors when the run
    failed (or no result exists for the item), and is skipped when the run was not
    scorable. Characters XML 1.0 forbids are removed from all text.

    Args:
        result: the evaluation result.
        path: the ``.xml`` file to write.

    Returns:
        The written path.
    """
    root = ET.Element("testsuites", name="offline-scorer")
    totals = dict.fromkeys(("tests", "failures", "errors", "skipped"), 0)
    seconds = 0.0
    for scorer_id in scorer_ids(result):
        suite = _junit_suite(result, scorer_id)
        root.append(suite)
        for key in totals:
            totals[key] += int(suite.get(key, "0"))
        seconds += float(suite.get("time", "0"))
    _set_counts(root, totals, seconds)
    ET.indent(root)
    text = '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode")
    return write_text_atomically(path, text + "\n")


def _xml_text(value: Any) -> str:
    """``value`` as text with the characters XML 1.0 forbids removed."""
    return _INVALID_XML_CHARS.sub("", str(value))


def _set_counts(element: ET.Element, counts: Mapping[str, int], seconds: float) -> None:
    for key, value in counts.items():
        element.set(key, str(value))
    element.set("time", f"{seconds:.3f}")


def _junit_suite(result: EvalResult, scorer_id: str) -> ET.Element:
    """The ``<testsuite>`` of one scorer with its properties and one case per item."""
    summary = result.summary.scorers.get(scorer_id)
    threshold = summary.threshold if summary else None
    suite = ET.Element("testsuite", name=_xml_text(scorer_id))
    _add_properties(suite, summary)
    counts = dict.fromkeys(("tests", "failures", "errors", "skipped"), 0)
    seconds = 0.0
    for item in result.items:
        case = _junit_case(item, scorer_id, threshold)
        suite.append(case)
        counts["tests"] += 1
        for tag, key in (("failure", "failures"), ("error", "errors"), ("skipped", "skipped")):
            counts[key] += case.find(tag) is not None
        seconds += float(case.get("time", "0"))
    _set_counts(suite, counts, seconds)
    return suite


def _add_properties(suite: ET.Element, summary: ScorerSummary | None) -> None:
    if summary is None:
        return
    properties = ET.SubElement(suite, "properties")
    values = {
        "mean": "" if summary.mean is None else repr(summary.mean),
        "threshold": summary.threshold.describe() if summary.threshold else "",
        "passed": "" if summary.passed is None else str(summary.passed).lower(),
        "scale": f"{summary.scale:g}",
    }
    for name, value in values.items():
        ET.SubElement(properties, "property", name=name, value=_xml_text(value))


def _junit_case(item: EvalItem, scorer_id: str, threshold: Threshold | None) -> ET.Element:
    """One ``<testcase>``: the outcome of one scorer on one item."""
    run = item.results.get(scorer_id)
    case = ET.Element(
        "testcase",
        classname=_xml_text(scorer_id),
        name=_xml_text(f"item {item.index}: {item.item_id}"),
        time=f"{_run_seconds(run):.3f}",
    )
    if run is None:
        message = f"target failed: {item.target_error}" if item.target_error else "no result"
        ET.SubElement(case, "error", message=_xml_text(message), type="missing_result")
    elif run.status == "failed":
        error = run.error or "Scorer run failed"
        node = ET.SubElement(case, "error", message=_xml_text(error), type=run.failed_step or "")
        node.text = _xml_text(error)
    elif run.status == "not_scorable":
        ET.SubElement(case, "skipped", message=_xml_text(run.not_scorable_reason or ""))
    else:
        problem = threshold_problem(run.score, threshold)
        if problem:
            ET.SubElement(case, "failure", message=problem, type="threshold")
    if run is not None and run.reason:
        ET.SubElement(case, "system-out").text = _xml_text(run.reason)
    return case


def _run_seconds(run: ScoreResult | None) -> float:
    return sum(step.seconds for step in run.steps.values()) if run else 0.0


def threshold_problem(score: float | None, threshold: Threshold | None) -> str | None:
    """Why one item's score breaks the scorer's threshold, or None when it does not.

    Args:
        score: the item's score (None: nothing to compare, no problem).
        threshold: the scorer's threshold, if any.

    Returns:
        A message such as ``score 0.4 is below the minimum 0.7``, or None.
    """
    if score is None or threshold is None:
        return None
    if threshold.minimum is not None and score < threshold.minimum:
        return f"score {score:g} is below the minimum {threshold.minimum:g}"
    if threshold.maximum is not None and score > threshold.maximum:
        return f"score {score:g} is above the maximum {threshold.maximum:g}"
    return None


def scorer_ids(result: EvalResult) -> list[str]:
    """Scorer ids in report order: the summary's, then any others found on items.

    Args:
        result: the evaluation result.

    Returns:
        The ids, each once.
    """
    ids = dict.fromkeys(result.summary.scorers)
    for item in result.items:
        ids.update(dict.fromkeys(item.results))
    return list(ids)


# --------------------------------------------------------------------------- HTML helpers


def _esc(value: Any) -> str:
    """``value`` as HTML-escaped text (quotes too), with XML-invalid characters replaced."""
    return html.escape(_INVALID_XML_CHARS.sub("\ufffd", str(value)), quote=True)


def _pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def _display_text(value: Any) -> str:
    """A string as is; anything else (chat messages, dicts, numbers) as pretty JSON."""
    return value if isinstance(value, str) else _pretty_json(value)


def _number(value: float | None, digits: int = 4) -> str:
    """A number with at most ``digits`` decimals and no trailing zeros; ``—`` for None."""
    if value is None:
        return "—"
    text = f"{value:.{digits}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _badge(text: str, kind: str) -> str:
    return f'<span class="badge {_esc(kind)}">{_esc(text)}</span>'


def _text_block(value: Any) -> str:
    """A text cell: strings as prose, other values as monospace pretty JSON."""
    if value is None:
        return '<span class="muted">—</span>'
    css = "text" if isinstance(value, str) else "text json"
    return f'<div class="{css}">{_esc(_display_text(value))}</div>'


# --------------------------------------------------------------------------- HTML header


def _header(result: EvalResult, title: str, generated_at: datetime) -> str:
    summary = result.summary
    verdict = ""
    if summary.verdict:
        verdict = _badge(summary.verdict, "ok" if summary.verdict == "passed" else "bad")
    facts = [
        ("Model", _esc(summary.model_id or "—")),
        ("Fingerprint", f"<code>{_esc(summary.model_fingerprint or '—')}</code>"),
        ("Items", f'<span data-testid="total-items">{summary.total_items}</span>'),
        ("Seconds", _esc(_number(summary.seconds, 2))),
        ("Generated", _esc(generated_at.isoformat(timespec="seconds"))),
    ]
    if summary.interrupted:
        facts.append(("Run", _badge("interrupted", "warn")))
    cells = "".join(f"<div><dt>{label}</dt><dd>{value}</dd></div>" for label, value in facts)
    return (
        f'<header><div class="title"><h1>{_esc(title)}</h1>{verdict}</div>'
        f'<dl class="facts">{cells}</dl>{_skipped_rows(result)}</header>'
    )


def _skipped_rows(result: EvalResult) -> str:
    problems = result.summary.skipped_rows
    if not problems:
        return ""
    rows = "".join(f"<li>line {p.line}: {_esc(p.message)}</li>" for p in problems)
    return (
        f'<details class="skipped"><summary>{len(problems)} dataset row(s) skipped</summary>'
        f"<ul>{rows}</ul></details>"
    )


# --------------------------------------------------------------------------- HTML cards


def _scorer_card(summary: ScorerSummary) -> str:
    sid = _esc(summary.scorer_id)
    mean = "—" if summary.mean is None else f"{summary.mean:.4f}"
    counts = "".join(
        f'<div><dt>{label}</dt><dd data-testid="{key}-{sid}">{value}</dd></div>'
        for label, key, value in (
            ("scored", "scored", summary.scored),
            ("not scorable", "not-scorable", summary.not_scorable),
            ("failed", "failed", summary.failed),
        )
    )
    return (
        f'<section class="card"><h2>{sid}</h2>'
        f'<div class="mean"><span class="label">mean</span>'
        f'<span class="value" data-testid="mean-{sid}">{mean}</span>'
        f'<span class="muted">/ {_esc(_number(summary.scale))}</span></div>'
        f'<dl class="counts">{counts}</dl>{_threshold_line(summary)}'
        f"{_histogram(summary)}</section>"
    )


def _threshold_line(summary: ScorerSummary) -> str:
    if summary.threshold is None:
        return '<p class="threshold muted">no threshold</p>'
    outcome = ""
    if summary.passed is not None:
        outcome = _badge("passed", "ok") if summary.passed else _badge("failed", "bad")
    return f'<p class="threshold">threshold {_esc(summary.threshold.describe())} {outcome}</p>'


def _histogram(summary: ScorerSummary) -> str:
    """Inline SVG bars of the score histogram, with each count above its bar."""
    counts = summary.histogram
    if not counts:
        return '<p class="muted">no scores</p>'
    tallest = max(max(counts), 1)
    width = HISTOGRAM_WIDTH / len(counts)
    plot = HISTOGRAM_HEIGHT - 30
    bars = [
        _histogram_bar(i, count, width, plot, tallest, summary.scale / len(counts))
        for i, count in enumerate(counts)
    ]
    axis = (
        f'<line x1="0" y1="{plot + 14}" x2="{HISTOGRAM_WIDTH}" y2="{plot + 14}" class="axis"/>'
        f'<text x="0" y="{HISTOGRAM_HEIGHT - 2}" class="tick">0</text>'
        f'<text x="{HISTOGRAM_WIDTH / 2:g}" y="{HISTOGRAM_HEIGHT - 2}" class="tick mid">'
        f"{_esc(_number(summary.scale / 2))}</text>"
        f'<text x="{HISTOGRAM_WIDTH}" y="{HISTOGRAM_HEIGHT - 2}" class="tick end">'
        f"{_esc(_number(summary.scale))}</text>"
    )
    return (
        f'<svg class="histogram" viewBox="0 0 {HISTOGRAM_WIDTH} {HISTOGRAM_HEIGHT}" '
        f'role="img" aria-label="score histogram" '
        f'data-testid="histogram-{_esc(summary.scorer_id)}">{"".join(bars)}{axis}</svg>'
    )


def _histogram_bar(
    index: int, count: int, width: float, plot: float, tallest: int, bin_size: float
) -> str:
    height = plot * count / tallest if count else 0.0
    x = index * width
    y = plot + 14 - height
    low, high = index * bin_size, (index + 1) * bin_size
    label = f'<text x="{x + width / 2:.1f}" y="{y - 3:.1f}" class="count">{count}</text>'
    return (
        f'<g data-count="{count}"><rect x="{x + 2:.1f}" y="{y:.1f}" width="{width - 4:.1f}" '
        f'height="{height:.1f}" rx="2"><title>{_number(low)}–{_number(high)}: {count}</title>'
        f"</rect>{label if count else ''}</g>"
    )


# --------------------------------------------------------------------------- HTML items


def _items_table(result: EvalResult, ids: Sequence[str]) -> str:
    head = "".join(f"<th>{_esc(sid)}</th>" for sid in ids)
    columns = 5 + len(ids)
    bodies = "".join(_item_body(item, ids, columns) for item in result.items)
    return (
        '<section class="items"><div class="toolbar"><h2>Items</h2>'
        '<input id="filter" type="search" placeholder="Filter items…" aria-label="filter items">'
        '<span id="shown" class="muted"></span>'
        '<button type="button" id="expand">Expand all</button>'
        '<button type="button" id="collapse">Collapse all</button></div>'
        "<table><thead><tr><th>#</th><th>Item id</th><th>Input</th><th>Output</th>"
        f"<th>Ground truth</th>{head}</tr></thead>{bodies}</table></section>"
    )


def _item_body(item: EvalItem, ids: Sequence[str], columns: int) -> str:
    """A ``<tbody>`` per item: the overview row, then a row with the expandable details."""
    output = _text_block(item.output)
    if item.target_error:
        output += f'<div class="error">target failed: {_esc(item.target_error)}</div>'
    cells = "".join(_result_cell(item.results.get(sid)) for sid in ids)
    details = "".join(_result_details(sid, item.results[sid]) for sid in ids if sid in item.results)
    return (
        f'<tbody class="item"><tr class="overview"><td class="num">{item.index}</td>'
        f"<td><code>{_esc(item.item_id)}</code></td><td>{_text_block(item.input)}</td>"
        f"<td>{output}</td><td>{_text_block(item.ground_truth)}</td>{cells}</tr>"
        f'<tr class="more"><td colspan="{columns}"><details><summary>Details: steps and '
        f"prompts</summary>{details or '<p class=muted>no results</p>'}</details></td></tr>"
        "</tbody>"
    )


def _result_cell(run: ScoreResult | None) -> str:
    if run is None:
        return '<td><span class="muted">no result</span></td>'
    kind = {"scored": "ok", "not_scorable": "warn", "failed": "bad"}[run.status]
    note = run.reason or run.not_scorable_reason or run.error or ""
    return (
        f'<td class="result"><div><span class="score">{_esc(_number(run.score))}</span> '
        f"{_badge(run.status.replace('_', ' '), kind)}</div>"
        f'<div class="reason">{_esc(note)}</div></td>'
    )


def _result_details(scorer_id: str, run: ScoreResult) -> str:
    problem = ""
    if run.error:
        problem = f'<p class="error">{_esc(run.error)}</p>'
    elif run.not_scorable_reason:
        problem = f'<p class="warn">not scorable: {_esc(run.not_scorable_reason)}</p>'
    return (
        f'<div class="run"><h3>{_esc(scorer_id)} <span class="muted">run '
        f"{_esc(run.run_id)}</span></h3>{problem}{_step_section(run)}"
        f"{_stats_table(run)}{_prompts(run)}</div>"
    )


def _step_section(run: ScoreResult) -> str:
    pre, ana = run.preprocess_step_result, run.analyze_step_result
    body = _relevancy_steps(pre, ana) or _similarity_steps(pre, ana)
    if body is None:
        body = "".join(
            f"<h4>{name} result</h4><pre>{_esc(_pretty_json(value))}</pre>"
            for name, value in (("preprocess", pre), ("analyze", ana))
            if value is not None
        )
    options = f"<h4>options</h4><pre>{_esc(_pretty_json(run.scorer_options))}</pre>"
    return body + options


def _relevancy_steps(pre: Any, ana: Any) -> str | None:
    """Statements beside their verdicts and reasons, when the results have that shape."""
    statements = _list_of(_field(pre, "statements"), str)
    if statements is None:
        return None
    verdicts = _list_of(_field(ana, "results"), Mapping) or []
    rows = []
    for position, statement in enumerate(statements):
        verdict = verdicts[position] if position < len(verdicts) else {}
        value = str(verdict.get("result", "—"))
        kind = {"yes": "ok", "unsure": "warn", "no": "bad"}.get(value.strip().lower(), "")
        rows.append(
            f'<tr><td class="num">{position + 1}</td><td>{_esc(statement)}</td>'
            f"<td>{_badge(value, kind)}</td><td>{_esc(verdict.get('reason', ''))}</td></tr>"
        )
    return (
        '<h4>statements and verdicts</h4><table class="inner"><thead><tr><th>#</th>'
        "<th>statement</th><th>verdict</th><th>reason</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def _similarity_steps(pre: Any, ana: Any) -> str | None:
    """Unit matches, extra units and contradictions, when the results have that shape."""
    matches = _list_of(_field(ana, "matches"), Mapping)
    if matches is None:
        return None
    parts = []
    if isinstance(pre, Mapping):
        parts.append(f"<h4>units</h4><pre>{_esc(_pretty_json(pre))}</pre>")
    parts.append(_records_table("unit matches", matches, _MATCH_COLUMNS))
    extra = _list_of(_field(ana, "extra_in_output"), object) or []
    units = "".join(f"<li>{_esc(_display_text(unit))}</li>" for unit in extra)
    listing = f"<ul>{units}</ul>" if units else '<p class="muted">none</p>'
    parts.append(f"<h4>extra units in the answer</h4>{listing}")
    contradictions = _list_of(_field(ana, "contradictions"), Mapping)
    if contradictions:
        parts.append(_records_table("contradictions", contradictions, _CONTRADICTION_COLUMNS))
    else:
        parts.append('<h4>contradictions</h4><p class="muted">none</p>')
    return "".join(parts)


def _field(value: Any, key: str) -> Any:
    """``value[key]`` when ``value`` is a mapping, else None."""
    return value.get(key) if isinstance(value, Mapping) else None


def _list_of(value: Any, kind: type) -> list[Any] | None:
    """``value`` when it is a list whose entries are all ``kind``, else None."""
    if isinstance(value, list) and all(isinstance(entry, kind) for entry in value):
        return value
    return None


_MATCH_COLUMNS = ("ground_truth_unit", "output_unit", "match_type", "explanation")
_CONTRADICTION_COLUMNS = ("output_unit", "ground_truth_unit", "explanation")
_MATCH_KINDS = {"exact": "ok", "semantic": "ok", "partial": "warn", "missing": "bad"}


def _records_table(heading: str, records: Sequence[Mapping[str, Any]], keys: Sequence[str]) -> str:
    head = "".join(f"<th>{key.replace('_', ' ')}</th>" for key in keys)
    rows = "".join(
        "<tr>" + "".join(f"<td>{_record_cell(key, record.get(key))}</td>" for key in keys) + "</tr>"
        for record in records
    )
    return (
        f'<h4>{heading}</h4><table class="inner"><thead><tr>{head}</tr></thead>'
        f"<tbody>{rows}</tbody></table>"
    )


def _record_cell(key: str, value: Any) -> str:
    if value is None:
        return '<span class="muted">—</span>'
    if key == "match_type":
        return _badge(str(value), _MATCH_KINDS.get(str(value), ""))
    return _esc(_display_text(value))


def _stats_table(run: ScoreResult) -> str:
    if not run.steps:
        return ""
    rows = "".join(
        f"<tr><td>{_esc(name)}</td><td>{stats.seconds:.3f}</td><td>{stats.prompt_tokens}</td>"
        f"<td>{stats.generated_tokens}</td><td>{'yes' if stats.model_call else ''}</td>"
        f"<td>{'yes' if stats.cached else ''}</td><td>{'yes' if stats.truncated else ''}</td></tr>"
        for name, stats in run.steps.items()
    )
    return (
        '<h4>steps</h4><table class="inner stats"><thead><tr><th>step</th><th>seconds</th>'
        "<th>prompt tokens</th><th>generated tokens</th><th>model call</th><th>cached</th>"
        f"<th>truncated</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def _prompts(run: ScoreResult) -> str:
    sections = [
        f'<details class="prompt"><summary>{step} prompt</summary>{_messages(messages)}</details>'
        for step, field in PROMPT_FIELDS
        if (messages := getattr(run, field))
    ]
    return f"<h4>prompts</h4>{''.join(sections)}" if sections else ""


def _messages(messages: Iterable[Mapping[str, Any]]) -> str:
    return "".join(
        f'<div class="message"><span class="role">{_esc(m.get("role", "?"))}</span>'
        f"<pre>{_esc(m.get('content', ''))}</pre></div>"
        for m in messages
    )


# --------------------------------------------------------------------------- HTML page

_STYLE = """
:root{--fg:#1d2430;--muted:#6b7585;--line:#e2e6ec;--bg:#f6f7f9;--card:#fff;--accent:#3461c1;
--ok:#1f7a43;--ok-bg:#e3f4ea;--bad:#b3261e;--bad-bg:#fbe7e5;--warn:#8a5a00;--warn-bg:#fdf1d8}
*{box-sizing:border-box}
body{margin:0;padding:24px 32px;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,
sans-serif;color:var(--fg);background:var(--bg)}
h1{font-size:22px;margin:0}h2{font-size:16px;margin:0 0 8px}h3{font-size:14px;margin:12px 0 4px}
h4{font-size:12px;margin:12px 0 4px;text-transform:uppercase;letter-spacing:.04em;
color:var(--muted)}
code,pre{font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
pre{white-space:pre-wrap;word-break:break-word;background:var(--bg);border:1px solid var(--line);
border-radius:6px;padding:8px;margin:4px 0;max-height:320px;overflow:auto}
header{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:16px 20px}
.title{display:flex;gap:12px;align-items:center}
.facts{display:flex;flex-wrap:wrap;gap:8px 32px;margin:12px 0 0}
.facts dt,.counts dt{font-size:11px;color:var(--muted);text-transform:uppercase}
.facts dd,.counts dd{margin:0;font-weight:600}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(340px,1fr));gap:16px;
margin:16px 0}
.card{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:16px}
.mean{display:flex;align-items:baseline;gap:8px}.mean .value{font-size:30px;font-weight:700}
.label{color:var(--muted)}
.counts{display:flex;gap:24px;margin:8px 0}.threshold{margin:4px 0 8px}
.histogram{width:100%;height:auto;display:block}
.histogram rect{fill:var(--accent);opacity:.85}.histogram .axis{stroke:var(--line)}
.histogram text{font-size:10px;fill:var(--muted)}.histogram .count{text-anchor:middle;
fill:var(--fg)}.histogram .end{text-anchor:end}.histogram .mid{text-anchor:middle}
.badge{display:inline-block;padding:1px 8px;border-radius:999px;font-size:12px;
font-weight:600;background:var(--bg);color:var(--muted);white-space:nowrap}
.badge.ok{background:var(--ok-bg);color:var(--ok)}.badge.bad{background:var(--bad-bg);
color:var(--bad)}.badge.warn{background:var(--warn-bg);color:var(--warn)}
.muted{color:var(--muted)}.error{color:var(--bad)}.warn{color:var(--warn)}
.items{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:16px}
.toolbar{display:flex;gap:12px;align-items:center;margin-bottom:8px}.toolbar h2{margin:0}
#filter{flex:0 1 320px;padding:6px 10px;border:1px solid var(--line);border-radius:6px}
button{padding:5px 10px;border:1px solid var(--line);border-radius:6px;background:var(--bg);
cursor:pointer}
table{border-collapse:collapse;width:100%}
th{text-align:left;font-size:12px;color:var(--muted);border-bottom:2px solid var(--line);
padding:6px 8px}
td{vertical-align:top;padding:6px 8px}
tbody.item{border-top:1px solid var(--line)}tr.more td{padding-top:0}
.json{font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
.text{white-space:pre-wrap;word-break:break-word;max-height:160px;overflow:auto;min-width:120px}
.num{color:var(--muted);text-align:right}
.result{min-width:180px}.score{font-weight:700;font-size:15px}
.reason{color:var(--muted);font-size:12px;max-height:120px;overflow:auto}
details>summary{cursor:pointer;color:var(--accent)}
.run{border-left:3px solid var(--line);padding-left:12px;margin:8px 0 16px}
table.inner{margin:4px 0;font-size:13px}table.inner td,table.inner th{border:1px solid
var(--line)}
.message{display:grid;grid-template-columns:90px 1fr;gap:8px}.role{font-weight:600;
padding-top:8px}
.skipped{margin-top:8px}
[hidden]{display:none!important}
"""

# No user text ever goes into the script: it only reads the DOM.
_SCRIPT = """
(function () {
  var box = document.getElementById("filter");
  var shown = document.getElementById("shown");
  var bodies = Array.prototype.slice.call(document.querySelectorAll("tbody.item"));
  function apply() {
    var query = box.value.trim().toLowerCase();
    var count = 0;
    bodies.forEach(function (body) {
      var hit = !query || body.textContent.toLowerCase().indexOf(query) !== -1;
      body.hidden = !hit;
      if (hit) { count += 1; }
    });
    shown.textContent = count + " of " + bodies.length + " items";
  }
  function openAll(open) {
    document.querySelectorAll("tr.more > td > details").forEach(function (d) { d.open = open; });
  }
  box.addEventListener("input", apply);
  document.getElementById("expand").addEventListener("click", function () { openAll(true); });
  document.getElementById("collapse").addEventListener("click", function () { openAll(false); });
  apply();
})();
"""

_SCRIPT_HASH = base64.b64encode(hashlib.sha256(_SCRIPT.encode("utf-8")).digest()).decode("ascii")

# Nothing may load from anywhere; only our own script (by hash) may run.
_POLICY = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
    f"script-src 'sha256-{_SCRIPT_HASH}'; base-uri 'none'; form-action 'none'"
)


def render_html_report(
    result: EvalResult,
    *,
    title: str = "offline-scorer report",
    generated_at: datetime | None = None,
) -> str:
    """The self-contained HTML report of an evaluation, as text.

    Args:
        result: the evaluation result.
        title: the page title and heading.
        generated_at: the time shown as "generated" (default: now, UTC).

    Returns:
        The whole HTML document.
    """
    moment = generated_at or datetime.now(timezone.utc)
    ids = scorer_ids(result)
    cards = "".join(_scorer_card(result.summary.scorers[sid]) for sid in result.summary.scorers)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_POLICY}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="referrer" content="no-referrer">'
        f"<title>{_esc(title)}</title><style>{_STYLE}</style></head><body>"
        f'{_header(result, title, moment)}<div class="cards">{cards}</div>'
        f"{_items_table(result, ids)}<script>{_SCRIPT}</script></body></html>\n"
    )


def write_html_report(
    result: EvalResult,
    path: StrPath,
    *,
    title: str = "offline-scorer report",
    generated_at: datetime | None = None,
) -> Path:
    """Write the evaluation as one self-contained HTML file that opens offline.

    The page shows the run (model, items, time, verdict), one card per scorer (mean,
    counts, threshold and a score histogram) and a filterable table of items whose rows
    expand to the step results and the exact prompts.

    Args:
        result: the evaluation result.
        path: the ``.html`` file to write.
        title: the page title and heading.
        generated_at: the time shown as "generated" (default: now, UTC).

    Returns:
        The written path.
    """
    return write_text_atomically(
        path, render_html_report(result, title=title, generated_at=generated_at)
    )
