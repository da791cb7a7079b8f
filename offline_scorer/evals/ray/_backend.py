"""Scale-out on Ray Data: the same scorers inside actors, each actor holding one judge.

``run_evals(..., backend="ray")`` lands here. The dataset becomes a Ray Dataset (Ray Data
readers for JSONL, CSV and Parquet files; in-memory data is checked on the driver first),
a cheap task pass checks every row before any model loads, then ``map_batches`` sends
batches to a fixed pool of :class:`ScoringActor` actors. Each actor loads one judge and
scores its batch with ``Scorer.run_batch``, exactly as a local run does, and returns flat
rows (item id, scorer id, status, score, reason, step results as JSON, error, the full
result as JSON). The driver folds those rows into the same summary as a local run.

Ray is imported only inside these functions: ``import offline_scorer`` never imports it.
Ray's usage statistics are switched off (``RAY_USAGE_STATS_ENABLED=0``) and its dashboard
is not started, so nothing leaves the machine.
"""

from __future__ import annotations

import json
import os
import socket
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from offline_scorer._exceptions import (
    ConfigurationError,
    DataError,
    ModelLoadError,
    OfflineScorerError,
    UnknownModelError,
)
from offline_scorer.evals._data import Dataset, Fields, _check_row, load_dataset
from offline_scorer.evals._types import EvalItem, EvalResult, RowProblem
from offline_scorer.judges._cards import DEFAULT_MODEL
from offline_scorer.judges._settings import Device, DType
from offline_scorer.pipeline._results import ScoreResult

if TYPE_CHECKING:
    import pyarrow

    from offline_scorer.judges._protocol import Judge
    from offline_scorer.pipeline._scorer import Scorer

INSTALL_HINT = 'pip install "offline-scorer[ray]"'

# The flat columns every scored row carries, in this order (also the Parquet schema).
RESULT_COLUMNS = (
    "item_id",
    "scorer_id",
    "status",
    "score",
    "reason",
    "error",
    "step_results",
    "model_id",
    "model_fingerprint",
    "result",
)

# Environment the actors need to behave like the driver: offline switches and our own
# settings (cache folder, model); Ray forwards them with runtime_env.
_FORWARDED_PREFIXES = ("OFFLINE_SCORER_",)
_FORWARDED_NAMES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "RAY_USAGE_STATS_ENABLED")

# CPUs requested by the read and write tasks. Reading rows and writing results is light next
# to the model, and the actors may hold every core (a 2-core machine, GPU nodes whose CPUs
# all go to actors): a task that asked for a CPU would then wait for ever.
IO_CPUS = 0


