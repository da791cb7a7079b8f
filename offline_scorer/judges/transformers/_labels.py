"""Reading label probabilities from one forward pass (no decoding).

For a prompt and a closed set of labels, the log-probability of a label is the sum of the
log-probabilities of its tokens right after the prompt. A label of one token is read at the
prompt's last position. A label of several tokens needs the model to have seen its first
tokens: its tokens but the last are appended to the prompt, and the same forward pass gives
every position's distribution. Labels whose appended tokens are a prefix of another label's
share that label's row, so most prompts need one row.

Each row goes through the model alone: a prompt pass is compute-bound, so stacking rows
gains little on a CPU, and a row alone is computed the same way whatever else is being
scored (stacked rows change the shapes of the matrix products, and with them the last
bits of the results: measured 4e-5 in a log-probability). Only the last positions' logits
are computed. Values are rounded to ``LOGPROB_DIGITS`` decimals.

**A shared prefix is computed once.** A step's prompts share their system block; when a
store of prefixes is given (the judge's, see ``_loop.py``), a row whose system block is at
least ``MIN_PREFIX_TOKENS`` long starts from that block's cached keys and values and runs
only its own tokens, so a verdict costs its question, statement and label, not the
instructions. The prefix is the system block alone, never "whatever the batch shares", so
a read does not depend on its neighbours. Against a full pass the split changes the last
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
from offline_scorer.judges.transformers._loop import MIN_PREFIX_TOKENS, PrefixStore, new_cache

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
    request: int, prompt_ids: list[int], labels: Sequence[str], tokenizer: Any, prefix: int = 0
) -> _Plan:
    tokens = [label_token_ids(tokenizer, label) for label in labels]
    # Longest continuations first, so a shorter one can reuse a row it is a prefix of.
    needed = sorted({t[:-1] for t in tokens}, key=len, reverse=True)
    rows: list[_Row] = []
    for appended in needed:
        if any(row.appended[: len(appended)] == appended for row in rows):
            continue
        rows.append(_Row(request, prompt_ids + list(appended), appended, prefix))
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
) -> list[tuple[LabelScores | BaseException, ItemUsage]]:
    """Score each request's labels; one (scores or error, usage) per request, in order.

    Args:
        loaded: the model and tokenizer.
        requests: per prompt, its token ids (chat template applied, prefill included) and
            its allowed labels.
        hidden_state: also read the last-layer hidden state at the prompt's last token
            (taken from the request's first row).
        prefixes: the store of shared prefixes; None computes every prompt in full.
        prefix_lengths: per prompt, how many leading ids are its system block (the part
            shared with the other prompts of its step); used only with ``prefixes``.
    """
    tokenizer = loaded.tokenizer
    lengths = list(prefix_lengths or [0] * len(requests))
    if prefixes is None:
        lengths = [0] * len(requests)
    plans = [
        _plan(i, ids, labels, tokenizer, lengths[i] if lengths[i] >= MIN_PREFIX_TOKENS else 0)
        for i, (ids, labels) in enumerate(requests)
    ]
    rows = [row for plan in plans for row in plan.rows]
    logprobs: dict[int, Any] = {}
    seconds: dict[int, float] = {}
    for index, row in enumerate(rows):
        began = time.perf_counter()
        _run(loaded, [row], [index], logprobs, hidden_state, prefixes)
        seconds[row.request] = seconds.get(row.request, 0.0) + time.perf_counter() - began
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


def _label_logprob(table: Any, row: _Row, label_tokens: tuple[int, ...]) -> float:
    """Sum of the label's token log-probs; ``table[k]`` is the distribution after k appended."""
    total = 0.0
    for k, token in enumerate(label_tokens):
        total += float(table[k, token])
    return total


def _run(
    loaded: LoadedModel,
    rows: list[_Row],
    indexes: list[int],
    out: dict[int, Any],
    hidden_state: bool = False,
    prefixes: PrefixStore | None = None,
) -> None:
    """One forward pass; per row, the log-prob vectors after 0..len(appended) tokens (and
    the hidden state at the prompt's last token when asked)."""
    try:
        if len(rows) == 1 and rows[0].prefix and prefixes is not None:
            tables = [_forward_from_prefix(loaded, rows[0], prefixes, hidden_state)]
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
    tokenizer = loaded.tokenizer
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    width = max(len(row.token_ids) for row in rows)
    keep = max(len(row.appended) for row in rows) + 1
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for index, row in enumerate(rows):
        ids[index, width - len(row.token_ids) :] = torch.tensor(row.token_ids, dtype=torch.long)
        mask[index, width - len(row.token_ids) :] = 1
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
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
        logits: torch.Tensor = output.logits.float()
        logprobs = torch.log_softmax(logits, dim=-1).cpu()
    tables = []
    for index, row in enumerate(rows):
        # The row ends at the last column; after k appended tokens is column -(len-k)-1.
        count = len(row.appended) + 1
        start = keep - count
        hidden = None
        if hidden_state:
            hidden = output.hidden_states[-1][index, -count].float().cpu().tolist()
        tables.append((logprobs[index, start:keep], hidden))
    return tables


def _forward_from_prefix(
    loaded: LoadedModel, row: _Row, prefixes: PrefixStore, hidden_state: bool = False
) -> tuple[torch.Tensor, list[float] | None]:
    """One row's tables, its first ``row.prefix`` tokens taken from the prefix store."""
    import torch

    model = cast(Any, loaded.model)
    head = tuple(row.token_ids[: row.prefix])
    tail = row.token_ids[row.prefix :]
    keep = len(row.appended) + 1
    cache = new_cache(model, len(row.token_ids))
    if cache is None or len(tail) < keep:
        return _forward(loaded, [_Row(row.request, row.token_ids, row.appended)], hidden_state)[0]
    for layer, (keys, values) in zip(cache.layers, prefixes.get(model, head), strict=True):
        layer.preload(keys, values, 1)
    device = model.device
    with torch.inference_mode():
        output = model(
            input_ids=torch.tensor([tail], dtype=torch.long, device=device),
            position_ids=torch.arange(row.prefix, len(row.token_ids), device=device)[None],
            cache=cache,
            use_cache=True,
            logits_to_keep=keep,
            output_hidden_states=hidden_state,
        )
        logprobs = torch.log_softmax(output.logits.float(), dim=-1).cpu()
    hidden = None
    if hidden_state:
        hidden = output.hidden_states[-1][0, -keep].float().cpu().tolist()
    return logprobs[0], hidden
