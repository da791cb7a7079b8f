"""Defects fixed by the judge refactor, pinned so they cannot come back.

Each test says what the old behaviour was; each fails on it.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from offline_scorer import CachedJudge, Judge, PromptStep, StepContext, create_scorer, run_evals
from offline_scorer.judges._protocol import CALL_LOG_SIZE
from offline_scorer.testing import FakeJudge

# ----------------------------------------------------------------- score --agent loads once


@pytest.mark.slow
def test_score_with_agent_loads_the_model_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``score --agent`` loads the weights once, with the options given on the command line.

    Old behaviour: the agent built its own judge with the default load options, ignoring
    --device/--dtype/--allow-pickle, so the same model was loaded twice (once for the
    scorers with ``--device cpu``, once for the agent with ``device="auto"``).

    The spy wraps the real loader (the model really loads). The registries of shared judges
    and loaded models start empty, as in a fresh ``offline-scorer`` process: otherwise a judge built by an
    earlier test could answer without loading and hide a second load.
    """
    from typer.testing import CliRunner

    from offline_scorer.cli import app
    from offline_scorer.judges import _factory
    from offline_scorer.judges.transformers import _loading

    loads: list[dict[str, Any]] = []
    real_load_model = _loading.load_model

    def counting_load_model(*args: Any, **kwargs: Any) -> Any:
        loads.append(kwargs)
        return real_load_model(*args, **kwargs)

    monkeypatch.setattr(_loading, "load_model", counting_load_model)
    monkeypatch.setattr(_loading, "_MODELS", {})  # no model shared from an earlier test
    monkeypatch.setattr(_factory, "_JUDGES", {})
    rows = [
        {"id": "hot", "input": "In one word: what is the opposite of hot?"},
        {"id": "legs", "input": "In one word: how many legs does a spider have?"},
    ]
    data = tmp_path / "questions.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    out = tmp_path / "results.jsonl"
    args = ["score", str(data), "--agent", "--device", "cpu", "--no-cache", "--quiet"]
    args += ["--scorer", "answer-relevancy", "--batch-size", "2", "--out", str(out)]
    sigterm = signal.getsignal(signal.SIGTERM)  # the command installs its own handler
    try:
        outcome = CliRunner().invoke(app, args)
    finally:
        signal.signal(signal.SIGTERM, sigterm)
    assert outcome.exit_code == 0, outcome.output
    assert len(loads) == 1, loads
    assert loads[0]["device"] == "cpu"
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [line["item_id"] for line in lines] == ["hot", "legs"]
    assert all(line["output"] and line["target_error"] is None for line in lines)


# ----------------------------------------------------------------- bounded call log


class Summary(BaseModel):
    gist: str


def _render(ctx: StepContext) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": "Summarise the answer."},
        {"role": "user", "content": ctx.output_text},
    ]


def _summary_scorer(judge: Judge, *, reason: bool = True) -> Any:
    """A custom scorer: the judge writes a gist (JSON), then a reason (free text)."""
    return create_scorer(
        id="gist",
        judge=judge,
        analyze=PromptStep(_render, schema=Summary),
        generate_score=lambda ctx: min(1.0, len(ctx.analyze_result["gist"]) / 100),
        generate_reason=PromptStep(_render) if reason else None,
    )


def _gist(prompt: Any, schema: type[BaseModel]) -> dict[str, str]:
    return {"gist": prompt[-1]["content"].upper()}


def _reason(prompt: Any) -> str:
    return "Reason: " + prompt[-1]["content"]


def test_the_call_log_stays_bounded_over_a_long_run(tmp_path: Path) -> None:
    """200 calls: every call is counted, only the last 64 are remembered.

    Old behaviour: each judge (the transformers judge, the result cache, the replay judge)
    appended every call to a plain list that was never trimmed, so a long
    ``keep_items=False`` run, promised flat memory, grew by one entry per call.
    """
    judge = FakeJudge(json={Summary: _gist}, keep_requests=False)
    scorer = _summary_scorer(judge, reason=False)
    for number in range(200):
        assert scorer.run(output=f"answer {number}").ok
    assert len(judge.call_log) <= CALL_LOG_SIZE
    assert judge.usage_totals.calls == 200 and judge.usage_totals.prompts == 200

    inner = FakeJudge(json={Summary: _gist}, text=_reason, keep_requests=False)
    cached = CachedJudge(inner, tmp_path / "cache.sqlite")
    rows = [{"input": "q", "output": f"answer {n}"} for n in range(100)]
    result = run_evals(
        rows, [_summary_scorer(cached)], batch_size=1, keep_items=False, progress=False
    )
    assert result.summary.scorers["gist"].scored == 100
    assert len(cached.call_log) <= CALL_LOG_SIZE and len(inner.call_log) <= CALL_LOG_SIZE
    assert cached.usage_totals.calls == inner.usage_totals.calls == 200  # 2 steps x 100 items


# ----------------------------------------------------------------- usage per thread


@pytest.mark.parametrize("cached", [False, True], ids=["shared-judge", "cache-per-thread"])
def test_threads_sharing_a_judge_each_get_their_own_usage(cached: bool, tmp_path: Path) -> None:
    """Every result's token counts are those of its own prompt and answer.

    Old behaviour: the pipeline and the result cache read an answer's usage back from
    ``judge.call_log[-1]``; with two threads sharing a judge, the last call in the log was
    sometimes the other thread's, so a result carried the other thread's token counts.
    The second case gives each thread its own result cache in front of the shared judge,
    which is how the cache read the shared judge's log.

    To make the race happen often, two threads score 1,000 runs each in tight loops with
    a very short thread switch interval. (A barrier inside the scripted answer was measured
    to do worse: it puts the threads in lockstep, and the thread woken by the barrier
    always lags behind.) Measured against judges that read usage back from the log the old
    way: 30 to 55 of the 2,000 results got the other thread's numbers in the first case,
    4 to 7 in the second (its sqlite writes serialise the threads).
    """
    fake = FakeJudge(json={Summary: _gist}, text=_reason, keep_requests=False)
    # Thread 0's answers are short and thread 1's long: their token counts differ.
    words = {0: "tiny answer", 1: "a much longer answer with many more words in it " * 6}
    results: dict[int, list[Any]] = {0: [], 1: []}

    def work(thread: int) -> None:
        judge = CachedJudge(fake, tmp_path / f"cache-{thread}.sqlite") if cached else fake
        scorer = _summary_scorer(judge)
        for number in range(1000):
            output = f"{number} {words[thread]}"
            results[thread].extend(scorer.run_batch([{"input": "q", "output": output}]))

    threads = [threading.Thread(target=work, args=(n,)) for n in (0, 1)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
    finally:
        sys.setswitchinterval(interval)
    assert [len(outcome) for outcome in results.values()] == [1000, 1000]
    wrong = [r for outcome in results.values() for r in outcome if not _has_own_usage(r)]
    assert not wrong, f"{len(wrong)} results carry another run's usage, e.g. {wrong[0].steps}"
    assert fake.usage_totals.calls == 4000


def _has_own_usage(result: Any) -> bool:
    assert result.ok, result.error
    prompt_tokens = sum(len(m["content"]) for m in result.analyze_prompt) // 4
    gist = json.dumps(_gist([{"content": result.output}], Summary), ensure_ascii=False)
    analyze, reason = result.steps["analyze"], result.steps["generate_reason"]
    return (
        analyze.prompt_tokens == reason.prompt_tokens == prompt_tokens
        and analyze.generated_tokens == len(gist) // 4
        and reason.generated_tokens == len(_reason([{"content": result.output}])) // 4
    )
