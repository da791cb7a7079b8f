"""Verdict models that read the judge: its read of the whole item joins the evidence.

The real embedded model stands in for a card's judge: a card named ``reads-test`` (the
embedded card's weights, a verdict file whose inputs include ``read_*``) is written to a
temporary models folder and the session's loaded model is presented under that name, so
the scorers run the whole path - one label read per verdict through transformers, the
evidence, the fitted regression - with nothing mocked.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from offline_scorer import (
    GenerationSettings,
    TransformersJudge,
    create_answer_relevancy_scorer,
    create_answer_similarity_scorer,
)
from offline_scorer.judges import _cards
from offline_scorer.judges.embeddings import shared_embedder
from offline_scorer.judges.transformers._kvcache import PrefixStore
from offline_scorer.scorers import _verdicts
from offline_scorer.scorers._similarity_read import whole_reference
from offline_scorer.scorers._verdicts import SIMILARITY_LABELS
from offline_scorer.toolkit import (
    read_features,
    relevancy_inputs,
    render_prompt,
    similarity_inputs,
    template_sha256,
)

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
CARD = "reads-test"
RELEVANCY_PROMPT = "answer-relevancy/en/context.jinja"
SIMILARITY_PROMPT = "answer-similarity/en/match.jinja"


def logistic(classes: list[str], features: list[str], weights: list[list[float]]) -> dict:
    return {
        "kind": "logistic",
        "classes": classes,
        "features": features,
        "means": [0.0] * len(features),
        "scales": [1.0] * len(features),
        "weights": weights,
        "intercepts": [0.0] * len(classes),
        "l2": 1.0,
    }


def scorer_model(model: dict, template: str | None, labels: list[str]) -> dict:
    """A verdict file's entry for one scorer, reading the judge with ``template`` (or not)."""
    prompts = {}
    if template is not None:
        scorer, step = template.split("/")
        name = f"{scorer}/en/{step}.jinja"
        prompts[name] = template_sha256(name)
    return {
        "model": model,
        "scoring": "expected",
        "embedder": "all-minilm-l6-v2",
        "read": {"template": template, "labels": labels} if template else None,
        "stamp": {
            "language": "en",
            "prompts": prompts,
            "backend": "transformers" if template else None,
            "dtype": "float32" if template else None,
            "pool": "test",
        },
        "fit": {},
    }


RELEVANCY = logistic(
    ["no", "unsure", "yes"],
    ["cos", "read_yes", "read_no"],
    [[0.0, 0.0, 0.0], [1.0, 0.5, -0.5], [2.0, 1.5, -1.0]],
)
SIMILARITY = logistic(
    ["missing", "partial", "semantic", "exact"],
    ["cos", "read_yes"],
    [[0.0, 0.0], [1.0, 0.3], [2.0, 0.9], [3.0, 1.5]],
)
VERDICTS = {
    "format": "offline-scorer-verdicts/2",
    "card": CARD,
    "relevancy": scorer_model(RELEVANCY, "answer-relevancy/context", ["yes", "unsure", "no"]),
    "similarity": scorer_model(SIMILARITY, "answer-similarity/match", ["yes", "no"]),
}


