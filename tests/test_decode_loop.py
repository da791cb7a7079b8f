"""Our decode loop gives the same outputs as transformers' ``generate`` (issue 14).

Real parts throughout: the embedded model, its tokenizer and chat template, real Outlines
indexes and guides, the real scorers. Each test compares two ways of decoding the same
prompts; greedy decoding makes them comparable token for token.
"""

from __future__ import annotations

from typing import Any, Literal

import pytest
from pydantic import BaseModel, Field

from offline_scorer import GenerationSettings, TransformersJudge, get_scorer
from offline_scorer.judges import values
from offline_scorer.judges._keys import schema_text
from offline_scorer.judges.transformers._constraint import PerRowSchemaProcessor, SchemaCompiler
from offline_scorer.judges.transformers._loop import LoopStats, Row, decode

pytestmark = pytest.mark.slow

SYSTEM = (
    "You check short answers to quiz questions. Read the question and the answer, then "
    "reply in JSON: name the check you ran, give your verdict, and quote the key words."
)


class Check(BaseModel):
    check: Literal["the answer names the thing the question asks for"]
    verdict: Literal["yes", "no", "unsure"]
    key_words: str = Field(max_length=40)


def _prompts() -> list[list[dict[str, str]]]:
    items = [
        ("What is the capital of France?", "Paris."),
        ("How many legs does a spider have?", "A spider has eight legs, like all arachnids."),
        ("Who wrote Hamlet?", "It was written by Charles Dickens in the nineteenth century."),
    ]
    return [
        [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Question: {q}\nAnswer: {a}"},
        ]
        for q, a in items
    ]


# Free text is capped short: equality of the two decoders shows in the first tokens as well
# as in the last, and the default budget made these the slowest tests of the suite.
TEXT_BUDGET = {"max_new_tokens_text": 48}


def _judge(judge: TransformersJudge, **settings: Any) -> TransformersJudge:
    return TransformersJudge(
        judge.load(), settings=GenerationSettings(**{**TEXT_BUDGET, **settings})
    )


PLAIN = {"decoder": "loop", "prefix_cache": False, "jump_forward": False}


@pytest.fixture(scope="module")
def plain_answers(judge: TransformersJudge) -> tuple[list[Any], list[Any]]:
    """The plain loop's JSON and text answers to the prompts: the baseline that both the
    comparison with ``generate`` and the one with the prefix cache are held to, decoded
    once for the module (each test used to decode exactly this again for itself)."""
    by_loop = _judge(judge, **PLAIN)
    return by_loop.generate_json(_prompts(), Check), by_loop.generate_text(_prompts())


def test_the_loop_equals_generate_on_the_same_prompts(
    judge: TransformersJudge, plain_answers: tuple[list[Any], list[Any]]
) -> None:
    prompts = _prompts()
    by_generate = _judge(judge, decoder="generate")
    json_loop, text_loop = plain_answers

    json_generate = by_generate.generate_json(prompts, Check)
    text_generate = by_generate.generate_text(prompts)

    assert [a.value for a in json_loop] == [a.value for a in json_generate]
    assert [a.value for a in text_loop] == [a.value for a in text_generate]
    # Same tokens, not only the same parsed objects.
    assert [a.usage.generated_tokens for a in json_loop] == [
        a.usage.generated_tokens for a in json_generate
    ]
    assert all(isinstance(a.value, Check) for a in json_loop)


def test_prefix_cached_and_uncached_outputs_are_equal(
    judge: TransformersJudge, plain_answers: tuple[list[Any], list[Any]]
) -> None:
    prompts = _prompts()
    loaded = judge.load()
    uncached = values(plain_answers[0])
    hits_before = loaded.prefixes.hits + loaded.prefixes.misses
    cached_judge = _judge(judge, decoder="loop", prefix_cache=True, jump_forward=False)
    cached = values(cached_judge.generate_json(prompts, Check))
    again = values(cached_judge.generate_text(prompts))

    assert cached == uncached
    # The system block was really taken from the store: one entry serves every row.
    assert loaded.prefixes.hits + loaded.prefixes.misses > hits_before
    assert again == values(plain_answers[1])


