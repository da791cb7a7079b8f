"""The Ray backend: the same scores as a local run, and Ray's fault handling.

One local Ray instance (``ray.init(num_cpus=2)``, no dashboard, no usage statistics) is
shared by the whole module and shut down at its end. No external service is used.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from cases import RELEVANCY_CASES

from offline_scorer import (
    CachedJudge,
    ConfigurationError,
    DataError,
    EvalResult,
    ReplayJudge,
    create_scorer,
    get_scorer,
    run_evals,
)
from offline_scorer.judges._cards import resolve_model

ray = pytest.importorskip("ray", reason='needs the ray extra: pip install "offline-scorer[ray]"')

RECORDING = Path(__file__).resolve().parent / "recordings" / "scorers.json"
RELEVANCY = "answer-relevancy-scorer"

# Short questions and answers: generation stays short, so the real model scores them fast.
QUESTIONS = [
    ("Capital of France?", "Paris.", "Paris"),
    ("Capital of Italy?", "Rome.", "Rome"),
    ("Capital of Spain?", "Madrid.", "Madrid"),
    ("Capital of Japan?", "Tokyo.", "Tokyo"),
    ("Capital of Germany?", "Berlin.", "Berlin"),
    ("Legs on a spider?", "Eight.", "Eight"),
    ("Legs on a dog?", "Four.", "Four"),
    ("Color of the sky?", "Blue.", "Blue"),
    ("Color of grass?", "Green.", "Green"),
    ("Largest planet?", "Jupiter.", "Jupiter"),
    ("Author of Hamlet?", "Shakespeare.", "Shakespeare"),
    ("Water boils at?", "100 °C.", "100 °C"),
    ("Days in a week?", "Seven.", "Seven"),
    ("Opposite of hot?", "Cold.", "Cold"),
    ("Capital of Peru?", "Lima.", "Lima"),
    ("Capital of Egypt?", "Cairo.", "Cairo"),
    ("Months in a year?", "Twelve.", "Twelve"),
    ("Sun rises in the?", "East.", "East"),
    ("Capital of Canada?", "Toronto.", "Ottawa"),
    ("Frozen water is?", "Ice.", "Ice"),
]


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[None]:
    """A 2-CPU local Ray instance for the module; telemetry and dashboard off."""
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    ray.init(num_cpus=2, include_dashboard=False, configure_logging=False)
    # The actor-death test ships functions of this module to the workers by value (the
    # tests folder is not importable there).
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    yield
    ray.shutdown()


def comparable(result: EvalResult) -> dict[str, Any]:
    """Every item's results without timings, and the summary without its wall time."""
    items = {
        item.item_id: {
            scorer_id: run.model_dump(exclude={"steps"}) for scorer_id, run in item.results.items()
        }
        for item in result.items
    }
    summary = result.summary.model_dump(exclude={"seconds", "cache_hits", "cache_misses"})
    return {"items": items, "summary": summary, "scores": result.scores}