class RayOptions(BaseModel):
    """How ``run_evals(..., backend="ray")`` runs on Ray.

    Attributes:
        address: the Ray cluster to join (``auto``, ``ray://host:10001`` or ``host:6379``);
            None starts a local Ray instance, or uses the one this process already started.
        actors: number of scoring actors, each holding one loaded judge.
        num_cpus: CPUs reserved per actor; torch uses that many threads in it.
        num_gpus: GPUs reserved per actor (1 on a GPU cluster: one model per GPU).
        model: model reference each actor loads; it must resolve on every worker.
        device: ``auto``, ``cpu``, ``cuda`` or ``mps``, as for a local judge.
        dtype: ``auto``, ``float32``, ``bfloat16`` or ``float16``.
        judge_settings: the judge's generation settings (fields of
            ``GenerationSettings``: ``batch_size``, ``max_new_tokens_json``,
            ``max_new_tokens_text`` ...); ``batch_size`` defaults to the ``batch_size``
            given to ``run_evals``.
        max_restarts: how often Ray restarts a dead actor (-1: without limit).
        max_task_retries: how often a batch whose actor died is retried (-1: without limit).
        output: a folder to write the result rows into, from the workers, as JSONL files
            (or Parquet files when the name ends with ``.parquet``). Kept rows are read back
            from it for the summary, so nothing is scored twice.
        judge_factory: builds the judge inside each actor instead of loading ``model``
            (any picklable function; used by tests and for custom judges).
        env: extra environment variables for the actors.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    address: str | None = None
    actors: int = Field(1, ge=1)
    num_cpus: float = Field(1.0, gt=0)
    num_gpus: float = Field(0.0, ge=0)
    model: str = DEFAULT_MODEL
    device: Device = "auto"
    dtype: DType = "auto"
    judge_settings: dict[str, Any] = Field(default_factory=dict)
    max_restarts: int = Field(-1, ge=-1)
    max_task_retries: int = Field(-1, ge=-1)
    output: str | None = None
    judge_factory: Callable[[], Any] | None = None
    env: dict[str, str] = Field(default_factory=dict)


@dataclass(frozen=True)
class ScorerSpec:
    """A built-in scorer as the actors rebuild it: id, options and language."""

    id: str
    options: dict[str, Any]
    language: str


@dataclass(frozen=True)
class ActorPlan:
    """Everything an actor needs to build its judge and scorers (sent to every worker)."""

    scorers: list[ScorerSpec]
    fields: Fields
    row_format: Literal["json", "table"]
    model: str
    device: Device
    dtype: DType
    judge_settings: dict[str, Any]
    threads: int
    judge_factory: Callable[[], Any] | None = None


@dataclass
class RaySource:
    """The input as a Ray Dataset, and how its rows are decoded."""

    dataset: Any
    row_format: Literal["json", "table"]
    name: str


@dataclass
class RowCheck:
    """What the checking pass learned about the rows (see :func:`check_rows`)."""

    usable: int = 0
    without_output: list[str] = field(default_factory=list)
    with_ground_truth: int = 0
    missing_ids: int = 0
    problems: list[RowProblem] = field(default_factory=list)


# --------------------------------------------------------------------------- Ray itself


def import_ray() -> Any:
    """Import Ray and Ray Data, or say how to install them."""
    try:
        import ray
        import ray.data
    except ImportError as error:
        raise ConfigurationError(
            f"backend='ray' needs Ray Data, which is not installed: run {INSTALL_HINT}."
        ) from error
    return ray


def connect(address: str | None) -> bool:
    """Join (or start) Ray with telemetry and dashboard off; True when we started it."""
    ray = import_ray()
    if ray.is_initialized():
        return False
    # Ray reads this when it starts: no usage statistics are collected or sent.
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    try:
        ray.init(
            address=address,
            include_dashboard=False,
            log_to_driver=True,
            configure_logging=False,
        )
    except (ConnectionError, RuntimeError, ValueError) as error:
        where = f"the Ray cluster at {address}" if address else "a local Ray instance"
        raise ConfigurationError(
            f"Could not connect to {where}: {error}. Check --ray-address (e.g. 'auto' on a "
            "node of the cluster) or leave it out to start Ray on this machine."
        ) from error
    return True


def data_context(ray: Any) -> Any:
    """Ray Data's current context (made on first use, quietly: see below)."""
    with warnings.catch_warnings():
        # Ray 2.60's own DataContext() sets deprecated fields of itself and warns about
        # them; nothing the user did, so they are not shown.
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        return ray.data.DataContext.get_current()


def forwarded_env(extra: Mapping[str, str]) -> dict[str, str]:
    """The driver's offline switches and OFFLINE_SCORER_* settings, plus ``extra``."""
    env = {
        name: value
        for name, value in os.environ.items()
        if name.startswith(_FORWARDED_PREFIXES) or name in _FORWARDED_NAMES
    }
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TRANSFORMERS_OFFLINE", "1")
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    env.update(extra)
    return env


# --------------------------------------------------------------------------- input


