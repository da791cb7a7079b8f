"""The HTML report: one self-contained page, rendered from the Jinja2 templates in ``templates/``.

The page holds inline CSS, a small inline script (allowed by a content-security-policy hash
of its exact text, so no other script can run) and inline SVG; it loads nothing from
anywhere and opens offline. Autoescaping is on for every template, so each value the page
prints is escaped by Jinja2; the characters HTML cannot hold are replaced before that.

How a run's step results show is up to its scorer: the report asks the registry
(``ScorerInfo.display``) for tables and renders them all with one macro; a scorer without
a display shows its step results as JSON.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from offline_scorer._files import write_text_atomically
from offline_scorer.evals._types import EvalResult, ScorerSummary
from offline_scorer.pipeline._results import ScoreResult
from offline_scorer.reports._common import INVALID_XML_CHARS, StrPath, scorer_ids
from offline_scorer.scorers._display import StepTable
from offline_scorer.scorers._registry import scorer_info

PAGE_TEMPLATE = "report.html.jinja"
SCRIPT_TEMPLATE = "report.js"

PROMPT_FIELDS = (
    ("preprocess", "preprocess_prompt"),
    ("analyze", "analyze_prompt"),
    ("generate_reason", "generate_reason_prompt"),
)
STATUS_KINDS = {"scored": "ok", "not_scorable": "warn", "failed": "bad"}

HISTOGRAM_WIDTH = 320
HISTOGRAM_HEIGHT = 110


# --------------------------------------------------------------------------- values


def _printable(value: Any) -> Any:
    """Every printed string with the characters HTML cannot hold replaced by U+FFFD.

    Jinja2 calls this on each ``{{ … }}`` value before escaping it; markup from macros is
    already built from printed values and passes unchanged.
    """
    if isinstance(value, str) and not isinstance(value, Markup):
        return INVALID_XML_CHARS.sub("\ufffd", value)
    return value


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


# --------------------------------------------------------------------------- page parts


@dataclass(frozen=True)
class HistogramBar:
    """One bar of a score histogram, in SVG user units."""

    count: int
    x: float
    y: float
    width: float
    height: float
    label_x: float
    label_y: float
    low: float
    high: float


@dataclass(frozen=True)
class Histogram:
    """A scorer's score histogram laid out for the page's SVG."""

    bars: list[HistogramBar]
    width: int
    height: int
    baseline: int
    tick_y: int


def histogram_of(summary: ScorerSummary) -> Histogram:
    """Lay out the bars of a scorer's histogram, scaled to the tallest, a gap between bars.

    Args:
        summary: the scorer's summary (``histogram`` counts over ``scale``).

    Returns:
        The bars (none when the summary has no histogram) and the axis positions.
    """
    counts = summary.histogram
    plot = HISTOGRAM_HEIGHT - 30
    baseline = plot + 14
    tallest = max([*counts, 1])
    slot = HISTOGRAM_WIDTH / max(len(counts), 1)
    bin_size = summary.scale / max(len(counts), 1)
    bars = []
    for index, count in enumerate(counts):
        height = plot * count / tallest
        x, y = index * slot, baseline - height
        # One decimal is finer than a pixel of the drawn chart and keeps the page small.
        bars.append(
            HistogramBar(
                count=count,
                x=round(x + 2, 1),
                y=round(y, 1),
                width=round(slot - 4, 1),
                height=round(height, 1),
                label_x=round(x + slot / 2, 1),
                label_y=round(y - 3, 1),
                low=index * bin_size,
                high=(index + 1) * bin_size,
            )
        )
    return Histogram(bars, HISTOGRAM_WIDTH, HISTOGRAM_HEIGHT, baseline, HISTOGRAM_HEIGHT - 2)


def step_tables(run: ScoreResult) -> list[StepTable] | None:
    """The tables the run's scorer shows for its step results, or None to show them as JSON.

    Args:
        run: one scorer run.

    Returns:
        The scorer's tables; None when it registered no display or the display found
        nothing to show (a run that failed before its first step result).
    """
    info = scorer_info(run.scorer_id)
    if info is None or info.display is None:
        return None
    return info.display(run) or None


def prompts_of(run: ScoreResult) -> list[tuple[str, list[dict[str, str]]]]:
    """The run's rendered prompts as (step, chat messages), in step order, skipping absent ones.

    Args:
        run: one scorer run.

    Returns:
        The prompts the run recorded.
    """
    return [(step, messages) for step, field in PROMPT_FIELDS if (messages := getattr(run, field))]


# --------------------------------------------------------------------------- rendering


@functools.cache
def _environment() -> Environment:
    environment = Environment(
        loader=PackageLoader("offline_scorer.reports", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        finalize=_printable,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters.update(number=_number, display_text=_display_text, pretty_json=_pretty_json)
    # Globals, not render arguments: the macros in imported templates see only globals.
    environment.globals.update(
        histogram_of=histogram_of,
        step_tables=step_tables,
        prompts_of=prompts_of,
        status_kinds=STATUS_KINDS,
    )
    return environment


@functools.cache
def script_hash() -> str:
    """The base64 sha256 of the report's script exactly as the page includes it.

    Returns:
        The hash the page's content-security-policy allows (``script-src 'sha256-…'``).
    """
    script = _environment().get_template(SCRIPT_TEMPLATE).render()
    return base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")


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

    Example:
        >>> page = render_html_report(result, title="nightly")  # doctest: +SKIP
    """
    moment = generated_at or datetime.now(timezone.utc)
    page = _environment().get_template(PAGE_TEMPLATE)
    return (
        page.render(
            result=result,
            ids=scorer_ids(result),
            title=title,
            generated_at=moment.isoformat(timespec="seconds"),
            script_hash=script_hash(),
        )
        + "\n"
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
