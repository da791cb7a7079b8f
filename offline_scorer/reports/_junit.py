"""The evaluation as JUnit XML, for CI systems: one test suite per scorer, one case per item.

A case fails when its score breaks the scorer's threshold, errors when the run failed (or
the item has no result) and is skipped when the run was not scorable.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from offline_scorer._files import write_text_atomically
from offline_scorer.evals._types import EvalItem, EvalResult, ScorerSummary, Threshold
from offline_scorer.pipeline._results import ScoreResult
from offline_scorer.reports._common import INVALID_XML_CHARS, StrPath, scorer_ids


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
    return INVALID_XML_CHARS.sub("", str(value))


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