def ray_source(data: Any, fields: Fields, skip_invalid: bool) -> RaySource:
    """Read ``data`` with Ray Data readers (files) or hand checked rows to Ray (in memory).

    JSONL is read as text lines and parsed in the workers, so every row means exactly what
    it means to a local run. CSV cells of the named fields are read as text, as locally.
    """
    ray = import_ray()
    if isinstance(data, ray.data.Dataset):
        return RaySource(data, "table", "<ray.data.Dataset>")
    if isinstance(data, (str, os.PathLike)):
        path = Path(data)
        if not path.exists():
            raise DataError(f"Dataset file {path} does not exist.")
        suffix = (path.suffix if path.is_file() else _folder_suffix(path)).lower()
        if suffix in (".jsonl", ".ndjson"):
            return RaySource(ray.data.read_text(str(path), num_cpus=IO_CPUS), "json", str(path))
        if suffix == ".csv":
            return RaySource(_read_csv(ray, path, fields), "table", str(path))
        if suffix == ".parquet":
            return RaySource(ray.data.read_parquet(str(path), num_cpus=IO_CPUS), "table", str(path))
        if suffix != ".json":
            raise DataError(
                f"{path}: unknown dataset format '{suffix}'; the Ray backend reads .jsonl, "
                ".csv and .parquet files (and .json, checked on this machine first)."
            )
    dataset = (
        data
        if isinstance(data, Dataset)
        else load_dataset(data, fields=fields, skip_invalid=skip_invalid)
    )
    return RaySource(
        ray.data.from_items([{"text": _item_json(item, fields)} for item in dataset.items]),
        "json",
        dataset.source,
    )


def _folder_suffix(path: Path) -> str:
    """The format of a folder of files (as Ray writes them): the suffix of its files."""
    suffixes = {child.suffix for child in path.iterdir() if child.is_file()}
    return suffixes.pop() if len(suffixes) == 1 else ""


def _read_csv(ray: Any, path: Path, fields: Fields) -> Any:
    from pyarrow import csv, string

    # Locally every CSV cell is text; without this, arrow would turn "8" into the number 8.
    names = (fields.input, fields.output, fields.ground_truth, fields.id)
    convert = csv.ConvertOptions(column_types=dict.fromkeys(names, string()))
    return ray.data.read_csv(str(path), convert_options=convert, num_cpus=IO_CPUS)


def _item_json(item: Any, fields: Fields) -> str:
    """A checked in-memory item as one JSON row, with the id a local run gives it."""
    row: dict[str, Any] = {fields.id: item.item_id, fields.input: item.input}
    if item.has_output:
        row[fields.output] = item.output
    if item.ground_truth is not None:
        row[fields.ground_truth] = item.ground_truth
    if item.request_context is not None:
        row[fields.request_context] = item.request_context
    return json.dumps(row, ensure_ascii=False)


def decode_rows(table: pyarrow.Table, row_format: str) -> Iterator[Any]:
    """The rows of one batch as plain Python values (a parse error becomes a RowProblem)."""
    for row in table.to_pylist():
        if row_format != "json":
            yield row
            continue
        try:
            yield json.loads(row["text"])
        except json.JSONDecodeError as error:
            yield RowProblem(line=0, message=f"invalid JSON: {error.msg}: {row['text'][:80]!r}")


def checked_items(table: pyarrow.Table, row_format: str, fields: Fields) -> Iterator[Any]:
    """Each row of a batch checked as a local run checks it: a DataItem or a RowProblem."""
    for row in decode_rows(table, row_format):
        if isinstance(row, RowProblem):
            yield row
            continue
        checked = _check_row(row, 0, 0, fields)
        if isinstance(checked, RowProblem):
            shown = row.get(fields.id) if isinstance(row, Mapping) else None
            where = f"row with {fields.id}={shown!r}" if shown not in (None, "") else "a row"
            yield RowProblem(line=0, message=f"{where}: {checked.message}")
        elif not isinstance(row, Mapping) or row.get(fields.id) in (None, ""):
            yield RowProblem(
                line=0,
                message=(
                    f"a row has no '{fields.id}': the Ray backend reads files in parallel "
                    "blocks and cannot number rows as a local run does; give every row a "
                    f"unique id (or name the id column with --id-field)"
                ),
            )
        else:
            yield checked


