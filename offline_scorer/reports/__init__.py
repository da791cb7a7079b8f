"""Reports of an evaluation: results JSONL, summary JSON, JUnit XML and the HTML report.

Every writer builds the whole document in memory and then writes it atomically (a temporary
file in the target folder renamed over the target), so a reader never sees half a report.
"""

from offline_scorer.reports._html import render_html_report, write_html_report
from offline_scorer.reports._jsonl import (
    append_result_lines,
    iter_results,
    result_line,
    write_results_jsonl,
)
from offline_scorer.reports._junit import threshold_problem, write_junit_xml
from offline_scorer.reports._summary import summary_document, write_summary_json

__all__ = [
    "append_result_lines",
    "iter_results",
    "render_html_report",
    "result_line",
    "summary_document",
    "threshold_problem",
    "write_html_report",
    "write_junit_xml",
    "write_results_jsonl",
    "write_summary_json",
]