@pytest.fixture
def reads_card(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    return write_card(tmp_path, monkeypatch, VERDICTS)


def write_card(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, verdicts: dict) -> str:
    """A card named ``reads-test`` with this verdict file, in a temporary models folder."""
    models = tmp_path / "models"
    shutil.copytree(ROOT / "models", models)
    text = json.dumps(verdicts)
    (models / f"{CARD}.verdicts.json").write_text(text)
    card = (models / "smollm2-135m-instruct.toml").read_text()
    card = card.replace('name = "smollm2-135m-instruct"', f'name = "{CARD}"')
    head, _, tail = card.partition("[verdicts]")
    tail = tail[tail.index("\n[") :] if "\n[" in tail else ""
    digest = hashlib.sha256(text.encode()).hexdigest()
    card = f'{head}[verdicts]\nfile = "{CARD}.verdicts.json"\nsha256 = "{digest}"\n{tail}'
    (models / f"{CARD}.toml").write_text(card)
    monkeypatch.setattr(_cards, "data_folder", lambda name: models)
    real = _verdicts.data_folder
    monkeypatch.setattr(
        _verdicts, "data_folder", lambda name: models if name == "models" else real(name)
    )
    _verdicts._load.cache_clear()
    return CARD


def on_card(judge: TransformersJudge, card: str) -> TransformersJudge:
    """The session's loaded embedded model, presented as ``card`` (no second load)."""
    return TransformersJudge(replace(judge.load(), model_id=card))


def label_calls(judge: TransformersJudge) -> list[int]:
    return [len(call.items) for call in judge.call_log if call.kind == "labels"]


QUESTION = "How many legs does a spider have?"
ANSWER = "A spider has eight legs. Stock markets fell sharply on Monday."


def context_prompts(statements: list[str]) -> list[Any]:
    """The relevancy reads of ANSWER's statements, as the card's model takes them."""
    shown = {"input": QUESTION, "output": ANSWER}
    return [
        render_prompt("answer-relevancy", "en", "context", {**shown, "statement": s})
        for s in statements
    ]


def test_relevancy_reads_each_statement_with_the_whole_answer_in_view(
    reads_card: str, judge: TransformersJudge
) -> None:
    judge = on_card(judge, reads_card)
    scorer = create_answer_relevancy_scorer(judge=judge, scale=1)
    result = scorer.run(input=QUESTION, output=ANSWER)
    statements = result.preprocess_step_result["statements"]
    assert len(statements) == 2
    assert label_calls(judge) == [2]  # one read per statement
    prompts = context_prompts(statements)
    # Each prompt shows the whole answer, then names its statement in a message of its own.
    for prompt, statement in zip(prompts, statements, strict=True):
        assert ANSWER in prompt[1]["content"]
        assert prompt[2]["role"] == "user" and statement in prompt[2]["content"]
    assert prompts[0][:2] == prompts[1][:2]
    reads = [a.value for a in judge.score_labels(prompts, ["yes", "unsure", "no"])]
    evidence = relevancy_inputs(
        ["cos"], shared_embedder("all-minilm-l6-v2"), QUESTION, statements, ANSWER
    )
    model = _verdicts.LogisticModel.model_validate(RELEVANCY)
    for verdict, inputs, read in zip(
        result.analyze_step_result["results"], evidence, reads, strict=True
    ):
        expected = model.probabilities({**inputs, **read_features(read.labels, read.logprobs)})
        assert verdict["probabilities"] == {k: expected[k] for k in ("yes", "unsure", "no")}


def test_the_reads_of_one_item_share_its_prefix_and_read_as_a_full_pass_does(
    judge: TransformersJudge,
) -> None:
    statements = ["A spider has eight legs.", "Stock markets fell sharply on Monday."]
    prompts = context_prompts(statements)
    encoded = [judge._encode(i, p) for i, p in enumerate(prompts)]
    # The shared part is the system block and the item: longer than the system block, the
    # same tokens for both reads, and a prefix of each.
    assert encoded[0].item_prefix > encoded[0].prefix > 0
    assert encoded[0].item_prefix == encoded[1].item_prefix
    length = encoded[0].item_prefix
    assert encoded[0].token_ids[:length] == encoded[1].token_ids[:length]
    fresh = TransformersJudge(replace(judge.load(), prefixes=PrefixStore()))  # an empty store
    cached = [a.value for a in fresh.score_labels(prompts, ["yes", "unsure", "no"])]
    store = fresh.load().prefixes
    assert store.misses == 1 and len(store) == 1  # the item's prefix, once for both reads
    plain = TransformersJudge(judge.load(), settings=GenerationSettings(prefix_cache=False))
    full = [a.value for a in plain.score_labels(prompts, ["yes", "unsure", "no"])]
    for a, b in zip(cached, full, strict=True):
        assert a.logprobs == pytest.approx(b.logprobs, abs=2e-3)


def test_a_one_unit_reference_is_read_as_the_whole_item(
    reads_card: str, judge: TransformersJudge
) -> None:
    judge = on_card(judge, reads_card)
    scorer = create_answer_similarity_scorer(judge=judge, scale=1)
    output = "Paris is the capital of France. The Seine flows through it."
    reference = "The capital of France is Paris."
    result = scorer.run(input="Capital?", output=output, ground_truth=reference)
    assert len(result.preprocess_step_result["ground_truth_units"]) == 1
    assert label_calls(judge) == [1]
    shown = {"question": "Capital?", "reference": reference, "output": output, "unit": ""}
    prompt = render_prompt("answer-similarity", "en", "match", shown)
    assert [m["role"] for m in prompt] == ["system", "user", "assistant"]  # no unit named
    (read,) = [a.value for a in judge.score_labels([prompt], ["yes", "no"])]
    units = result.preprocess_step_result
    table = similarity_inputs(
        ["cos"],
        shared_embedder("all-minilm-l6-v2"),
        [[u] for u in units["ground_truth_units"]],
        units["output_units"],
    )
    model = _verdicts.LogisticModel.model_validate(SIMILARITY)
    (match,) = result.analyze_step_result["matches"]
    cells = [
        model.probabilities({**c, **read_features(read.labels, read.logprobs)}) for c in table[0]
    ]
    assert match["probabilities"] in [{k: p[k] for k in SIMILARITY_LABELS} for p in cells]


def test_each_unit_of_a_longer_reference_is_named_in_its_own_read(
    reads_card: str, judge: TransformersJudge
) -> None:
    judge = on_card(judge, reads_card)
    scorer = create_answer_similarity_scorer(judge=judge, scale=1)
    reference = "Paris is the capital of France. The Seine flows through Paris."
    result = scorer.run(
        input="Capital and river?", output="Paris, on the Seine.", ground_truth=reference
    )
    units = result.preprocess_step_result["ground_truth_units"]
    assert len(units) == 2
    assert label_calls(judge) == [2]
    for match in result.analyze_step_result["matches"]:
        assert sum(match["probabilities"].values()) == pytest.approx(1.0, abs=1e-3)
    shown = {"question": "Q", "reference": reference, "output": "A", "unit": units[1]}
    prompt = render_prompt("answer-similarity", "en", "match", shown)
    assert prompt[2]["role"] == "user" and units[1] in prompt[2]["content"]
    assert whole_reference(["Paris ", "", "City of Light"]) == "Paris / City of Light"


def test_a_model_without_a_read_makes_no_judge_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, judge: TransformersJudge
) -> None:
    evidence_only = {
        **VERDICTS,
        "relevancy": scorer_model(
            logistic(["no", "unsure", "yes"], ["cos"], [[0.0], [1.0], [2.0]]), None, []
        ),
    }
    judge = on_card(judge, write_card(tmp_path, monkeypatch, evidence_only))
    result = create_answer_relevancy_scorer(judge=judge).run(input=QUESTION, output=ANSWER)
    assert result.status == "scored"
    assert label_calls(judge) == []


def test_read_features_are_log_probabilities_renormalised_over_the_labels() -> None:
    features = read_features(["yes", "unsure", "no"], [-0.5, -1.5, -40.0])
    assert features["read_no"] == -12.0  # floored
    total = sum(2.718281828459045**v for v in (features["read_yes"], features["read_unsure"]))
    assert total == pytest.approx(1.0, abs=1e-3)