# --------------------------------------------------------------------------- checking pass


def check_rows(source: RaySource, fields: Fields, skip_invalid: bool) -> RowCheck:
    """Check every row with cheap Ray tasks before any model loads.

    Raises:
        DataError: invalid rows (unless ``skip_invalid``), or no usable row at all.
    """
    row_format = source.row_format

    def summarize(table: pyarrow.Table) -> dict[str, list[Any]]:
        usable, with_truth = 0, 0
        without_output: list[str] = []
        problems: list[str] = []
        for checked in checked_items(table, row_format, fields):
            if isinstance(checked, RowProblem):
                problems.append(checked.message)
                continue
            usable += 1
            with_truth += checked.ground_truth not in (None, "")
            if not checked.has_output:
                without_output.append(checked.item_id)
        return {
            "usable": [usable],
            "with_ground_truth": [with_truth],
            "without_output": [json.dumps(without_output[:10])],
            "problems": [json.dumps(problems[:20])],
            "problem_count": [len(problems)],
        }

    check = RowCheck()
    count = 0
    for part in source.dataset.map_batches(summarize, batch_format="pyarrow").take_all():
        check.usable += int(part["usable"])
        check.with_ground_truth += int(part["with_ground_truth"])
        check.without_output.extend(json.loads(part["without_output"]))
        count += int(part["problem_count"])
        check.problems.extend(RowProblem(line=0, message=m) for m in json.loads(part["problems"]))
    if count and not skip_invalid:
        shown = "\n".join(f"  {p.message}" for p in check.problems[:20])
        more = f"\n  ... and {count - 20} more" if count > 20 else ""
        raise DataError(
            f"{source.name}: {count} invalid row(s); nothing was scored.\n{shown}{more}\n"
            "Fix them, or pass --skip-invalid (skip_invalid=True) to score the other rows."
        )
    if check.usable == 0:
        raise DataError(f"{source.name}: the dataset has no usable rows.")
    return check


# --------------------------------------------------------------------------- the actor


def worker_name() -> str:
    """This worker as a person can find it: host name and Ray node id."""
    try:
        import ray

        node = ray.get_runtime_context().get_node_id()
    except Exception:  # outside Ray (direct use in a test): the host name is enough
        node = "?"
    return f"{socket.gethostname()} (Ray node {node[:12]})"


def load_actor_judge(plan: ActorPlan) -> Judge:
    """Load the plan's model in this worker, or fail naming the worker and the reference.

    Raises:
        ModelLoadError: the model reference does not resolve (or load) on this worker.
    """
    from offline_scorer.judges._cards import resolve_model
    from offline_scorer.judges._settings import GenerationSettings
    from offline_scorer.judges.transformers._judge import TransformersJudge

    try:
        resolve_model(plan.model)
        judge = TransformersJudge(
            plan.model,
            settings=GenerationSettings(**plan.judge_settings),
            device=plan.device,
            dtype=plan.dtype,
            threads=plan.threads,
        )
        judge.load()
    except (UnknownModelError, ModelLoadError) as error:
        raise ModelLoadError(
            f"Ray worker {worker_name()}: the model '{plan.model}' does not resolve here: "
            f"{error} Every worker must see the same model: put the weights at the same "
            "path on every node (a shared filesystem) or install the same model package "
            "on every node."
        ) from error
    return judge


