"""The ``offline-scorer`` command line: a thin layer over the public Python API."""

from __future__ import annotations

import io
import json
import signal
from pathlib import Path
from typing import Any

import typer

from offline_scorer._exceptions import ConfigurationError
from offline_scorer.evals._agent import LocalAgent
from offline_scorer.evals._core import check_rows, dataset_facts, parse_thresholds
from offline_scorer.evals._data import Fields, load_dataset
from offline_scorer.evals._run import run_evals
from offline_scorer.judges._cards import DEFAULT_MODEL
from offline_scorer.scorers._registry import get_scorer

app = typer.Typer(
    help="LLM-as-judge scorers on a local open-weights model, fully offline.",
    no_args_is_help=True,
    add_completion=False,
)


def _fail(message: str) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


def _raise_keyboard_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


@app.command()
def score(
    data: Path = typer.Argument(..., help="Dataset: .jsonl, .json or .csv."),
    scorer: list[str] = typer.Option(
        ["answer-relevancy"], "--scorer", "-s", help="Scorer id; repeat for several."
    ),
    model: str = typer.Option(
        DEFAULT_MODEL,
        envvar="OFFLINE_SCORER_MODEL",
        help="Judge model: card name, HF model directory or .gguf file.",
    ),
    device: str = typer.Option(
        "auto", envvar="OFFLINE_SCORER_DEVICE", help="auto, cpu, cuda, mps."
    ),
    dtype: str = typer.Option(
        "auto", envvar="OFFLINE_SCORER_DTYPE", help="auto, float32, bfloat16, float16."
    ),
    batch_size: int = typer.Option(8, envvar="OFFLINE_SCORER_BATCH_SIZE", help="Items per batch."),
    language: str = typer.Option("en", envvar="OFFLINE_SCORER_LANGUAGE", help="en or fr."),
    verdicts: str = typer.Option(
        "auto",
        help="read (verdict probabilities: the card's fitted verdict model, else the judge's "
        "label probabilities), generate (the judge writes verdicts), auto (read when the "
        "card has a verdict model).",
    ),
    scoring: str = typer.Option(
        "auto", help="hard, expected (formula over probabilities) or auto (the card's choice)."
    ),
    extraction: str = typer.Option(
        "auto", help="model (the judge lists statements), split (sentence splitter) or auto."
    ),
    threshold: list[str] = typer.Option(
        [], "--threshold", "-t", help="SCORER=MIN or SCORER=MIN..MAX; exit 1 when one fails."
    ),
    out: Path | None = typer.Option(
        None, "--out", help="Results JSONL (one line per item x scorer)."
    ),
    summary_path: Path | None = typer.Option(None, "--summary", help="Summary JSON."),
    report: Path | None = typer.Option(None, "--report", help="Self-contained HTML report."),
    junit: Path | None = typer.Option(None, "--junit", help="JUnit XML for CI systems."),
    cache: bool = typer.Option(True, "--cache/--no-cache", help="Reuse finished judge calls."),
    cache_path: Path | None = typer.Option(
        None,
        envvar="OFFLINE_SCORER_CACHE_FILE",
        help="Cache file (default: user cache folder). With --backend ray every actor opens "
        "it on its own node: keep it on a local disk, not a network filesystem.",
    ),
    agent: bool = typer.Option(
        False, "--agent", help="Answer rows that have no output with a local agent (same model)."
    ),
    input_field: str = typer.Option("input", help="Column holding the question."),
    output_field: str = typer.Option("output", help="Column holding the answer."),
    ground_truth_field: str = typer.Option("ground_truth", help="Column holding the reference."),
    id_field: str = typer.Option("id", help="Column holding the item id."),
    skip_invalid: bool = typer.Option(
        False, "--skip-invalid", help="Score valid rows, list bad ones."
    ),
    fail_fast: bool = typer.Option(False, "--fail-fast", help="Stop at the first failed item."),
    allow_pickle: bool = typer.Option(False, "--allow-pickle", help="Accept pickle weights."),
    trust_remote_code: bool = typer.Option(False, "--trust-remote-code", help="Run model code."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar or table."),
    backend: str = typer.Option(
        "local",
        envvar="OFFLINE_SCORER_BACKEND",
        help="local (this process) or ray (a pool of Ray actors; --out is then a folder).",
    ),
    ray_address: str | None = typer.Option(
        None,
        envvar="OFFLINE_SCORER_RAY_ADDRESS",
        help="Ray cluster to join (e.g. auto, ray://head:10001); default: start Ray here.",
    ),
    actors: int = typer.Option(
        1, envvar="OFFLINE_SCORER_RAY_ACTORS", help="Ray actors, one loaded judge each."
    ),
    cpus_per_actor: float = typer.Option(
        1.0, envvar="OFFLINE_SCORER_RAY_CPUS", help="CPUs (torch threads) per Ray actor."
    ),
    gpus_per_actor: float = typer.Option(
        0.0, envvar="OFFLINE_SCORER_RAY_GPUS", help="GPUs per Ray actor (1 on a GPU cluster)."
    ),
) -> None:
    """Score a dataset; exit 0 when all thresholds pass, 1 when one fails, 2 on bad input."""
    from offline_scorer._exceptions import OfflineScorerError

    scorer_options = {
        "language": language,
        "verdicts": verdicts,
        "scoring": scoring,
        "extraction": extraction,
    }
    if backend == "ray":
        _score_on_ray(
            data,
            scorer,
            model,
            device,
            dtype,
            batch_size,
            scorer_options,
            threshold,
            out,
            (summary_path, report, junit),
            Fields(input_field, output_field, ground_truth_field, id_field),
            skip_invalid,
            quiet,
            {
                "address": ray_address,
                "actors": actors,
                "num_cpus": cpus_per_actor,
                "num_gpus": gpus_per_actor,
                "cache": _ray_cache_file(cache, cache_path),
            },
            (agent, fail_fast, allow_pickle or trust_remote_code),
        )
        return
    if backend != "local":
        _fail(f"--backend {backend!r}: use local or ray.")
        return
    try:
        plan = _plan_score(
            data,
            scorer,
            model,
            device,
            dtype,
            batch_size,
            scorer_options,
            threshold,
            cache,
            cache_path,
            agent,
            Fields(input_field, output_field, ground_truth_field, id_field),
            skip_invalid,
            allow_pickle,
            trust_remote_code,
        )
    except (OfflineScorerError, ValueError, TypeError) as error:
        _fail(str(error))
        return
    signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
    lines = _StreamedLines(out)
    try:
        result = run_evals(
            plan.dataset,
            plan.scorers,
            target=plan.target,
            thresholds=plan.thresholds,
            batch_size=batch_size,
            fail_fast=fail_fast,
            progress=not quiet,
            on_item_complete=lines.write,
            # The HTML and JUnit reports need every item; results JSONL is streamed.
            keep_items=bool(report or junit),
        )
    except OfflineScorerError as error:
        lines.discard()
        _fail(str(error))
        return
    except BaseException:
        lines.discard()
        raise
    lines.finish()
    _write_reports(result, summary_path, report, junit)
    if not quiet:
        _print_summary(result)
    if result.summary.interrupted:
        typer.echo("Interrupted: finished items were written; rerun to resume.", err=True)
        raise typer.Exit(130)
    raise typer.Exit(0 if result.passed else 1)


def _score_on_ray(
    data: Path,
    scorer_ids: list[str],
    model: str,
    device: str,
    dtype: str,
    batch_size: int,
    scorer_options: dict[str, Any],
    threshold: list[str],
    out: Path | None,
    reports: tuple[Path | None, Path | None, Path | None],
    fields: Fields,
    skip_invalid: bool,
    quiet: bool,
    cluster: dict[str, Any],
    local_only: tuple[bool, bool, bool],
) -> None:
    """``score --backend ray``: the same scoring on Ray actors; results written by workers."""
    from offline_scorer._exceptions import OfflineScorerError

    summary_path, report, junit = reports
    try:
        if any(local_only):
            raise ConfigurationError(
                "--agent, --fail-fast, --allow-pickle and --trust-remote-code need --backend local."
            )
        scorers = [get_scorer(name, **scorer_options) for name in scorer_ids]
        thresholds = parse_thresholds(threshold, scorers)
        options = {
            **cluster,
            "model": model,
            "device": device,
            "dtype": dtype,
            "output": str(out) if out else None,
        }
        result = run_evals(
            data,
            scorers,
            thresholds=thresholds,
            batch_size=batch_size,
            progress=not quiet,
            fields=fields,
            skip_invalid=skip_invalid,
            keep_items=bool(report or junit),
            backend="ray",
            ray=options,
        )
    except (OfflineScorerError, ValueError, TypeError) as error:
        _fail(str(error))
        return
    _write_reports(result, summary_path, report, junit)
    if not quiet:
        _print_summary(result)
        if out:
            typer.echo(f"results: {out}/ (one file per block, written by the Ray workers)")
    raise typer.Exit(0 if result.passed else 1)


def _ray_cache_file(cache: bool, cache_path: Path | None) -> str | None:
    """The result cache the Ray actors open: the local default, as an absolute path."""
    from offline_scorer.judges._cache import default_cache_path

    return str((cache_path or default_cache_path()).absolute()) if cache else None


class _Plan:
    def __init__(self, dataset: Any, scorers: list[Any], target: Any, thresholds: Any):
        self.dataset, self.scorers, self.target, self.thresholds = (
            dataset,
            scorers,
            target,
            thresholds,
        )


def _plan_score(
    data: Path,
    scorer_ids: list[str],
    model: str,
    device: str,
    dtype: str,
    batch_size: int,
    scorer_options: dict[str, Any],
    threshold: list[str],
    cache: bool,
    cache_path: Path | None,
    agent: bool,
    fields: Fields,
    skip_invalid: bool,
    allow_pickle: bool,
    trust_remote_code: bool,
) -> _Plan:
    """Check everything that can be checked before the model loads, and build the scorers."""
    from offline_scorer.judges._cache import CachedJudge
    from offline_scorer.judges._cards import resolve_model
    from offline_scorer.judges._factory import shared_judge
    from offline_scorer.scorers._registry import get_scorer

    # Rows are checked now but read again while scoring: memory stays flat for big files.
    dataset = load_dataset(data, fields=fields, skip_invalid=skip_invalid, lazy=True)
    resolve_model(model)  # unknown model or missing weights: fail before loading anything
    base: Any = shared_judge(
        model,
        device=device,
        dtype=dtype,
        batch_size=batch_size,
        allow_pickle=allow_pickle,
        trust_remote_code=trust_remote_code,
    )
    judge: Any = CachedJudge(base, cache_path) if cache else base
    scorers = [get_scorer(name, judge=judge, **scorer_options) for name in scorer_ids]
    check_rows(
        scorers,
        dataset_facts(dataset),
        fields,
        answers_missing_outputs=agent,
        remedy="pass --agent to let a local agent answer them",
    )
    thresholds = parse_thresholds(threshold, scorers)
    needs_target = bool(dataset.lines_without_output)
    # The agent answers with the scorers' own judge: one model load, same load options.
    target = LocalAgent(judge=base, batch_size=batch_size) if needs_target else None
    return _Plan(dataset, scorers, target, thresholds)


class _StreamedLines:
    """Results JSONL written as items finish, into a temporary file renamed at the end.

    Readers never see a half-written file; after Ctrl-C the finished items are kept.
    """

    def __init__(self, path: Path | None):
        import tempfile

        self.path = path
        self._handle: Any = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._handle = tempfile.NamedTemporaryFile(  # noqa: SIM115 - closed in finish()
                "w", encoding="utf-8", dir=path.parent, prefix=f".{path.name}.", delete=False
            )

    def write(self, item: Any, output: Any, results: Any) -> None:
        from offline_scorer.reports import append_result_lines

        if self._handle is not None:
            # One write per item: an interrupt never leaves an item half-written.
            buffer = io.StringIO()
            append_result_lines([item], buffer)
            self._handle.write(buffer.getvalue())

    def finish(self) -> None:
        import os

        from offline_scorer._files import make_readable

        if self._handle is not None and self.path is not None:
            self._handle.close()
            make_readable(self._handle.name)
            os.replace(self._handle.name, self.path)

    def discard(self) -> None:
        if self._handle is not None:
            self._handle.close()
            Path(self._handle.name).unlink(missing_ok=True)


def _write_reports(
    result: Any, summary: Path | None, report: Path | None, junit: Path | None
) -> None:
    from offline_scorer import reports as _reports

    if summary:
        _reports.write_summary_json(result, summary)
    if report:
        _reports.write_html_report(result, report)
    if junit:
        _reports.write_junit_xml(result, junit)


def _print_summary(result: Any) -> None:
    typer.echo("")
    for scorer_id, item in result.summary.scorers.items():
        mean = "-" if item.mean is None else f"{item.mean:.4f}"
        verdict = (
            ""
            if item.passed is None
            else (f"  threshold {item.threshold.describe()}: {'PASS' if item.passed else 'FAIL'}")
        )
        typer.echo(
            f"{scorer_id}: mean {mean} over {item.scored} scored "
            f"({item.not_scorable} not scorable, {item.failed} failed){verdict}"
        )
    for problem in result.summary.skipped_rows:
        typer.echo(f"skipped line {problem.line}: {problem.message}")
    if result.summary.verdict:
        typer.echo(f"verdict: {result.summary.verdict}")


@app.command()
def demo(
    model: str = typer.Option(
        DEFAULT_MODEL,
        envvar="OFFLINE_SCORER_MODEL",
        help="Model card name, HF model directory or .gguf file.",
    ),
    report: Path = typer.Option(Path("reports/demo.html"), help="Where to write the HTML report."),
) -> None:
    """Score the built-in demo dataset with both scorers and write an HTML report.

    Rows without an answer are answered by a local agent on the same model.
    """
    from offline_scorer._exceptions import OfflineScorerError
    from offline_scorer.judges._factory import shared_judge
    from offline_scorer.reports import write_html_report

    data = Path(__file__).resolve().parent.parent / "demo_data.jsonl"
    try:
        typer.echo(f"Scoring {data.name} with the local model '{model}' (offline)...", err=True)
        judge: Any = shared_judge(model)
        result = run_evals(
            data,
            [
                get_scorer("answer-relevancy", judge=judge),
                get_scorer("answer-similarity", judge=judge),
            ],
            target=LocalAgent(judge=judge),
            progress=True,
        )
    except OfflineScorerError as error:
        _fail(str(error))
        return
    for item in result.items:
        typer.echo(f"\n#{item.item_id}  Q: {_short(item.input)}")
        typer.echo(f"    A: {_short(item.output)}")
        for scorer_id, run in item.results.items():
            shown = "  -" if run.score is None else f"{run.score:.2f}"
            typer.echo(f"    {shown}  {scorer_id}: {_short(run.reason or run.error)}")
    write_html_report(result, report)
    _print_summary(result)
    typer.echo(f"\nHTML report: {report}")


def _short(value: Any, width: int = 110) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join((text or "").split())
    return text if len(text) <= width else text[: width - 1] + "…"


@app.command()
def models(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """List the model cards, whether each is on this machine, its size and checksum."""
    from offline_scorer.judges._cards import card_summary, list_model_cards

    rows = [card_summary(card) for card in list_model_cards()]
    if as_json:
        typer.echo(json.dumps(rows, indent=1))
        return
    for row in rows:
        size_bytes = row["size_bytes"]
        size = f"{size_bytes / 1e6:.0f} MB" if isinstance(size_bytes, int) else "-"
        where = row["path"] or f"not installed ({row['install']})"
        typer.echo(
            f"{row['name']}  {size}  checksum {row['checksum']}  verdicts {row['verdicts']}  "
            f"extraction {row['extraction']}  {where}"
        )


def main() -> None:
    """Entry point of the ``offline-scorer`` console script."""
    app(prog_name="offline-scorer")


if __name__ == "__main__":
    main()
