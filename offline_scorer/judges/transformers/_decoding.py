"""Helpers of greedy decoding: padding, end-of-sequence, sentence limits, out-of-memory."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from offline_scorer.judges.transformers._kvcache import supports_loop
from offline_scorer.judges.transformers._loop import Row, decode

if TYPE_CHECKING:
    import torch


def is_out_of_memory(error: BaseException) -> bool:
    """Whether an exception from torch means the device (or host) ran out of memory."""
    import torch

    if isinstance(error, (MemoryError, torch.OutOfMemoryError)):
        return True
    return isinstance(error, RuntimeError) and "out of memory" in str(error).lower()


def _free_accelerator_memory() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()


class _SentenceLimit:
    """Stops a free-text row once it has written ``limit`` full sentences.

    A small model tends to repeat itself after its point is made; reasons are meant to be
    one or two sentences.
    """

    def __init__(self, tokenizer: Any, prompt_length: int, limit: int):
        self._tokenizer = tokenizer
        self._start = prompt_length
        self._limit = limit

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor, **_: Any) -> torch.Tensor:
        import torch

        done = [
            sentence_limit_reached(self._tokenizer, row, self._limit)
            for row in input_ids[:, self._start :].tolist()
        ]
        return torch.tensor(done, dtype=torch.bool, device=input_ids.device)


def sentence_limit_reached(tokenizer: Any, ids: list[int], limit: int) -> bool:
    """Whether the text of ``ids`` holds ``limit`` complete sentences."""
    return count_sentences(str(tokenizer.decode(ids, skip_special_tokens=True))) >= limit


def count_sentences(text: str) -> int:
    """Sentences that are complete (a terminator followed by white space or the end)."""
    return len(re.findall(r"[.!?](?=\s)", text + " ")) if text.strip() else 0


def _eos_ids(model: Any, tokenizer: Any) -> list[int]:
    configured = model.generation_config.eos_token_id
    ids = configured if isinstance(configured, list) else [configured]
    ids = [i for i in ids if i is not None]
    if tokenizer.eos_token_id is not None and tokenizer.eos_token_id not in ids:
        ids.append(tokenizer.eos_token_id)
    return ids


def _left_pad(rows: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    import torch

    width = max(len(row) for row in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for index, row in enumerate(rows):
        ids[index, width - len(row) :] = torch.tensor(row, dtype=torch.long)
        mask[index, width - len(row) :] = 1
    return ids, mask


def _cut_at_eos(row: list[int], eos_ids: list[int]) -> tuple[list[int], bool]:
    """Generated ids up to (excluding) the first EOS, and whether an EOS was produced."""
    for position, token in enumerate(row):
        if token in eos_ids:
            return row[:position], True
    return row, False


def _join_prefill(prefill: str, continuation: str) -> str:
    if not prefill:
        return continuation
    if prefill.endswith((" ", "\n")) or continuation.startswith((" ", "\n", ",", ".")):
        return prefill + continuation
    return f"{prefill} {continuation}"


def trim_to_sentence(text: str) -> str:
    """Cut a truncated text back to its last full sentence, when it has one."""
    cut = max(text.rfind(mark) for mark in (". ", "! ", "? ", ".\n"))
    if text.endswith((".", "!", "?")):
        return text
    return text[: cut + 1] if cut > 0 else text


def decode_rows(
    loaded: Any,
    chunk: list[Any],
    processor: Any,
    settings: Any,
) -> list[tuple[list[int], bool]]:
    """Greedy generation of one sub-batch; per row (new ids, ended with EOS).

    Our loop (``_loop.py``) when the settings ask for it and the model's cache allows it,
    else transformers' ``generate``. Each row stops at its own budget.
    """

    model, tokenizer = loaded.model, loaded.tokenizer
    eos_ids = _eos_ids(model, tokenizer)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos_ids[0]
    if settings.decoder == "generate" or not supports_loop(model):
        return _generate(loaded, chunk, processor, settings, eos_ids, pad_id)
    stop = None
    if processor is None and settings.max_sentences_text:
        limit = settings.max_sentences_text

        def stop(row: int, ids: list[int]) -> bool:
            return sentence_limit_reached(tokenizer, ids, limit)

    return decode(
        model,
        [Row(item.token_ids, item.budget, item.prefix) for item in chunk],
        eos_ids=eos_ids,
        pad_id=pad_id,
        constraint=processor,
        stop=stop,
        prefixes=loaded.prefixes if settings.prefix_cache else None,
        jump_forward=settings.jump_forward,
        lookup=settings.lookup_tokens,
        stats=loaded.loop_stats,
    )


def _generate(
    loaded: Any,
    chunk: list[Any],
    processor: Any,
    settings: Any,
    eos_ids: list[int],
    pad_id: int,
) -> list[tuple[list[int], bool]]:
    """One left-padded ``model.generate`` call; the batch runs to its largest budget."""
    import torch
    from transformers import GenerationConfig, LogitsProcessorList, StoppingCriteriaList

    tokenizer, model = loaded.tokenizer, loaded.model
    input_ids, attention = _left_pad([item.token_ids for item in chunk], pad_id)
    config = GenerationConfig(  # type: ignore[no-untyped-call]
        do_sample=False,
        max_new_tokens=max(item.budget for item in chunk),
        pad_token_id=pad_id,
        eos_token_id=eos_ids,
        bos_token_id=model.generation_config.bos_token_id,
    )
    processors = LogitsProcessorList([processor] if processor is not None else [])
    stopping = None
    if processor is None and settings.max_sentences_text:
        stopping = StoppingCriteriaList(
            [_SentenceLimit(tokenizer, input_ids.shape[1], settings.max_sentences_text)]
        )
    device = model.device
    with torch.inference_mode():
        output = model.generate(
            input_ids=input_ids.to(device),
            attention_mask=attention.to(device),
            generation_config=config,
            logits_processor=processors,
            stopping_criteria=stopping,
        )
    new_tokens = output[:, input_ids.shape[1] :].tolist()
    return [_cut_at_eos(row, eos_ids) for row in new_tokens]