def test_jump_forward_takes_forced_tokens_and_changes_nothing(judge: TransformersJudge) -> None:
    loaded = judge.load()
    prompts = _prompts()
    encoded = [judge._encode(i, p) for i, p in enumerate(prompts)]
    compiler = SchemaCompiler(loaded.tokenizer)
    index = compiler.index_for(schema_text(Check))
    eos = [loaded.tokenizer.eos_token_id]

    def run(jump: bool) -> tuple[list[tuple[list[int], bool]], LoopStats]:
        stats = LoopStats()
        processor = PerRowSchemaProcessor([index] * len(encoded), compiler, 200, 64)
        out = decode(
            loaded.model,
            [Row(item.token_ids, 200, item.prefix) for item in encoded],
            eos_ids=eos,
            pad_id=eos[0],
            constraint=processor,
            jump_forward=jump,
            stats=stats,
        )
        return out, stats

    stepped, step_stats = run(False)
    jumped, jump_stats = run(True)

    assert jumped == stepped
    # The constant "check" text and the keys are forced: taken without steps of their own.
    assert jump_stats.forced_tokens > 10
    assert jump_stats.forward_passes < step_stats.forward_passes
    assert all(ended for _, ended in jumped)


def test_prompt_lookup_keeps_every_greedy_choice_with_fewer_passes(
    judge: TransformersJudge,
) -> None:
    loaded = judge.load()
    encoded = [judge._encode(i, p) for i, p in enumerate(_prompts())]
    compiler = SchemaCompiler(loaded.tokenizer)
    index = compiler.index_for(schema_text(Check))
    eos = [loaded.tokenizer.eos_token_id]

    def run(lookup: int, constrained: bool, rows: list[Any]) -> tuple[list[Any], LoopStats]:
        stats = LoopStats()
        processor = (
            PerRowSchemaProcessor([index] * len(rows), compiler, 200, 64) if constrained else None
        )
        out = decode(
            loaded.model,
            [Row(item.token_ids, 200 if constrained else 48, item.prefix) for item in rows],
            eos_ids=eos,
            pad_id=eos[0],
            constraint=processor,
            prefixes=loaded.prefixes,
            lookup=lookup,
            stats=stats,
        )
        return out, stats

    # The three prompts together (guesses shared out, rows cut at different places) and each
    # alone (every guess to one row), JSON and free text.
    saved = []
    for rows in (encoded, *([item] for item in encoded)):
        for constrained in (True, False):
            plain, plain_stats = run(0, constrained, rows)
            looked, stats = run(16, constrained, rows)
            assert looked == plain
            assert plain_stats.drafted_tokens == 0
            assert stats.accepted_tokens <= stats.drafted_tokens
            assert stats.forward_passes <= plain_stats.forward_passes
            saved.append(plain_stats.forward_passes - stats.forward_passes)
    # The answers quote their prompts ("A spider has eight legs, ..."): guesses were taken,
    # and each one taken is a pass saved.
    assert sum(saved) > 0


def test_prompt_lookup_guesses_what_followed_the_latest_match() -> None:
    from offline_scorer.judges.transformers._loop import Drafts

    drafts = Drafts([5, 6, 7, 8, 9, 1, 2, 6, 7, 3, 4])
    # "6 7" last occurred at 7..8, followed by "3 4", then by the answer's own "6 7".
    assert drafts.propose([6, 7], 4) == [3, 4, 6, 7]
    # The trigram "6 7 3" occurred at 7..9, followed by "4"; "7 8" is found by its bigram.
    assert drafts.propose([6, 7, 3], 2) == [4, 6]
    assert drafts.propose([6, 7, 3, 7, 8], 3) == [9, 1, 2]
    assert drafts.propose([6, 7, 3, 7, 8, 99], 3) == []  # no n-gram seen before
    assert drafts.propose([6, 7, 3, 7, 8, 99, 1, 2], 0) == []
    # The answer's own repeats count: "40 41" is followed by "42 40 41" there.
    assert Drafts([0]).propose([40, 41, 42, 40, 41], 5) == [42, 40, 41]


