"""The body of ``offline-scorer score``: one :class:`ScoreCommand` in, an exit status out.

The typer function in ``_app.py`` only turns flags into a :class:`ScoreCommand` (the
judge's :class:`JudgeConfig`, the run's :class:`RunConfig`, the scorers and the outputs);
everything else happens here, the same way for the local and the Ray backend.
"""

from __future__ import annotations

import io
import os
import signal
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from offline_scorer._exceptions import ConfigurationError, OfflineScorerError
from offline_scorer._files import make_readable
from offline_scorer.evals._agent import LocalAgent
from offline_scorer.evals._config import RunConfig
from offline_scorer.evals._core import check_rows, dataset_facts
from offline_scorer.evals._data import Dataset, load_dataset
from offline_scorer.evals._run import run_evals
from offline_scorer.evals._types import EvalItem, EvalResult
from offline_scorer.judges._cache import CachedJudge, default_cache_path
from offline_scorer.judges._cards import resolve_model
from offline_scorer.judges._factory import shared_judge
from offline_scorer.judges._protocol import Judge
from offline_scorer.judges._settings import JudgeConfig
from offline_scorer.pipeline._scorer import Scorer
from offline_scorer.reports import (
    append_result_lines,
    write_html_report,
    write_junit_xml,
    write_summary_json,
)
from offline_scorer.scorers._registry import get_scorer


@dataclass(frozen=True)
class Outputs:
    """Where ``score`` writes: results JSONL, summary JSON, HTML report, JUnit XML."""

    results: Path | None = None
    summary: Path | None = None
    report: Path | None = None
    junit: Path | None = None


@dataclass(frozen=True)
class ScoreCommand:
    """Everything ``offline-scorer score`` was asked, each concern in one object."""

    data: Path
    scorer_ids: list[str]
    judge: JudgeConfig
    run: RunConfig
    scorer_options: dict[str, Any] = field(default_factory=dict)
    cache: Path | None = None
    """The result cache file (None: no cache)."""
    agent: bool = False
    outputs: Outputs = field(default_factory=Outputs)
    quiet: bool = False


@dataclass(frozen=True)
class ScorePlan:
    """What the run needs, built and checked before any model loads."""

    data: Dataset | Path
    scorers: list[Scorer]
    target: LocalAgent | None


class CommandFailed(Exception):
    """A user error: the CLI prints its message on one line and exits with status 2."""


def cache_file(enabled: bool, path: Path | None) -> Path | None:
    """The result cache file the command uses, as an absolute path (None: no cache)."""
    return (path or default_cache_path()).absolute() if enabled else None


def run_score(command: ScoreCommand, echo: Any) -> int:
    """Run the command; returns the exit status (0 passed, 1 a threshold failed, 130
    interrupted).

    Raises:
        CommandFailed: bad input, a model that does not resolve, or a failed run.
    """
    lines = _StreamedLines(command.outputs.results)
    try:
        plan = plan_score(command)
        signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
        result = run_evals(
            plan.data,
            plan.scorers,
            target=plan.target,
            on_item_complete=lines.write,
            config=command.run.model_copy(
                # The HTML and JUnit reports need every item; results JSONL is streamed.
                update={"keep_items": bool(command.outputs.report or command.outputs.junit)}
            ),
        )
    except (OfflineScorerError, ValueError, TypeError) as error:
        lines.discard()
        raise CommandFailed(str(error)) from error
    except BaseException:
        lines.discard()
        raise
    lines.finish()
    write_reports(result, command.outputs)
    if not command.quiet:
        print_summary(result, echo)
    if result.summary.interrupted:
        echo("Interrupted: finished items were written; rerun to resume.", err=True)
        return 130
    return 0 if result.passed else 1


def plan_score(command: ScoreCommand) -> ScorePlan:
    """Check everything that can be checked before the model loads; build the scorers.

    The scorers' judge is the backend table's judge for ``command.judge`` (behind the
    result cache when one is asked for): the Ray actors rebuild exactly that judge.
    """
    on_ray = command.run.backend == "ray"
    if on_ray and (command.agent or command.run.fail_fast):
        raise ConfigurationError("--agent and --fail-fast need --backend local.")
    if on_ray:
        # Ray reads the file itself, on its workers; the workers resolve the model.
        data: Dataset | Path = command.data
    else:
        # Rows are checked now but read again while scoring: memory stays flat.
        fields, skip = command.run.fields, command.run.skip_invalid
        data = load_dataset(command.data, fields=fields, skip_invalid=skip, lazy=True)
        resolve_model(command.judge.model)  # unknown or missing: fail before loading
    base = shared_judge(command.judge)
    judge: Judge = CachedJudge(base, command.cache) if command.cache else base
    scorers = [
        get_scorer(name, judge=judge, **command.scorer_options) for name in command.scorer_ids
    ]
    target = None
    if isinstance(data, Dataset):
        check_rows(
            scorers,
            dataset_facts(data),
            command.run.fields,
            answers_missing_outputs=command.agent,
            remedy="pass --agent to let a local agent answer them",
        )
        # The agent answers with the scorers' model and load options: one model load.
        target = LocalAgent(judge=base) if data.lines_without_output else None
    return ScorePlan(data, scorers, target)


def _raise_keyboard_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


class _StreamedLines:
    """Results JSONL written as items finish, into a temporary file renamed at the end.

    Readers never see a half-written file; after Ctrl-C the finished items are kept. The
    rows are the same whatever the backend (on Ray, items arrive in the order they finish,
    and ``item_index`` counts that order).
    """

    def __init__(self, path: Path | None):
        self.path = path
        self._handle: Any = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._handle = tempfile.NamedTemporaryFile(  # noqa: SIM115 - closed in finish()
                "w", encoding="utf-8", dir=path.parent, prefix=f".{path.name}.", delete=False
            )

    def write(self, item: EvalItem, output: Any, results: Any) -> None:
        if self._handle is not None:
            # One write per item: an interrupt never leaves an item half-written.
            buffer = io.StringIO()
            append_result_lines([item], buffer)
            self._handle.write(buffer.getvalue())

    def finish(self) -> None:
        if self._handle is not None and self.path is not None:
            self._handle.close()
            make_readable(self._handle.name)
            os.replace(self._handle.name, self.path)

    def discard(self) -> None:
        if self._handle is not None:
            self._handle.close()
            Path(self._handle.name).unlink(missing_ok=True)


def write_reports(result: EvalResult, outputs: Outputs) -> None:
    """The summary JSON, HTML report and JUnit XML that were asked for."""
    if outputs.summary:
        write_summary_json(result, outputs.summary)
    if outputs.report:
        write_html_report(result, outputs.report)
    if outputs.junit:
        write_junit_xml(result, outputs.junit)


def print_summary(result: EvalResult, echo: Any) -> None:
    """Means, counts and threshold verdicts, one line per scorer."""
    echo("")
    for scorer_id, item in result.summary.scorers.items():
        mean = "-" if item.mean is None else f"{item.mean:.4f}"
        verdict = ""
        if item.passed is not None and item.threshold is not None:
            verdict = (
                f"  threshold {item.threshold.describe()}: {'PASS' if item.passed else 'FAIL'}"
            )
        echo(
            f"{scorer_id}: mean {mean} over {item.scored} scored "
            f"({item.not_scorable} not scorable, {item.failed} failed){verdict}"
        )
    for problem in result.summary.skipped_rows:
        echo(f"skipped line {problem.line}: {problem.message}")
    if result.summary.verdict:
        echo(f"verdict: {result.summary.verdict}")