@pytest.mark.slow
def test_two_ray_actors_give_the_local_scores_and_summary(
    ray_cluster: None, tmp_path: Path
) -> None:
    """6 rows, real embedded model: 2 Ray actors (1 CPU each) against the local run.

    The actors load the model themselves from the converted-weights cache of this session
    (``OFFLINE_SCORER_CACHE`` is forwarded to them); the local run uses the session judge.
    Answer relevancy runs its whole pipeline (statements, verdicts, score, reason): three
    judge calls per batch, with short answers the cheapest built-in scorer here. Reasons are
    held to one short sentence and JSON strings to 12 tokens on both sides to keep the test
    quick.
    """
    # Two batches of three rows, one for each actor (as two batches of ten were): every
    # row is compared with the local run one by one, so more rows per batch add time, not
    # proof. The wrong answer (Toronto for Ottawa) is among them.
    picked = [*QUESTIONS[:3], *QUESTIONS[-3:]]
    rows = [
        {"id": f"q{n:02d}", "input": q, "output": a, "ground_truth": g}
        for n, (q, a, g) in enumerate(picked)
    ]
    data = write_jsonl(tmp_path / "data.jsonl", rows)
    thresholds = {"answer-relevancy": 0.5}
    settings = {"max_new_tokens_text": 24, "max_sentences_text": 1, "max_string_tokens": 12}
    # One scorer for both runs: its JudgeConfig travels to the actors.
    scorer = get_scorer("answer-relevancy", **settings)
    local = run_evals(data, [scorer], thresholds=thresholds, batch_size=3)
    on_ray = run_evals(
        data,
        [scorer],
        thresholds=thresholds,
        batch_size=3,
        progress=False,
        backend="ray",
        ray={"actors": 2, "num_cpus": 1, "output": str(tmp_path / "results")},
    )
    assert len(on_ray.items) == len(rows)
    assert comparable(on_ray) == comparable(local)
    assert on_ray.summary.verdict in ("passed", "failed")
    written = [
        json.loads(line)
        for file in sorted((tmp_path / "results").glob("*.json*"))
        for line in file.read_text().splitlines()
    ]
    by_id = {row["item_id"]: row for row in written}
    assert sorted(by_id) == [row["id"] for row in rows] and len(written) == len(rows)
    for item in local.items:
        row = by_id[item.item_id]
        expected = item.results[RELEVANCY]
        assert (row["scorer_id"], row["score"], row["reason"]) == (
            RELEVANCY,
            expected.score,
            expected.reason,
        )
        steps = json.loads(row["step_results"])
        assert (steps["preprocess"], steps["analyze"]) == (
            expected.preprocess_step_result,
            expected.analyze_step_result,
        )