def test_scores_and_reasons_equal_generate_end_to_end(judge: TransformersJudge) -> None:
    runs = [
        {"input": "Which planet is the red planet?", "output": "Jupiter.", "ground_truth": "Mars."}
    ]
    outcomes = []
    # JSON strings capped at 16 tokens (64 by default) on both sides: the model writes its
    # units as long strings that the scorer then replaces by the texts themselves. Both
    # decoders still choose every token and take the forced close at the cap, with about a
    # third fewer decoding steps.
    for settings in ({"decoder": "generate"}, {}):
        scorer = get_scorer(
            "answer-similarity",
            judge=_judge(judge, max_string_tokens=16, **settings),
            verdicts="generate",
            extraction="model",
        )
        outcomes.append([(r.status, r.score, r.reason) for r in scorer.run_batch(runs)])

    assert outcomes[0] == outcomes[1]
    assert all(status == "scored" for status, _, _ in outcomes[1])


def test_the_prefix_store_stays_within_its_entries_and_bytes(judge: TransformersJudge) -> None:
    from offline_scorer.judges.transformers._kvcache import PrefixStore

    model = judge.load().model
    prefixes = [tuple(range(100 + n, 120 + n)) for n in range(3)]
    store = PrefixStore(entries=2)
    for ids in prefixes:
        store.get(model, ids)
    assert len(store) == 2 and store.misses == 3
    store.get(model, prefixes[2])
    assert store.hits == 1  # the most recent entry stayed

    # An entry larger than the byte budget is computed and used, but not kept.
    tiny = PrefixStore(max_bytes=1024)
    layers = tiny.get(model, prefixes[0])
    assert len(tiny) == 0 and len(layers) == model.config.num_hidden_layers


def test_packed_masks_round_trip_and_single_tokens() -> None:
    import torch

    from offline_scorer.judges.transformers._constraint import _one_token, pack_bits, unpack_bits

    flags = torch.rand(1000, generator=torch.Generator().manual_seed(0)) < 0.3
    flags[31] = flags[63] = flags[999] = True  # sign bits of int32 words, the last id
    bits = pack_bits(flags)
    assert bits.dtype == torch.int32 and bits.shape == (32,)
    assert torch.equal(unpack_bits(bits.unsqueeze(0), 1000)[0], flags)
    for token in (0, 31, 37, 63, 999):
        one = torch.zeros(1000, dtype=torch.bool)
        one[token] = True
        assert _one_token(pack_bits(one)) == token
    two = torch.zeros(1000, dtype=torch.bool)
    two[[3, 5]] = True
    assert _one_token(pack_bits(two)) is None
    assert _one_token(pack_bits(torch.zeros(1000, dtype=torch.bool))) is None


def test_packed_masks_are_exactly_the_guides_tokens(judge: TransformersJudge) -> None:
    """At every step of a real JSON answer the processor allows exactly the tokens Outlines'
    guide lists (below the model's vocabulary); a failed or spent row may only end."""
    from outlines_core import Guide

    loaded = judge.load()
    tokenizer = loaded.tokenizer
    compiler = SchemaCompiler(tokenizer)
    index = compiler.index_for(schema_text(Check))
    vocab = int(loaded.model.config.vocab_size)
    processor = PerRowSchemaProcessor([index, index, index], compiler, 200, 64, limits=[99, 99, 0])
    reference = Guide(index)
    text = '{"check":"the answer names the thing the question asks for","verdict":"yes","key_words":"capital"}'
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    for step, token in enumerate([*ids, None]):
        masks = processor.allowed([0, 1, 2], vocab)
        expected = sorted(t for t in reference.get_tokens() if t < vocab)
        assert masks[0].nonzero().flatten().tolist() == expected, step
        assert masks[2].nonzero().flatten().tolist() == [compiler.eos_token_id]  # spent
        forced = processor.forced(0, vocab)
        assert forced == (expected[0] if len(expected) == 1 else None)
        if token is None:
            break
        reference.advance(token_id=token, return_tokens=False)
        processor.advance(0, token)
        processor.advance(1, tokenizer.eos_token_id if step == 0 else token)
    assert processor.finished(0)
    assert processor.error(1) is not None  # the end of sequence where JSON must start
    assert processor.allowed([1], vocab)[0].nonzero().flatten().tolist() == [compiler.eos_token_id]