class ScoringActor:
    """A Ray Data actor: one judge, the scorers rebuilt around it, one batch per call."""

    def __init__(self, plan: ActorPlan):
        import torch

        from offline_scorer.scorers._registry import get_scorer

        # As many torch threads as CPUs reserved: more would fight the other actors.
        torch.set_num_threads(plan.threads)
        judge = plan.judge_factory() if plan.judge_factory else load_actor_judge(plan)
        self._plan = plan
        self._scorers = [
            get_scorer(spec.id, judge=judge, language=spec.language, **spec.options)
            for spec in plan.scorers
        ]

    def __call__(self, table: pyarrow.Table) -> pyarrow.Table:
        """Score one batch: every scorer's ``run_batch`` once, then flat rows."""
        from offline_scorer.evals._data import DataItem
        from offline_scorer.evals._run import _score_chunk

        items = [
            checked
            for checked in checked_items(table, self._plan.row_format, self._plan.fields)
            if isinstance(checked, DataItem)
        ]
        done = _score_chunk(items, self._scorers, None, fail_fast=False)
        return rows_table(
            [flat_row(item, result) for item in done for result in item.results.values()]
        )


def flat_row(item: EvalItem, result: ScoreResult) -> dict[str, Any]:
    """One output row: the columns of :data:`RESULT_COLUMNS`."""
    steps = {
        "preprocess": result.preprocess_step_result,
        "analyze": result.analyze_step_result,
        "stats": {name: stats.model_dump() for name, stats in result.steps.items()},
    }
    return {
        "item_id": item.item_id,
        "scorer_id": result.scorer_id,
        "status": result.status,
        "score": result.score,
        "reason": result.reason,
        "error": result.error,
        "step_results": json.dumps(steps, ensure_ascii=False),
        "model_id": result.model_id,
        "model_fingerprint": result.model_fingerprint,
        "result": result.model_dump_json(),
    }


def rows_table(rows: list[dict[str, Any]]) -> pyarrow.Table:
    """Rows as an arrow table with a fixed schema (an empty batch keeps its columns)."""
    import pyarrow as pa

    schema = pa.schema(
        [(name, pa.float64() if name == "score" else pa.string()) for name in RESULT_COLUMNS]
    )
    return pa.Table.from_pylist(rows, schema=schema)


# --------------------------------------------------------------------------- the driver


def scorer_specs(scorers: Sequence[Scorer]) -> list[ScorerSpec]:
    """Built-in scorers as specs the actors can rebuild.

    Raises:
        ConfigurationError: a scorer is not built in (its steps cannot be rebuilt remotely).
    """
    from offline_scorer.scorers._registry import scorer_ids

    known = set(scorer_ids())
    specs = []
    for scorer in scorers:
        if scorer.id.removesuffix("-scorer") not in known:
            raise ConfigurationError(
                f"backend='ray' rebuilds each scorer on the actors from its id and options; "
                f"'{scorer.id}' is not a built-in scorer ({', '.join(sorted(known))}). "
                "Score custom scorers with the local backend."
            )
        specs.append(ScorerSpec(scorer.id, scorer.options_dict(), scorer.language))
    return specs


def score_on_ray(
    source: RaySource,
    plan: ActorPlan,
    options: RayOptions,
    batch_size: int,
) -> Any:
    """The lazy Ray Dataset of flat result rows (nothing runs until it is consumed)."""
    ray = import_ray()
    remote_args: dict[str, Any] = {}
    # Ray Data already restarts dead actors and retries their batches without limit
    # (-1, -1); other values go through the remote arguments it still accepts.
    if (options.max_restarts, options.max_task_retries) != (-1, -1):
        remote_args = {
            "max_restarts": options.max_restarts,
            "max_task_retries": options.max_task_retries,
        }
    with warnings.catch_warnings():
        # Ray 2.60 marks these remote arguments deprecated but has no other way to pass them.
        warnings.filterwarnings("ignore", message=".*ray_remote_args.*deprecated")
        return source.dataset.map_batches(
            ScoringActor,
            fn_constructor_args=(plan,),
            batch_size=batch_size,
            batch_format="pyarrow",
            compute=ray.data.ActorPoolStrategy(size=options.actors),
            num_cpus=options.num_cpus,
            num_gpus=options.num_gpus,
            runtime_env={"env_vars": forwarded_env(options.env)},
            **remote_args,
        )


