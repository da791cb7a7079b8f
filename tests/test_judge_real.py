"""The transformers judge with the REAL embedded model (no mocks of transformers/Outlines)."""

from __future__ import annotations

import json
import math
import socket
from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel, Field

from offline_scorer import (
    CachedJudge,
    ConfigurationError,
    ContextLengthError,
    GenerationSettings,
    JudgeConfig,
    JudgeOutputError,
    RecordingJudge,
    ReplayJudge,
    TransformersJudge,
    load_model,
)
from offline_scorer.judges import outcomes, values

pytestmark = pytest.mark.slow

ITEMS = ["banana", "carrot", "a granite rock", "strawberry", "broccoli"]


class Food(BaseModel):
    kind: Literal["fruit", "vegetable", "other"]
    colors: list[str] = Field(max_length=3)


def prompt(item: str) -> list[dict[str, str]]:
    return [
        {
            "role": "system",
            "content": "Classify the item as fruit, vegetable or other and list its usual colours.",
        },
        {"role": "user", "content": item},
    ]


def test_batch_returns_valid_objects_and_equals_one_by_one(judge: TransformersJudge) -> None:
    batched = values(judge.generate_json([prompt(item) for item in ITEMS], Food))
    assert len(batched) == len(ITEMS)
    assert all(isinstance(result, Food) for result in batched)
    call = judge.call_log[-1]
    assert call.kind == "json" and len(call.items) == len(ITEMS)
    assert all(item.prompt_tokens > 0 and item.generated_tokens > 0 for item in call.items)
    one_by_one = [values(judge.generate_json([prompt(item)], Food))[0] for item in ITEMS]
    assert one_by_one == batched


def test_per_prompt_schemas_in_one_batch(judge: TransformersJudge) -> None:
    class Three(BaseModel):
        words: list[str] = Field(min_length=3, max_length=3)

    class One(BaseModel):
        words: list[str] = Field(min_length=1, max_length=1)

    prompts = [prompt("list three words"), prompt("list one word")]
    three, one = values(judge.generate_json(prompts, [Three, One]))
    assert len(three.words) == 3 and len(one.words) == 1


def test_empty_prompt_list(judge: TransformersJudge) -> None:
    assert values(judge.generate_json([], Food)) == []
    assert values(judge.generate_text([])) == []


def test_text_generation_is_bounded_and_uses_prefill(judge: TransformersJudge) -> None:
    messages = prompt("banana") + [{"role": "assistant", "content": "The banana is"}]
    (text,) = values(judge.generate_text([messages]))
    assert text.startswith("The banana is")
    assert judge.call_log[-1].items[0].generated_tokens <= judge.settings.max_new_tokens_text


def test_second_load_uses_converted_copy(judge: TransformersJudge) -> None:
    again = load_model("smollm2-135m-instruct")
    assert again.from_converted_cache
    assert again.fingerprint == judge.fingerprint


def test_prompt_longer_than_context_is_a_clear_error(judge: TransformersJudge) -> None:
    long_prompt = prompt("word " * 9000)
    with pytest.raises(ContextLengthError, match="context window of 8192"):
        values(judge.generate_json([long_prompt], Food))
    results = outcomes(judge.generate_json([long_prompt, prompt("banana")], Food))
    assert isinstance(results[0], ContextLengthError) and isinstance(results[1], Food)


def test_budget_exhausted_before_json_closes(judge: TransformersJudge) -> None:
    tight = TransformersJudge(judge.load(), settings=GenerationSettings(max_new_tokens_json=16))

    class Long(BaseModel):
        sentences: list[str] = Field(min_length=6)

    with pytest.raises(JudgeOutputError, match="budget of 16 tokens"):
        values(tight.generate_json([prompt("write six sentences")], Long))


