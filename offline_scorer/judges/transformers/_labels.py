"""Reading label probabilities from one forward pass (no decoding).

For a prompt and a closed set of labels, the log-probability of a label is the sum of the
log-probabilities of its tokens right after the prompt. A label of one token is read at the
prompt's last position. A label of several tokens needs the model to have seen its first
tokens: its tokens but the last are appended to the prompt, and the same forward pass gives
every position's distribution. Labels whose appended tokens are a prefix of another label's
share that label's row, so most prompts need one row.

**Rows per pass.** With ``rows_per_pass`` 1 each row goes through the model alone, so a
row is computed the same way whatever else is being scored, to the last bit. With more,
rows that share a system block are sorted by the length of their own tokens and stacked,
left-padded, into passes of that many rows: fewer, larger matrix products, which an
accelerator needs to be busy. Stacked rows change the shapes of the matrix products, and
with them the last bits of the results (a few 1e-5 in a log-probability; the rounding
below can then differ by one in the last decimal; ``tests/test_judge_real.py`` states the
bound). Only the last positions' logits are computed. Values are rounded to
``LOGPROB_DIGITS`` decimals.

**A shared prefix is computed once.** A step's prompts share their system block; when a
store of prefixes is given (the judge's, see ``_kvcache.py``), a row whose system block is at
least ``MIN_PREFIX_TOKENS`` long starts from that block's cached keys and values and runs
only its own tokens, so a verdict costs its question, statement and label, not the
instructions. A prompt whose last user message is a focus (the part of the item under
judgment, after a message showing the whole item) shares the system block and the item
with the other reads of that item: its prefix is both, computed once per item and kept in
memory only. Either prefix is fixed by the prompt itself, never "whatever the batch
shares", so a read does not depend on its neighbours. Against a full pass the split changes the last
bits of the results (measured below 2e-4 in a log-probability in float32; see
``tests/test_judge_real.py``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from offline_scorer._exceptions import JudgeOutputError, OfflineScorerError
from offline_scorer.judges._protocol import LOGPROB_DIGITS, ItemUsage, LabelScores
from offline_scorer.judges.transformers._decoding import _free_accelerator_memory, is_out_of_memory
from offline_scorer.judges.transformers._kvcache import (
    MIN_PREFIX_TOKENS,
    PrefixStore,
    left_padded,
    new_cache,
)

if TYPE_CHECKING:
    import torch

    from offline_scorer.judges.transformers._loading import LoadedModel


@dataclass
class _Row:
    """One forward-pass row: a prompt plus appended label tokens."""

    request: int
    token_ids: list[int]
    appended: tuple[int, ...]
    prefix: int = 0
    """Leading tokens whose keys and values come from the prefix store (0: none)."""
    persist: bool = True
    """Whether that prefix may be kept on disk for later processes (a system block), or
    serves only this call (an item's own prefix)."""


@dataclass
class _Plan:
    """Which row and which positions give each label of one request."""

    rows: list[_Row]
    # per label: (row index in rows, the label's token ids)
    reads: list[tuple[int, tuple[int, ...]]]


def label_token_ids(tokenizer: Any, label: str) -> tuple[int, ...]:
    """The canonical tokens of a label written right after a prefill."""
    ids = tokenizer(label, add_special_tokens=False)["input_ids"]
    if not ids:
        raise JudgeOutputError(f"The label {label!r} has no tokens in this tokenizer.")
    return tuple(int(i) for i in ids)


def _plan(
    request: int,
    prompt_ids: list[int],
    labels: Sequence[str],
    tokenizer: Any,
    prefix: int = 0,
    persist: bool = True,
) -> _Plan:
    tokens = [label_token_ids(tokenizer, label) for label in labels]
    # Longest continuations first, so a shorter one can reuse a row it is a prefix of.
    needed = sorted({t[:-1] for t in tokens}, key=len, reverse=True)
    rows: list[_Row] = []
    for appended in needed:
        if any(row.appended[: len(appended)] == appended for row in rows):
            continue
        rows.append(_Row(request, prompt_ids + list(appended), appended, prefix, persist))
    reads = []
    for label_tokens in tokens:
        head = label_tokens[:-1]
        index = next(i for i, row in enumerate(rows) if row.appended[: len(head)] == head)
        reads.append((index, label_tokens))
    return _Plan(rows, reads)


def score_label_rows(
    loaded: LoadedModel,
    requests: Sequence[tuple[list[int], Sequence[str]]],
    *,
    hidden_state: bool = False,
    prefixes: PrefixStore | None = None,
    prefix_lengths: Sequence[int] | None = None,
    rows_per_pass: int = 1,
    persist: Sequence[bool] | None = None,
) -> list[tuple[LabelScores | BaseException, ItemUsage]]:
    """Score each request's labels; one (scores or error, usage) per request, in order.

    Args:
        loaded: the model and tokenizer.
        requests: per prompt, its token ids (chat template applied, prefill included) and
            its allowed labels.
        hidden_state: also read the last-layer hidden state at the prompt's last token
            (taken from the request's first row).
        prefixes: the store of shared prefixes; None computes every prompt in full.
        prefix_lengths: per prompt, how many leading ids it shares with other prompts (its
            system block, or its system block and item before a focus message); used only
            with ``prefixes``.
        rows_per_pass: most rows in one forward pass (1: every row alone).
        persist: per prompt, whether its prefix may be kept on disk (default: yes).
    """
    tokenizer = loaded.tokenizer
    lengths = list(prefix_lengths or [0] * len(requests))
    if prefixes is None:
        lengths = [0] * len(requests)
    kept = list(persist or [True] * len(requests))
    plans = [
        _plan(
            i,
            ids,
            labels,
            tokenizer,
            lengths[i] if lengths[i] >= MIN_PREFIX_TOKENS else 0,
            kept[i],
        )
        for i, (ids, labels) in enumerate(requests)
    ]
    rows = [row for plan in plans for row in plan.rows]
    held = _Held(prefixes) if prefixes is not None else None
    logprobs: dict[int, Any] = {}
    seconds: dict[int, float] = {}
    for chunk in _passes(rows, rows_per_pass):
        began = time.perf_counter()
        _run(loaded, [rows[i] for i in chunk], chunk, logprobs, hidden_state, held)
        took = time.perf_counter() - began
        # A pass's time is shared by its rows in proportion to the tokens each ran.
        own = {i: len(rows[i].token_ids) - rows[i].prefix for i in chunk}
        total = sum(own.values()) or 1
        for i in chunk:
            request = rows[i].request
            seconds[request] = seconds.get(request, 0.0) + took * own[i] / total
    results: list[tuple[LabelScores | BaseException, ItemUsage]] = []
    offset = 0
    for index, plan in enumerate(plans):
        labels = requests[index][1]
        row_ids = list(range(offset, offset + len(plan.rows)))
        offset += len(plan.rows)
        # Tokens the model ran for this request (a cached prefix is not run again).
        usage = ItemUsage(
            sum(len(r.token_ids) - r.prefix for r in plan.rows), 0, seconds.get(index, 0.0)
        )
        failure = next(
            (logprobs[r] for r in row_ids if isinstance(logprobs[r], BaseException)), None
        )
        if failure is not None:
            results.append((cast(BaseException, failure), usage))
            continue
        values = []
        for row_index, label_tokens in plan.reads:
            table, _ = logprobs[row_ids[row_index]]
            values.append(_label_logprob(table, plan.rows[row_index], label_tokens))
        _, hidden = logprobs[row_ids[0]]
        scores = LabelScores(
            tuple(labels),
            tuple(round(v, LOGPROB_DIGITS) for v in values),
            None if hidden is None else tuple(round(v, LOGPROB_DIGITS) for v in hidden),
        )
        results.append((scores, usage))
    return results


def _passes(rows: Sequence[_Row], size: int) -> list[list[int]]:
    """Row indexes grouped into forward passes of at most ``size`` rows.

    Rows of one pass share their cached prefix (the same system block, or none); within a
    group they are sorted by the number of tokens they run, so a pass pads little.
    """
    if size <= 1:
        return [[index] for index in range(len(rows))]
    groups: dict[tuple[int, ...], list[int]] = {}
    for index, row in enumerate(rows):
        groups.setdefault(tuple(row.token_ids[: row.prefix]), []).append(index)
    passes = []
    for members in groups.values():
        members.sort(key=lambda i: len(rows[i].token_ids) - rows[i].prefix)
        passes += [members[start : start + size] for start in range(0, len(members), size)]
    return passes


def _label_logprob(table: Any, row: _Row, label_tokens: tuple[int, ...]) -> float:
    """Sum of the label's token log-probs; ``table[k]`` is the distribution after k appended."""
    total = 0.0
    for k, token in enumerate(label_tokens):
        total += float(table[k, token])
    return total


class _Held:
    """The prefix store as one call sees it: the prefix of the last rows stays held, so the
    reads of one item (consecutive rows) never compute its prefix twice, even when the
    store cannot keep it (a long item's keys and values past the store's byte budget)."""

    def __init__(self, store: PrefixStore):
        self.store = store
        self._ids: tuple[int, ...] | None = None
        self._layers: Any = None

    def get(self, model: Any, ids: tuple[int, ...], persist: bool = True) -> Any:
        if ids != self._ids:
            self._layers = self.store.get(model, ids, persist=persist)
            self._ids = ids
        return self._layers


def _run(
    loaded: LoadedModel,
    rows: list[_Row],
    indexes: list[int],
    out: dict[int, Any],
    hidden_state: bool = False,
    prefixes: _Held | None = None,
) -> None:
    """One forward pass; per row, the log-prob vectors after 0..len(appended) tokens (and
    the hidden state at the prompt's last token when asked)."""
    try:
        if rows[0].prefix and prefixes is not None:
            tables = _forward_from_prefix(loaded, rows, prefixes, hidden_state)
        else:
            tables = _forward(loaded, rows, hidden_state)
    except OfflineScorerError:
        raise
    except Exception as error:
        if is_out_of_memory(error) and len(rows) > 1:
            _free_accelerator_memory()
            middle = len(rows) // 2
            _run(loaded, rows[:middle], indexes[:middle], out, hidden_state, prefixes)
            _run(loaded, rows[middle:], indexes[middle:], out, hidden_state, prefixes)
            return
        failure = JudgeOutputError(
            f"Reading label probabilities failed for a batch of {len(rows)} rows: "
            f"{type(error).__name__}: {error}"
        )
        failure.__cause__ = error
        for index in indexes:
            out[index] = failure
        return
    for index, table in zip(indexes, tables, strict=True):
        out[index] = table


def _forward(
    loaded: LoadedModel, rows: list[_Row], hidden_state: bool = False
) -> list[tuple[torch.Tensor, list[float] | None]]:
    import torch

    model = cast(Any, loaded.model)
    ids, mask, positions = left_padded([row.token_ids for row in rows], 0, _pad_id(loaded))
    keep = max(len(row.appended) for row in rows) + 1
    device = model.device
    with torch.inference_mode():
        output = model(
            input_ids=ids.to(device),
            attention_mask=mask.to(device),
            position_ids=positions.to(device),
            logits_to_keep=keep,
            use_cache=False,
            output_hidden_states=hidden_state,
        )
        return _tables(output, rows, keep, hidden_state)


def _forward_from_prefix(
    loaded: LoadedModel, rows: list[_Row], prefixes: _Held, hidden_state: bool = False
) -> list[tuple[torch.Tensor, list[float] | None]]:
    """The rows' tables, their common first ``prefix`` tokens taken from the prefix store.

    The rows are laid out as in the decode loop (``_kvcache.left_padded``); a row alone has
    no padding, and then no mask is built.
    """
    import torch

    model = cast(Any, loaded.model)
    length = rows[0].prefix
    tails = [row.token_ids[length:] for row in rows]
    keep = max(len(row.appended) for row in rows) + 1
    ids, mask, positions = left_padded(tails, length, _pad_id(loaded))
    cache = new_cache(model, mask.shape[1])
    if cache is None or any(len(tail) < len(row.appended) + 1 for row, tail in zip(rows, tails)):
        plain = [_Row(row.request, row.token_ids, row.appended) for row in rows]  # no prefix
        return _forward(loaded, plain, hidden_state)
    head = tuple(rows[0].token_ids[:length])
    for layer, (keys, values) in zip(
        cache.layers, prefixes.get(model, head, persist=rows[0].persist), strict=True
    ):
        layer.preload(keys, values, len(rows))
    padded = bool((mask == 0).any())
    device = model.device
    with torch.inference_mode():
        output = model(
            input_ids=ids.to(device),
            attention_mask=mask.to(device) if padded else None,
            position_ids=positions.to(device),
            cache=cache,
            use_cache=True,
            logits_to_keep=keep,
            output_hidden_states=hidden_state,
        )
        return _tables(output, rows, keep, hidden_state)


def _pad_id(loaded: LoadedModel) -> int:
    pad_id = loaded.tokenizer.pad_token_id
    return int(pad_id) if pad_id is not None else 0


def _tables(
    output: Any, rows: list[_Row], keep: int, hidden_state: bool
) -> list[tuple[torch.Tensor, list[float] | None]]:
    """Per row (each ends at the last column), the log-prob vectors after 0..len(appended)
    tokens, and the hidden state at the prompt's last token when asked."""
    import torch

    logprobs = torch.log_softmax(output.logits.float(), dim=-1).cpu()
    tables = []
    for index, row in enumerate(rows):
        count = len(row.appended) + 1
        hidden = None
        if hidden_state:
            hidden = output.hidden_states[-1][index, -count].float().cpu().tolist()
        tables.append((logprobs[index, keep - count : keep], hidden))
    return tables
