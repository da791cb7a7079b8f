"""Our own greedy decode loop, in place of ``model.generate`` (issue 14).

What it does that ``generate`` does not, each measured in ``benchmarks/RESULTS.md``:

The caches live in ``_kvcache.py``.

* **a shared prefix computed once**: the system block of a step's prompt is the same text
  for every item. Its keys and values are computed once per prefix (a step, a language, a
  model) and copied into every row of a batch; only each row's own tokens go through the
  prefill. The rows are laid out as ``[prefix | padding | own tokens]``, the padding masked,
  and positions counted per row, so each token sees exactly what it sees without the cache.
* **a preallocated key/value cache**: each layer writes its new keys into a buffer that
  doubles when full, instead of concatenating the whole cache at every step.
* **rows leave the batch** as soon as they end, so the others do not carry them as padding.
* **jump-forward**: when the JSON constraint allows exactly one next token (a key, a quote,
  a constant string), that token is taken without a decode step of its own and fed to the
  model together with the row's previous token; a row whose constraint allows only the end
  ends at once.
* **prompt lookup**: tokens guessed from the row's own text (:class:`Drafts`) are fed with
  its next token and checked against the model's greedy choices, each one it takes a pass
  saved; the rest are cut from the cache.

Greedy choices are the same as ``generate``'s with the same constraint: an allowed token
is the argmax of the masked scores, and a forced token is the only allowed one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from offline_scorer.judges.transformers._kvcache import (
    FIRST_STRETCH,
    MIN_PREFIX_TOKENS,
    PrefixStore,
    left_padded,
    new_cache,
)

if TYPE_CHECKING:
    import torch


@dataclass
class Row:
    """One prompt to decode: its token ids, its budget, and the length of its shared prefix."""

    token_ids: list[int]
    budget: int
    prefix: int = 0


class Constraint(Protocol):
    """What the loop asks of a JSON constraint (``PerRowSchemaProcessor`` implements it)."""

    def allowed(self, rows: Sequence[int], vocab: int, device: Any = None) -> torch.Tensor:
        """Boolean [len(rows), vocab] on ``device`` (None: the CPU): the tokens each row may
        take next."""
        ...

    def advance(self, row: int, token: int) -> None:
        """Feed the token the row took."""
        ...

    def forced(self, row: int, vocab: int) -> int | None:
        """The only token the row may take next, or None when it has a choice."""
        ...


@dataclass
class LoopStats:
    """Counts of one decode, for profiles and tests."""

    forward_passes: int = 0
    forced_tokens: int = 0
    drafted_tokens: int = 0
    """Tokens proposed by lookup and fed for checking (``lookup`` > 0)."""
    accepted_tokens: int = 0
    """Of those, the tokens the model chose itself: each saved a forward pass."""


class Drafts:
    """Prompt lookup: guesses of a row's next tokens, copied from its own text.

    A judge's answer quotes its prompt (statements copy the answer, reasons quote the
    question). When the last ``longest`` .. ``shortest`` tokens of the row (prompt and answer
    so far) occurred before, the tokens that followed their latest earlier occurrence are
    the guess. The n-grams are indexed as the row grows, so a guess costs a dictionary look-up.
    """

    def __init__(self, prompt: Sequence[int], longest: int = 3, shortest: int = 2):
        self._sizes = range(longest, shortest - 1, -1)
        self._seq = list(prompt)
        self._prompt = len(self._seq)
        self._latest: dict[tuple[int, ...], int] = {}
        self._indexed = 0  # n-grams ending before this index are in _latest

    def propose(self, answer: Sequence[int], limit: int) -> list[int]:
        """At most ``limit`` guessed tokens after ``answer``: the row's tokens so far, which
        only grow from one call to the next."""
        seq = self._seq
        seq.extend(answer[len(seq) - self._prompt :])
        end = len(seq)
        if limit <= 0:
            return []
        # Index every n-gram that ends before the current end (the suffix itself excluded).
        for stop in range(max(self._indexed, 1), end):
            for size in self._sizes:
                if stop >= size:
                    self._latest[tuple(seq[stop - size : stop])] = stop
        self._indexed = end
        for size in self._sizes:
            found = self._latest.get(tuple(seq[end - size : end])) if end >= size else None
            if found is not None:
                return seq[found : found + limit]
        return []


def decode(
    model: Any,
    rows: Sequence[Row],
    *,
    eos_ids: Sequence[int],
    pad_id: int,
    constraint: Constraint | None = None,
    stop: Callable[[int, list[int]], bool] | None = None,
    prefixes: PrefixStore | None = None,
    jump_forward: bool = True,
    lookup: int = 0,
    stats: LoopStats | None = None,
) -> list[tuple[list[int], bool]]:
    """Greedy decoding of a batch of prompts; per row, (new ids, ended with EOS).

    Args:
        model: a causal LM whose cache is plain full attention (see ``_kvcache.supports_loop``).
        rows: the prompts, each with its own budget of new tokens and, when ``prefixes``
            is given, the length of a prefix it shares with every other row.
        eos_ids: tokens that end a row (not returned).
        pad_id: the id written in padded places (never attended to).
        constraint: the JSON constraint, or None for free text.
        stop: ``stop(row, new_ids)`` True ends a free-text row early (not as EOS).
        prefixes: the store of shared prefixes; None computes every prompt in full.
        jump_forward: take tokens the constraint forces without a step of their own.
        lookup: feed up to this many guessed tokens per row and pass (:class:`Drafts`),
            each checked against the model's own greedy choice; 0 guesses nothing.
        stats: filled with counts when given.
    """
    import torch

    stats = stats if stats is not None else LoopStats()
    count = len(rows)
    out: list[list[int]] = [[] for _ in range(count)]
    ended = [False] * count
    if count == 0:
        return []
    device = model.device
    eos = set(eos_ids)

    shared = min(row.prefix for row in rows) if prefixes is not None else 0
    first_ids = rows[0].token_ids[:shared]
    if shared < MIN_PREFIX_TOKENS or any(
        len(row.token_ids) <= shared or row.token_ids[:shared] != first_ids for row in rows
    ):
        shared = 0
    ids, mask, positions = left_padded([row.token_ids[shared:] for row in rows], shared, pad_id)
    longest = max(row.budget for row in rows)
    # Room for the prompts and a first stretch of answer; the buffer doubles when needed.
    cache = new_cache(model, mask.shape[1] + min(longest, FIRST_STRETCH))
    assert cache is not None
    if shared:
        assert prefixes is not None
        for layer, (keys, values) in zip(cache.layers, prefixes.get(model, tuple(first_ids))):
            layer.preload(keys, values, count)

    next_position = [len(row.token_ids) for row in rows]
    drafts = [Drafts(row.token_ids) for row in rows] if lookup > 0 else []
    # Guesses a row may feed next: halved after a pass that took none of them, doubled
    # (up to ``lookup``) after one that took them all. At 0 the row feeds no guess (a pass
    # over several tokens costs more than one over a single token) but still makes one,
    # unfed; when the model's next choice equals it, the row guesses again. So text in the
    # judge's own words (a reason) soon runs as without lookup, and quoting resumes it.
    allowance = [lookup] * count
    guessed: list[list[int]] = [[] for _ in range(count)]  # fed in the last pass, per slot
    unfed: list[int | None] = [None] * count  # a row's guess at 0 allowance, per slot

    def done(row: int) -> bool:
        return len(out[row]) >= rows[row].budget or (stop is not None and stop(row, out[row]))

    active = list(range(count))
    with torch.inference_mode():
        logits = _forward(model, ids, mask, positions, cache, device, 1)
        stats.forward_passes += 1
        while active:
            vocab = logits.shape[-1]
            feeds: dict[int, list[int]] = {}
            checked = [0] * len(active)  # guesses the model agreed with, per slot
            # Position by position, the slots whose guesses all held so far: position j of a
            # slot is its j-th guess's logits (the last fed token's when j is past them).
            verifying, j = list(range(len(active))), 0
            while verifying:
                columns = [logits.shape[1] - 1 - len(guessed[slot]) + j for slot in verifying]
                scores = logits[verifying, columns]
                if constraint is not None:
                    allowed = constraint.allowed(
                        [active[s] for s in verifying], vocab, logits.device
                    )
                    scores = scores.masked_fill(~allowed, float("-inf"))
                chosen = scores.argmax(dim=-1).tolist()
                still_verifying = []
                for slot, token in zip(verifying, chosen):
                    row = active[slot]
                    if j == 0 and unfed[slot] is not None and token == unfed[slot]:
                        allowance[row] = 1
                    if token in eos:
                        ended[row] = True
                        continue
                    out[row].append(token)
                    if constraint is not None:
                        constraint.advance(row, token)
                    if j < len(guessed[slot]) and token == guessed[slot][j]:
                        checked[slot] += 1
                        if not done(row):
                            still_verifying.append(slot)
                        continue
                    fed = [token]
                    if constraint is not None and jump_forward:
                        finished = _jump(constraint, row, vocab, out[row], fed, eos, rows[row])
                        stats.forced_tokens += len(fed) - 1
                        if finished:
                            ended[row] = True
                            continue
                    if not done(row):
                        feeds[slot] = fed
                verifying, j = still_verifying, j + 1
            stats.accepted_tokens += sum(checked)
            for slot, guess in enumerate(guessed):
                if guess:
                    row = active[slot]
                    if checked[slot] == 0:
                        allowance[row] //= 2
                    elif checked[slot] == len(guess):
                        allowance[row] = min(lookup, allowance[row] * 2)
            still = sorted(feeds)
            if not still:
                break
            # The cache holds every guess fed; those the model did not take are cut off where
            # every row has them, and masked where only some do.
            rejected = [len(guessed[slot]) - checked[slot] for slot in still]
            cut = min(rejected)
            if cut:
                for layer in cache.layers:
                    layer.truncate(layer.get_seq_length() - cut)
                mask = mask[:, :-cut]
            if len(still) < len(active):
                keep = torch.tensor(still, dtype=torch.long)
                for layer in cache.layers:
                    layer.select(keep.to(device))
                mask = mask.index_select(0, keep)
            for index, slot in enumerate(still):
                if rejected[index] > cut:
                    mask[index, mask.shape[1] - (rejected[index] - cut) :] = 0
                next_position[active[slot]] -= rejected[index]
            active = [active[slot] for slot in still]
            # The pass's guesses are shared out between its rows: a guessed token costs
            # compute wherever it is not taken, and a full batch has little to spare.
            each = lookup // len(active)
            guessed = [[] for _ in active]
            unfed = [None for _ in active]
            for index, row in enumerate(active if drafts else ()):
                room = min(each, rows[row].budget - len(out[row]) - 1)
                guess = drafts[row].propose(out[row], max(1, min(room, allowance[row])))
                if room > 0 and allowance[row] > 0:
                    guessed[index] = guess
                elif room > 0 and guess:
                    unfed[index] = guess[0]
            stats.drafted_tokens += sum(len(guess) for guess in guessed)
            step = max(len(feeds[slot]) + len(guess) for slot, guess in zip(still, guessed))
            ids = torch.full((len(active), step), pad_id, dtype=torch.long)
            new_mask = torch.zeros((len(active), step), dtype=torch.long)
            positions = torch.zeros((len(active), step), dtype=torch.long)
            for index, (slot, guess) in enumerate(zip(still, guessed)):
                fed = feeds[slot] + guess
                row = active[index]
                start = next_position[row]
                ids[index, step - len(fed) :] = torch.tensor(fed, dtype=torch.long)
                new_mask[index, step - len(fed) :] = 1
                positions[index, :] = start
                positions[index, step - len(fed) :] = torch.arange(start, start + len(fed))
                next_position[row] = start + len(fed)
            mask = torch.cat([mask, new_mask], dim=1)
            keep_logits = 1 + max(len(guess) for guess in guessed)
            logits = _forward(model, ids, mask, positions, cache, device, keep_logits)
            stats.forward_passes += 1
    return [(out[row], ended[row]) for row in range(count)]


def _jump(
    constraint: Constraint,
    row: int,
    vocab: int,
    taken: list[int],
    fed: list[int],
    eos: set[int],
    spec: Row,
) -> bool:
    """Take the tokens the constraint forces after the row's last one; True if it must end."""
    while len(taken) < spec.budget:
        forced = constraint.forced(row, vocab)
        if forced is None:
            return False
        if forced in eos:
            return True
        taken.append(forced)
        fed.append(forced)
        constraint.advance(row, forced)
    return False


def _forward(
    model: Any,
    ids: torch.Tensor,
    mask: torch.Tensor,
    positions: torch.Tensor,
    cache: Any,
    device: Any,
    keep: int,
) -> torch.Tensor:
    """Logits of the last ``keep`` positions of each row, [rows, keep, vocab], in float32."""
    # Without any padding the causal mask says everything: leaving the padding mask out
    # saves building a [rows, 1, new, cached] mask in every layer (a fifth of a batch-1 step).
    padded = bool((mask == 0).any())
    output = model(
        input_ids=ids.to(device),
        attention_mask=mask.to(device) if padded else None,
        position_ids=positions.to(device),
        cache=cache,
        use_cache=True,
        logits_to_keep=keep,
    )
    logits: torch.Tensor = output.logits[:, -keep:, :].float()
    return logits