@pytest.fixture(scope="module")
def gguf_ray_run(ray_cluster: None, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """``score --model <the embedded .gguf path> --backend ray`` on one short row, both
    scorers, with a new result cache: the Ray run that the local run is compared with, and
    the first of the two runs that share that cache.

    The command runs in this process (typer's runner) to join the module's Ray instance.
    """
    from typer.testing import CliRunner

    from offline_scorer.cli import app

    folder = tmp_path_factory.mktemp("gguf-ray")
    gguf = resolve_model("smollm2-135m-instruct").path
    rows = [
        {"id": f"q{n}", "input": q, "output": a, "ground_truth": g}
        for n, (q, a, g) in enumerate(QUESTIONS[:1])
    ]
    data = write_jsonl(folder / "data.jsonl", rows)
    args = ["score", str(data), "-s", "answer-relevancy", "-s", "answer-similarity"]
    args += ["--model", str(gguf), "--quiet"]
    cache = ["--cache-path", str(folder / "cache.sqlite")]
    out, summary = folder / "ray.jsonl", folder / "ray-summary.json"
    ray_args = [*args, *cache, "--backend", "ray", "--out", str(out), "--summary", str(summary)]
    outcome = CliRunner().invoke(app, ray_args)
    assert outcome.exit_code == 0, outcome.output
    return {"args": args, "cache": cache, "out": out, "summary": json.loads(summary.read_text())}


@pytest.mark.slow
def test_cli_on_ray_scores_a_non_default_model_exactly_like_a_local_run(
    gguf_ray_run: dict[str, Any], tmp_path: Path
) -> None:
    """``score --model <a .gguf path>`` locally and with ``--backend ray``: the same rows.

    The defect this pins: the Ray path built its scorers without the model, so ``auto``
    modes resolved against the embedded card (read verdicts, split extraction) while the
    local run resolved them for the named model (no card: generated verdicts, extraction by
    the model), and ``--out`` was a folder of differently shaped rows. The model is the
    embedded GGUF file named by its path (a model of your own, to the scorers), so both
    scorers run the reference's whole procedure; one short row keeps it to about a minute.
    The Ray run (``gguf_ray_run``) starts with an empty result cache, so its actor computes
    every answer, as the local run (without a cache) does.
    """
    from typer.testing import CliRunner

    from offline_scorer.cli import app

    outputs = {"local": tmp_path / "local.jsonl", "ray": gguf_ray_run["out"]}
    local_args = [*gguf_ray_run["args"], "--no-cache", "--backend", "local"]
    outcome = CliRunner().invoke(app, [*local_args, "--out", str(outputs["local"])])
    assert outcome.exit_code == 0, outcome.output
    written = {}
    for backend, out in outputs.items():
        assert out.is_file()  # one shape: a JSONL file on every backend
        lines = [json.loads(line) for line in out.read_text().splitlines()]
        written[backend] = {(line["item_id"], line["scorer_id"]): line for line in lines}
    local, on_ray = written["local"], written["ray"]
    assert sorted(on_ray) == sorted(local) and len(local) == 2
    for key, line in local.items():
        assert line["scorer_options"]["verdicts"] == "generate", key
        assert line["scorer_options"]["extraction"] == "model", key
        assert _without_timings(on_ray[key]) == _without_timings(line), key


def _without_timings(line: dict[str, Any]) -> dict[str, Any]:
    """A result line without what differs between two runs of the same work: wall times,
    and the item's position (on Ray, items arrive in the order they finish)."""
    steps = {
        name: {k: v for k, v in stats.items() if k != "seconds"}
        for name, stats in line["steps"].items()
    }
    return {**{k: v for k, v in line.items() if k != "item_index"}, "steps": steps}


class DiesOnFirstBatch:
    """A judge that kills its actor process on its first call, once per marker file.

    It wraps a replay judge: this test is about Ray's fault handling (actor restart, batch
    retry), not about the model, so recorded answers of the real model stand in for it.
    Every prompt it answers is logged, to prove no item is scored twice.
    """

    def __init__(self, marker: Path, log: Path):
        self.inner = ReplayJudge(RECORDING)
        self.marker, self.log = marker, log

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def generate_json(self, prompts: Any, schema: Any, **options: Any) -> Any:
        if not self.marker.exists():
            self.marker.write_text("died once")
            os._exit(1)  # the process dies: no exception, no cleanup, as in a crash
        with self.log.open("a") as handle:
            handle.writelines(json.dumps(p[-1]["content"]) + "\n" for p in prompts)
        return self.inner.generate_json(prompts, schema, **options)

    def generate_text(self, prompts: Any, **options: Any) -> Any:
        return self.inner.generate_text(prompts, **options)


def dying_judge(marker: Path, log: Path) -> DiesOnFirstBatch:
    return DiesOnFirstBatch(marker, log)


def generated_relevancy() -> Any:
    """The relevancy scorer with generated verdicts: what the recording holds.

    (By name, the scorer would resolve to the embedded card's read verdicts; the options
    resolved on the driver travel to the actors.)
    """
    return get_scorer("answer-relevancy", verdicts="generate", extraction="model")


def test_a_dead_actor_is_restarted_and_every_item_scored_once(
    ray_cluster: None, tmp_path: Path
) -> None:
    """One actor exits on its first batch; Ray restarts it and retries that batch.

    The judge is a recording of the real model (see :class:`DiesOnFirstBatch`).
    """
    cases = [RELEVANCY_CASES[name] for name in ("relevant", "partly_relevant", "off_topic")]
    rows = [{"id": f"r{n:02d}", **cases[n % 3]} for n in range(12)]
    data = write_jsonl(tmp_path / "data.jsonl", rows)
    marker, log = tmp_path / "died", tmp_path / "asked.log"
    result = run_evals(
        data,
        [generated_relevancy()],
        batch_size=3,
        progress=False,
        backend="ray",
        ray={
            "actors": 2,
            "num_cpus": 1,
            "judge_factory": partial(dying_judge, marker, log),
            "output": str(tmp_path / "results"),
        },
    )
    assert marker.exists(), "the actor never died: the test proved nothing"
    assert sorted(item.item_id for item in result.items) == [row["id"] for row in rows]
    assert all(item.results[RELEVANCY].status == "scored" for item in result.items)
    assert result.summary.scorers[RELEVANCY].scored == 12
    # 12 rows, two JSON prompts each (statements, verdicts), logged when answered: a batch
    # computed twice would log more.
    assert len(log.read_text().splitlines()) == 24
    replay = get_scorer("answer-relevancy", judge=ReplayJudge(RECORDING))
    expected = {row["id"]: replay.run(input=row["input"], output=row["output"]) for row in rows}
    assert {item.item_id: item.results[RELEVANCY].score for item in result.items} == {
        key: run.score for key, run in expected.items()
    }


def test_the_actors_share_the_result_cache_and_report_its_hits(
    ray_cluster: None, tmp_path: Path
) -> None:
    """Two Ray runs with one cache file: the second is served from it, with the same results.

    The first run names the file in the Ray options and writes its rows (the cache counts
    travel through the written files); the second gives it as the scorers' CachedJudge, as
    a local run would, and reads its rows straight from the actors. The actors' judge is a
    recording of the real model (this test is about the cache, not the model).
    """
    # Four different rows: no prompt repeats, so the first run has no hit at all.
    names = ("relevant", "partly_relevant", "off_topic", "injection")
    rows = [{"id": name, **RELEVANCY_CASES[name]} for name in names]
    data = write_jsonl(tmp_path / "data.jsonl", rows)
    cache = tmp_path / "cache.sqlite"
    options = {"actors": 2, "num_cpus": 1, "judge_factory": partial(ReplayJudge, RECORDING)}
    first = run_evals(
        data,
        [generated_relevancy()],
        batch_size=2,
        progress=False,
        backend="ray",
        ray={**options, "cache": str(cache), "output": str(tmp_path / "results")},
    )
    cached_scorer = get_scorer("answer-relevancy", judge=CachedJudge(ReplayJudge(RECORDING), cache))
    second = run_evals(
        data, [cached_scorer], batch_size=2, progress=False, backend="ray", ray=options
    )
    asked = first.summary.cache_misses
    assert first.summary.cache_hits == 0 and asked and asked >= 2 * len(rows)
    assert (second.summary.cache_hits, second.summary.cache_misses) == (asked, 0)
    assert comparable(second) == comparable(first)
    assert second.summary.scorers[RELEVANCY].scored == len(rows)


def test_one_cache_file_per_run(tmp_path: Path) -> None:
    scorer = get_scorer(
        "answer-relevancy", judge=CachedJudge(ReplayJudge(RECORDING), tmp_path / "a.sqlite")
    )
    data = [{"id": "a", "input": "q", "output": "a"}]
    ray_options = {"cache": str(tmp_path / "b.sqlite")}
    with pytest.raises(ConfigurationError, match="one result cache"):
        run_evals(data, [scorer], progress=False, backend="ray", ray=ray_options)


@pytest.mark.slow
def test_cli_ray_run_resumes_from_the_cache(gguf_ray_run: dict[str, Any], tmp_path: Path) -> None:
    """``score --backend ray --cache-path``, twice, real model: the second run asks no model.

    The first run is ``gguf_ray_run`` (one short row, both scorers, every judge call made
    and cached on Ray); this second one gives the same command and cache again. The
    command runs in this process (typer's runner) to join the module's Ray instance.
    """
    from typer.testing import CliRunner

    from offline_scorer.cli import app

    summary = tmp_path / "second.json"
    args = [*gguf_ray_run["args"], *gguf_ray_run["cache"], "--backend", "ray"]
    outcome = CliRunner().invoke(app, [*args, "--summary", str(summary)])
    assert outcome.exit_code == 0, outcome.output
    first, second = gguf_ray_run["summary"], json.loads(summary.read_text())
    assert first["cache_hits"] == 0 and first["cache_misses"] > 0
    assert (second["cache_hits"], second["cache_misses"]) == (first["cache_misses"], 0)
    assert second["scorers"] == first["scorers"]


def test_cli_model_missing_on_the_workers_names_the_worker_and_the_path(
    ray_cluster: None, tmp_path: Path
) -> None:
    """``score --backend ray`` with a model path no worker has: one line, exit status 2.

    The command runs in this process (typer's runner) to join the module's Ray instance.
    """
    from typer.testing import CliRunner

    from offline_scorer.cli import app

    data = write_jsonl(tmp_path / "data.jsonl", [{"id": "a", "input": "q", "output": "a"}])
    missing = tmp_path / "no-such-model"
    args = ["score", str(data), "--backend", "ray", "--actors", "1", "--model", str(missing)]
    outcome = CliRunner().invoke(app, [*args, "--quiet"])
    assert outcome.exit_code == 2, outcome.output
    # Above it, Ray relays the worker's own log (with its traceback); ours is the last line.
    message = outcome.stderr.strip().splitlines()[-1]
    assert message.startswith("error: Ray worker "), message
    assert "does not resolve here" in message
    assert str(missing) in message and "shared filesystem" in message


def test_cli_refuses_local_only_options_with_ray(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from offline_scorer.cli import app

    data = write_jsonl(tmp_path / "data.jsonl", [{"id": "a", "input": "q"}])
    outcome = CliRunner().invoke(app, ["score", str(data), "--backend", "ray", "--agent"])
    assert outcome.exit_code == 2
    assert "need --backend local" in outcome.stderr


def test_without_ray_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ray is installed here: its absence is simulated by hiding the module."""
    monkeypatch.setitem(sys.modules, "ray", None)
    data = [{"id": "a", "input": "q", "output": "a"}]
    with pytest.raises(ConfigurationError, match=r'pip install "offline-scorer\[ray\]"'):
        run_evals(data, ["answer-relevancy"], backend="ray")


def test_rows_are_checked_before_any_actor_starts(ray_cluster: None, tmp_path: Path) -> None:
    data = write_jsonl(
        tmp_path / "data.jsonl",
        [{"id": "a", "input": "q", "output": "a"}, {"id": "b", "output": "no question"}],
    )
    with pytest.raises(DataError, match=r"(?s)1 invalid row.*id='b'.*missing 'input'"):
        run_evals(data, ["answer-relevancy"], progress=False, backend="ray")
    no_ids = write_jsonl(tmp_path / "no_ids.jsonl", [{"input": "q", "output": "a"}])
    with pytest.raises(DataError, match="give every row a unique id"):
        run_evals(no_ids, ["answer-relevancy"], progress=False, backend="ray")
    no_truth = write_jsonl(tmp_path / "no_truth.jsonl", [{"id": "a", "input": "q", "output": "a"}])
    with pytest.raises(DataError, match="answer-similarity needs a ground truth"):
        run_evals(no_truth, ["answer-similarity"], progress=False, backend="ray")
    no_output = write_jsonl(tmp_path / "no_output.jsonl", [{"id": "a", "input": "q"}])
    with pytest.raises(ConfigurationError, match=r"Rows without an output \(ids \['a'\]\)"):
        run_evals(no_output, ["answer-relevancy"], progress=False, backend="ray")


def test_options_the_ray_backend_cannot_honour_are_refused() -> None:
    data = [{"id": "a", "input": "q", "output": "a"}]
    with pytest.raises(ConfigurationError, match="takes no target"):
        run_evals(data, ["answer-relevancy"], target=str, backend="ray")
    with pytest.raises(ConfigurationError, match="needs the local backend"):
        run_evals(data, ["answer-relevancy"], fail_fast=True, backend="ray")
    with pytest.raises(ValueError, match="actors"):
        run_evals(data, ["answer-relevancy"], backend="ray", ray={"actors": 0})
    # A custom scorer under a built-in id would be rebuilt on the actors as the built-in one.
    impostor = create_scorer(id="answer-relevancy-scorer", generate_score=lambda ctx: 1.0)
    with pytest.raises(ConfigurationError, match="not a built-in scorer"):
        run_evals(data, [impostor], backend="ray")