def write_rows(rows: Any, output: str) -> Any:
    """Write the result rows from the workers, then read them back (nothing reruns)."""
    ray = import_ray()
    path = os.path.abspath(output)
    with warnings.catch_warnings():
        # Ray 2.60 marks ray_remote_args deprecated, but writes take no num_cpus otherwise.
        warnings.filterwarnings("ignore", message=".*ray_remote_args.*deprecated")
        if output.endswith(".parquet"):
            rows.write_parquet(path, ray_remote_args={"num_cpus": IO_CPUS})
            return ray.data.read_parquet(path, num_cpus=IO_CPUS)
        rows.write_json(path, ray_remote_args={"num_cpus": IO_CPUS})
        # Read back as text lines, parsed by us: exactly the values that were written.
        return ray.data.read_text(path, num_cpus=IO_CPUS)


def translate_ray_error(error: BaseException) -> OfflineScorerError | None:
    """Our own error raised inside a worker, found in a Ray exception's chain."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OfflineScorerError):
            return current
        cause = getattr(current, "cause", None)
        current = cause if isinstance(cause, BaseException) else current.__cause__
    # Ray hands worker errors back as text: the last one of ours is the outermost.
    text = str(error)
    for marker, kind in (
        ("ModelLoadError: ", ModelLoadError),
        ("DataError: ", DataError),
        ("ConfigurationError: ", ConfigurationError),
    ):
        if marker in text:
            message = text.rsplit(marker, 1)[1].strip().splitlines()[0]
            return kind(message)
    return None


def result_items(rows: Any, keep_items: bool) -> Iterator[EvalItem]:
    """Items rebuilt from result rows, in the order the rows come (one item's rows together).

    With ``keep_items`` False only what the summary needs is rebuilt (status, score, model).
    """
    current: EvalItem | None = None
    index = 0
    for batch in rows.iter_batches(batch_format="pyarrow", batch_size=1024):
        for line in batch.to_pylist():
            row = json.loads(line["text"]) if "text" in line else line
            if current is None or row["item_id"] != current.item_id:
                if current is not None:
                    yield current
                current = EvalItem(index=index, item_id=row["item_id"])
                index += 1
            result = (
                ScoreResult.model_validate_json(row["result"])
                if keep_items
                else ScoreResult(
                    run_id=f"{row['item_id']}/{row['scorer_id']}",
                    scorer_id=row["scorer_id"],
                    status=row["status"],
                    score=row["score"],
                    model_id=row["model_id"],
                    model_fingerprint=row["model_fingerprint"],
                )
            )
            if keep_items and current.input is None:
                current.input, current.output = result.input, result.output
                current.ground_truth = result.ground_truth
                current.request_context = result.request_context
            current.results[result.scorer_id] = result
    if current is not None:
        yield current


# --------------------------------------------------------------------------- run_evals


def run_evals_on_ray(
    data: Any,
    scorers: Sequence[Scorer | str],
    *,
    options: RayOptions | Mapping[str, Any] | None,
    thresholds: Mapping[str, Any] | None,
    batch_size: int,
    fields: Fields | None,
    skip_invalid: bool,
    keep_items: bool,
    on_item_complete: Callable[[EvalItem, Any, dict[str, ScoreResult]], None] | None,
    progress: bool,
) -> EvalResult:
    """``run_evals`` on Ray: see :func:`offline_scorer.run_evals` for the arguments.

    Raises:
        ConfigurationError: bad options, a custom scorer, rows without output, Ray missing
            or unreachable.
        DataError: invalid rows, no usable row, or no ground truth for answer similarity.
        ModelLoadError: the model does not resolve on a worker (the message names it).
        OfflineScorerError: the Ray job failed for another reason.
    """
    import time

    from offline_scorer.evals._run import _build_scorers, _Totals, parse_thresholds

    started = time.perf_counter()
    settings = options if isinstance(options, RayOptions) else RayOptions(**(options or {}))
    built = _build_scorers(scorers)
    specs = scorer_specs(built)
    limits = parse_thresholds(thresholds or {}, built)
    if batch_size < 1:
        raise ConfigurationError("batch_size must be at least 1.")
    fields = fields or Fields()
    ray = import_ray()
    started_ray = connect(settings.address)
    context = data_context(ray)
    saved = (context.execution_options.preserve_order, context.enable_progress_bars)
    # Rows come back in input order: the same item order as a local run.
    context.execution_options.preserve_order = True
    context.enable_progress_bars = progress
    totals = _Totals(built, limits)
    items: list[EvalItem] = []
    check = RowCheck()
    interrupted = False
    try:
        source = ray_source(data, fields, skip_invalid)
        check = check_rows(source, fields, skip_invalid)
        _check_plan(check, specs, fields)
        plan = ActorPlan(
            scorers=specs,
            fields=fields,
            row_format=source.row_format,
            model=settings.model,
            device=settings.device,
            dtype=settings.dtype,
            judge_settings=_judge_settings(settings, batch_size),
            threads=max(1, int(settings.num_cpus)),
            judge_factory=settings.judge_factory,
        )
        rows = score_on_ray(source, plan, settings, batch_size)
        if settings.output:
            rows = write_rows(rows, settings.output)
        full = keep_items or on_item_complete is not None
        if not full and not settings.output:
            rows = rows.select_columns(
                ["item_id", "scorer_id", "status", "score", "model_id", "model_fingerprint"]
            )
        for item in result_items(rows, full):
            totals.add(item)
            if keep_items:
                items.append(item)
            if on_item_complete is not None:
                on_item_complete(item, item.output, item.results)
    except KeyboardInterrupt:
        interrupted = True
    except OfflineScorerError:
        raise
    except Exception as error:
        raise _from_ray_error(error) from error
    finally:
        context.execution_options.preserve_order, context.enable_progress_bars = saved
        if started_ray:
            ray.shutdown()
    summary = totals.summary(time.perf_counter() - started)
    summary.total_items = check.usable
    summary.skipped_rows = list(check.problems)
    summary.interrupted = interrupted
    scores = {scorer_id: s.mean for scorer_id, s in summary.scorers.items()}
    return EvalResult(scores=scores, summary=summary, items=items)


def _judge_settings(options: RayOptions, batch_size: int) -> dict[str, Any]:
    """The generation settings for the actors' judges, checked here rather than remotely."""
    from offline_scorer.judges._settings import GenerationSettings

    chosen = {"batch_size": batch_size, **options.judge_settings}
    try:
        GenerationSettings(**chosen)
    except ValueError as error:
        raise ConfigurationError(f"Ray option judge_settings: {error}") from error
    return chosen


def _check_plan(check: RowCheck, specs: list[ScorerSpec], fields: Fields) -> None:
    if check.without_output:
        raise ConfigurationError(
            f"Rows without an output ({fields.id}s {check.without_output[:10]}): the Ray "
            "backend scores answers already in the data; add an 'output' column, or produce "
            "the answers first (a local run can use target=)."
        )
    needs_truth = any(
        s.id.startswith("answer-similarity") and s.options.get("require_ground_truth", True)
        for s in specs
    )
    if needs_truth and check.with_ground_truth == 0:
        raise DataError(
            f"answer-similarity needs a ground truth, but no row has a "
            f"'{fields.ground_truth}' value (use --ground-truth-field to name the column)."
        )


def _from_ray_error(error: Exception) -> OfflineScorerError:
    ours = translate_ray_error(error)
    if ours is not None:
        return ours
    first = (str(error).strip().splitlines() or [""])[0]
    return OfflineScorerError(
        f"The Ray job failed: {type(error).__name__}: {first} (the worker logs above say "
        "more; rerun with the local backend to see the error in this process)."
    )