def test_strings_are_closed_at_their_token_cap(judge: TransformersJudge) -> None:
    """A loop of one-character tokens (digits) is cut by max_string_tokens, not only by chars."""
    capped = TransformersJudge(
        judge.load(), settings=GenerationSettings(max_string_tokens=12, max_string_chars=1000)
    )

    class Digits(BaseModel):
        number: str

    ask = [
        {"role": "system", "content": "Answer in JSON."},
        {"role": "user", "content": "Write the digits 1234567890 ten times in a row, no spaces."},
    ]
    result = values(capped.generate_json([ask], Digits))[0]
    tokenizer = judge.load().tokenizer
    # The opening token may carry the quote and a first character; 12 more at most follow.
    assert len(tokenizer(result.number, add_special_tokens=False)["input_ids"]) <= 13
    assert capped.call_log[-1].generated_tokens <= 24


def test_load_and_generate_with_every_socket_blocked(
    judge: TransformersJudge, monkeypatch: pytest.MonkeyPatch
) -> None:
    attempts: list[object] = []

    def refuse(self: socket.socket, address: object) -> None:
        attempts.append(address)
        raise OSError(f"network access attempted: {address}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    fresh = TransformersJudge(load_model())  # a new load, from the converted copy
    (result,) = values(fresh.generate_json([prompt("banana")], Food))
    assert isinstance(result, Food)
    assert values(fresh.generate_text([prompt("banana")]))[0]
    assert attempts == []


def test_no_layer_is_swapped_for_a_hub_kernel(judge: TransformersJudge) -> None:
    """transformers >= 5 kernelizes a model by default when the kernels package is there: on
    a CUDA GPU it downloads layers from the Hub, and offline the load fails (seen on an H200,
    2026-12-04). On this CPU no kernel is fetched, but the switch was on all the same."""
    from transformers.integrations.hub_kernels import _kernels_enabled

    assert judge.load().model.use_kernels is False
    assert not _kernels_enabled()  # USE_HUB_KERNELS=NO, one of force_offline's switches


# ----------------------------------------------------------------- label probabilities

RELEVANCE = ("yes", "unsure", "no")
MATCH = ("exact", "semantic", "partial", "missing")


def verdict_prompt(question: str, answer: str) -> list[dict[str, str]]:
    """A verdict prompt whose assistant prefill stops right where the label goes."""
    return [
        {
            "role": "system",
            "content": "Does the answer address the question? Reply yes, unsure or no.",
        },
        {"role": "user", "content": f"Question: {question}\nAnswer: {answer}"},
        {"role": "assistant", "content": '{"result":"'},
    ]


VERDICT_PROMPTS = [
    verdict_prompt("Who wrote Hamlet?", "Shakespeare."),
    verdict_prompt("How do I boil an egg?", "The stock market fell yesterday " * 8),
    verdict_prompt("What is 2 + 2?", "Four"),
    verdict_prompt(
        "Why is the sky blue?",
        "Sunlight is scattered by the molecules of the air, and blue light, with its shorter "
        "wavelength, is scattered much more than red light, so the sky looks blue.",
    ),
    verdict_prompt("Capital of France?", "Paris, a city on the Seine " * 3),
]


def test_the_multi_token_labels_are_multi_token(judge: TransformersJudge) -> None:
    """The premise of the tests below: two of the labels take two tokens in this tokenizer."""
    tokenizer = judge.load().tokenizer
    lengths = {
        label: len(tokenizer(label, add_special_tokens=False)["input_ids"])
        for label in RELEVANCE + MATCH
    }
    assert {label for label, count in lengths.items() if count > 1} == {"unsure", "semantic"}


def test_label_probabilities_sum_to_one_over_the_allowed_labels(judge: TransformersJudge) -> None:
    prompts = VERDICT_PROMPTS[:2]
    results = judge.score_labels(prompts, [RELEVANCE, MATCH])
    for answer, labels in zip(results, (RELEVANCE, MATCH)):
        scores = answer.value
        assert scores.labels == labels
        assert sum(scores.probabilities.values()) == pytest.approx(1.0, abs=1e-9)
        # Real log-probabilities of continuations that exclude each other (no label's
        # tokens start another's): each is below 0 and together they hold at most all.
        assert all(value < 0 for value in scores.logprobs)
        assert 0 < sum(math.exp(value) for value in scores.logprobs) <= 1 + 1e-3
        assert answer.usage.prompt_tokens > 0 and answer.usage.generated_tokens == 0
    assert judge.call_log[-1].kind == "labels"


def test_an_item_alone_and_at_every_place_in_a_batch_gives_the_same_scores(
    judge: TransformersJudge,
) -> None:
    alone = [values(judge.score_labels([p], RELEVANCE))[0] for p in VERDICT_PROMPTS]
    count = len(VERDICT_PROMPTS)
    for shift in range(count):  # every item visits every position
        order = [(shift + k) % count for k in range(count)]
        batch = values(judge.score_labels([VERDICT_PROMPTS[i] for i in order], RELEVANCE))
        assert batch == [alone[i] for i in order], shift


def test_a_multi_token_label_is_the_sum_of_its_tokens_log_probs(judge: TransformersJudge) -> None:
    """Compared with one plain forward pass over the prompt and the whole label."""
    import torch

    loaded = judge.load()
    tokenizer, model = loaded.tokenizer, loaded.model
    prompt = VERDICT_PROMPTS[0]
    for labels, label in ((RELEVANCE, "unsure"), (MATCH, "semantic"), (RELEVANCE, "yes")):
        (scores,) = values(judge.score_labels([prompt], labels))
        text = tokenizer.apply_chat_template(prompt, tokenize=False, continue_final_message=True)
        prompt_ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        label_ids = tokenizer(label, add_special_tokens=False)["input_ids"]
        with torch.inference_mode():
            logits = model(torch.tensor([prompt_ids + label_ids])).logits[0].float()
        table = torch.log_softmax(logits, dim=-1)
        # The distribution of token k of the label is read after everything before it.
        by_hand = [
            float(table[len(prompt_ids) - 1 + k, token]) for k, token in enumerate(label_ids)
        ]
        assert scores.logprobs[labels.index(label)] == pytest.approx(sum(by_hand), abs=2e-4)
        if len(label_ids) > 1:
            assert sum(by_hand) < by_hand[0] - 1e-6  # the later tokens do count


def test_reads_from_the_shared_system_block_equal_full_reads(judge: TransformersJudge) -> None:
    """The shipped verdict prompts: with the prefix store a read runs only its own tokens,
    and gives the full pass's log-probabilities up to the last bits (stated: 3e-4)."""
    from dataclasses import replace

    from offline_scorer.judges.transformers._kvcache import PrefixStore
    from offline_scorer.toolkit import render_prompt

    prompts = [
        render_prompt("answer-similarity", "en", "verdict", {"ground_truth_unit": q, "output": s})
        for q, s in (
            ("Who wrote Hamlet?", "Shakespeare wrote it around 1600."),
            ("How do I boil an egg?", "Stock markets fell sharply on Monday."),
            ("Why is the sky blue?", "Air scatters blue light more than red light."),
        )
    ]
    prompts = [
        [*prompt[:-1], {"role": "assistant", "content": '{"result":"'}] for prompt in prompts
    ]
    full = TransformersJudge(judge.load(), settings=GenerationSettings(prefix_cache=False))
    fresh = TransformersJudge(replace(judge.load(), prefixes=PrefixStore()))  # an empty store
    with_prefix = fresh.score_labels(prompts, RELEVANCE)
    without = full.score_labels(prompts, RELEVANCE)
    stored = fresh.load().prefixes
    # One computation serves the call's every row; a later call finds it in the store.
    assert len(stored) == 1 and stored.misses == 1 and stored.hits == 0
    fresh.score_labels(prompts[:1], RELEVANCE)
    assert stored.misses == 1 and stored.hits == 1
    for shared, alone in zip(with_prefix, without, strict=True):
        assert shared.value.labels == alone.value.labels
        for a, b in zip(shared.value.logprobs, alone.value.logprobs, strict=True):
            assert a == pytest.approx(b, abs=3e-4)
        # The system block (dozens of tokens) is not run again for each verdict.
        assert shared.usage.prompt_tokens < alone.usage.prompt_tokens - 30


def test_a_bfloat16_load_keeps_a_bfloat16_copy_and_no_float32_one(
    judge: TransformersJudge,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """The converted cache holds the dtype the model runs in: a bfloat16 load of the
    embedded GGUF, in a fresh cache folder, writes a bfloat16 copy of half the float32
    copy's size, holding the float32 weights rounded to bfloat16, and no float32 copy; the
    next bfloat16 load reads that copy. (The session's float32 copy is the comparison.)
    The conversion says nothing through transformers: our one log line speaks for it."""
    import torch
    from safetensors import safe_open

    from offline_scorer.judges._cards import get_model_card
    from offline_scorer.judges.transformers._gguf import converted_folder

    float32_folder = judge.load().model.name_or_path
    sha = get_model_card("smollm2-135m-instruct").source.sha256
    assert sha is not None
    monkeypatch.setenv("OFFLINE_SCORER_CACHE", str(tmp_path))
    capfd.readouterr()
    first = load_model("smollm2-135m-instruct", dtype="bfloat16")
    said = capfd.readouterr()
    assert "transformers" not in said.out + said.err, said
    folder = converted_folder(sha, "bfloat16")
    assert first.dtype == "bfloat16" and not first.from_converted_cache
    assert folder.name == f"{sha}+bfloat16" and (folder / "offline_scorer.json").is_file()
    assert not converted_folder(sha).exists()  # no float32 copy beside it
    assert json.loads((folder / "offline_scorer.json").read_text())["dtype"] == "bfloat16"
    sizes = [
        sum(f.stat().st_size for f in Path(place).glob("*.safetensors"))
        for place in (folder, float32_folder)
    ]
    assert 0.45 < sizes[0] / sizes[1] < 0.55
    with (
        safe_open(next(folder.glob("*.safetensors")), "pt") as half,
        safe_open(next(Path(float32_folder).glob("*.safetensors")), "pt") as full,
    ):
        names = sorted(half.keys())
        assert names == sorted(full.keys())
        for name in names:
            tensor = half.get_tensor(name)
            assert tensor.dtype == torch.bfloat16, name
            assert torch.equal(tensor, full.get_tensor(name).to(torch.bfloat16)), name
    again = load_model("smollm2-135m-instruct", dtype="bfloat16")
    assert again.from_converted_cache and again.fingerprint == first.fingerprint


def test_reads_run_alone_on_a_cpu_and_stacked_on_an_accelerator_by_default() -> None:
    settings = GenerationSettings(batch_size=6)
    assert settings.reads_per_pass("cpu") == 1
    assert settings.reads_per_pass("cuda:0") == settings.reads_per_pass("mps") == 6
    forced = GenerationSettings(batch_size=6, read_batch_size=3)
    assert forced.reads_per_pass("cpu") == forced.reads_per_pass("cuda") == 3
    with pytest.raises(ConfigurationError, match="read_batch_size"):
        JudgeConfig.from_options(read_batch_size=0)


def test_prompts_per_pass_follow_the_card_and_the_device() -> None:
    from offline_scorer.judges import list_model_cards

    card = next(c for c in list_model_cards() if c.name == "qwen2.5-coder-1.5b-instruct")
    default = GenerationSettings()
    assert default.prompts_per_pass("cpu", card) == card.recommended_batch_size == 8
    assert default.prompts_per_pass("cuda:0", card) == card.recommended_accelerator_batch_size
    assert card.recommended_accelerator_batch_size == 64
    assert default.reads_per_pass("cuda", card) == 64 and default.reads_per_pass("cpu", card) == 1
    assert default.prompts_per_pass("cpu") == 8 and default.prompts_per_pass("mps") == 64  # no card
    named = GenerationSettings(batch_size=5)
    assert named.prompts_per_pass("cpu", card) == named.prompts_per_pass("cuda", card) == 5


def test_batched_reads_equal_one_by_one_reads(judge: TransformersJudge) -> None:
    """Reads stacked into passes of 4 rows (sorted by length, left-padded after the cached
    system block) give each read's log-probabilities as a pass of its own gives them, to
    the rounding stated: at most one unit of the 4th decimal apart, the same labels and the
    same most likely label; the hidden state too, to 1e-3. And they really share passes."""
    from offline_scorer.toolkit import render_prompt

    pairs = (
        ("Who wrote Hamlet?", "Shakespeare wrote it around 1600."),
        ("How do I boil an egg?", "Stock markets fell sharply on Monday."),
        (
            "Why is the sky blue?",
            "Air scatters blue light more than red light, so the sky "
            "looks blue in the day and red or orange near sunset, when light crosses more air.",
        ),
        ("What is 2 + 2?", "4."),
        ("Where is Lima?", "Lima is the capital of Peru, on the Pacific coast."),
        ("Can cats see in the dark?", "Cats see well in dim light but not in total darkness."),
    )
    prompts = [
        render_prompt("answer-similarity", "en", "verdict", {"ground_truth_unit": q, "output": s})
        for q, s in pairs
    ]
    prompts = [
        [*prompt[:-1], {"role": "assistant", "content": '{"result":"'}] for prompt in prompts
    ]
    loaded = judge.load()
    alone = TransformersJudge(loaded, settings=GenerationSettings(read_batch_size=1))
    stacked = TransformersJudge(loaded, settings=GenerationSettings(read_batch_size=4))
    alone.score_labels(prompts[:1], RELEVANCE)  # the system block is in the store from here
    passes: list[int] = []
    hook = loaded.model.register_forward_hook(
        lambda _module, _args, kwargs, _output: passes.append(kwargs["input_ids"].shape[0]),
        with_kwargs=True,
    )
    try:
        one_by_one = alone.score_labels(prompts, RELEVANCE, hidden_state=True)
        alone_passes, passes[:] = list(passes), []
        batched = stacked.score_labels(prompts, RELEVANCE, hidden_state=True)
    finally:
        hook.remove()
    # Six rows: one pass each alone; 4 + 2 stacked (the system block is a cached prefix).
    assert alone_passes == [1] * 6 and sorted(passes) == [2, 4]
    for single, many in zip(one_by_one, batched, strict=True):
        assert single.value.labels == many.value.labels
        for a, b in zip(single.value.logprobs, many.value.logprobs, strict=True):
            assert abs(a - b) <= 1e-4 + 1e-9
        argmax = lambda v: max(range(len(v)), key=v.__getitem__)  # noqa: E731
        assert argmax(single.value.logprobs) == argmax(many.value.logprobs)
        assert single.value.hidden == pytest.approx(many.value.hidden, abs=1e-3)
        assert many.usage.prompt_tokens == single.usage.prompt_tokens


def test_a_prompt_too_long_for_the_context_is_an_error_in_the_list(
    judge: TransformersJudge,
) -> None:
    too_long = verdict_prompt("Is this long?", "word " * 9000)
    with pytest.raises(ContextLengthError, match="context window of 8192"):
        values(judge.score_labels([too_long], RELEVANCE))
    results = outcomes(judge.score_labels([too_long, VERDICT_PROMPTS[0]], RELEVANCE))
    assert isinstance(results[0], ContextLengthError)
    assert results[1] == values(judge.score_labels([VERDICT_PROMPTS[0]], RELEVANCE))[0]


def test_the_result_cache_serves_label_scores_without_the_model(
    judge: TransformersJudge, tmp_path: Path
) -> None:
    cached = CachedJudge(judge, tmp_path / "cache.sqlite")
    prompts = VERDICT_PROMPTS[:2]
    first = values(cached.score_labels(prompts, [RELEVANCE, MATCH]))
    calls = judge.usage_totals.calls
    again = cached.score_labels(prompts, [RELEVANCE, MATCH])
    assert [answer.value for answer in again] == first
    assert all(answer.usage.cached for answer in again)
    assert judge.usage_totals.calls == calls  # the model was not asked


def test_replay_gives_back_what_was_recorded_for_labels(
    judge: TransformersJudge, tmp_path: Path
) -> None:
    path = tmp_path / "labels.json"
    recorder = RecordingJudge(judge, path)
    prompts = VERDICT_PROMPTS[:2]
    recorded = values(recorder.score_labels(prompts, [RELEVANCE, MATCH]))
    with_hidden = values(recorder.score_labels(prompts[:1], RELEVANCE, hidden_state=True))
    replay = ReplayJudge(path)
    assert replay.fingerprint == judge.fingerprint
    assert values(replay.score_labels(prompts, [RELEVANCE, MATCH])) == recorded
    assert values(replay.score_labels(prompts[:1], RELEVANCE, hidden_state=True)) == with_hidden
    assert with_hidden[0].hidden is not None
