"""Schema constraints on generation, built on Outlines' core engine.

Outlines compiles a JSON schema into a regular expression and an index (an automaton over
the tokenizer's vocabulary); a guide walks that index token by token and says which tokens
may come next. Two things here differ from Outlines' own generator, both measured:

* one schema per batch row: a relevancy analyze step needs exactly N verdicts for a run
  with N statements, so rows of one batch have different schemas. Outlines' generator
  applies one schema to a batch; this processor holds one guide per row.
* the token mask is applied with plain eager torch ops. Outlines' torch kernel is wrapped in
  ``torch.compile``, which costs about 16 s on the first call in a process on this CPU, and
  importing its module alone costs 2.5 s; the guide writes its bits into our buffer directly.

* a cap on the length of every JSON string (``max_string_chars`` characters and
  ``max_string_tokens`` tokens): a small model can loop inside a string ("the answer is
  yes. the answer is yes. ...", or "144144144..." one digit token at a time) until its
  token budget runs out. Past the cap, the row may only pick tokens that close the string (a regex
  ``maxLength`` would do the same, but multiplies the index size and compile time).

Indexes are compiled once per schema and reused for every later call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    import torch
    from outlines_core import Index, Vocabulary
    from transformers import PreTrainedTokenizerBase


class SchemaCompiler:
    """Compiles JSON schema texts into Outlines indexes, once per schema."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase):
        self._tokenizer = tokenizer
        self._vocabulary: Vocabulary | None = None
        self._indexes: dict[str, Index] = {}
        self._token_texts: list[str] | None = None
        self._quote_tokens: torch.Tensor | None = None

    @property
    def compiled_count(self) -> int:
        """How many distinct schemas have been compiled so far."""
        return len(self._indexes)

    def index_for(self, schema_json: str) -> Index:
        """Return the (cached) index of a canonical JSON schema text."""
        index = self._indexes.get(schema_json)
        if index is None:
            from outlines_core import Index
            from outlines_core.json_schema import build_regex_from_schema

            # An empty whitespace pattern gives compact JSON: about 35% fewer tokens.
            regex = build_regex_from_schema(schema_json, "")
            index = Index(regex, self._get_vocabulary())
            self._indexes[schema_json] = index
        return index

    def token_texts(self) -> list[str]:
        """The text of every token id (used to follow JSON string state)."""
        if self._token_texts is None:
            from outlines.models.transformers import TransformerTokenizer

            adapter = TransformerTokenizer(cast(Any, self._tokenizer))
            size = len(self._tokenizer)
            tokens = self._tokenizer.convert_ids_to_tokens(list(range(size)))
            self._token_texts = [adapter.convert_token_to_string(t) if t else "" for t in tokens]
        return self._token_texts

    def quote_tokens(self, vocab_size: int) -> torch.Tensor:
        """A boolean vector: which token ids contain a double quote."""
        if self._quote_tokens is None or self._quote_tokens.shape[0] != vocab_size:
            import torch

            texts = self.token_texts()
            flags = [i < len(texts) and '"' in texts[i] for i in range(vocab_size)]
            self._quote_tokens = torch.tensor(flags, dtype=torch.bool)
        return self._quote_tokens

    def _get_vocabulary(self) -> Vocabulary:
        if self._vocabulary is None:
            from outlines.backends.outlines_core import OutlinesCoreBackend
            from outlines.models.transformers import TransformerTokenizer

            adapter = TransformerTokenizer(cast(Any, self._tokenizer))
            self._vocabulary = OutlinesCoreBackend.create_outlines_core_vocabulary(
                adapter.get_vocab(),
                adapter.eos_token_id,
                adapter.eos_token,
                adapter.convert_token_to_string,
            )
        return self._vocabulary


class PerRowSchemaProcessor:
    """A transformers logits processor with one Outlines guide per batch row.

    Rows whose guide has finished may only produce end-of-sequence; transformers then
    pads them until the whole batch is done.
    """

    def __init__(
        self,
        indexes: Sequence[Index],
        compiler: SchemaCompiler,
        max_string_chars: int,
        max_string_tokens: int | None = None,
    ):
        self._indexes = list(indexes)
        self._compiler = compiler
        self._max_string_chars = max_string_chars
        self._max_string_tokens = max_string_tokens
        self._guides: list[Any] | None = None
        self._mask: torch.Tensor | None = None
        self._bit_positions: torch.Tensor | None = None
        self._strings: list[_StringState] = [_StringState() for _ in self._indexes]

    def finished(self, row: int) -> bool:
        """Whether the JSON of ``row`` is complete."""
        return self._guides is not None and bool(self._guides[row].is_finished())

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        import torch
        from outlines_core import Guide

        batch, vocab = scores.shape
        if self._guides is None:
            self._guides = [Guide(index) for index in self._indexes]
            self._mask = torch.zeros((batch, (vocab + 31) // 32), dtype=torch.int32)
            self._bit_positions = torch.arange(32, dtype=torch.int32)
        else:
            self._advance(input_ids)
        assert self._mask is not None and self._bit_positions is not None
        for row, guide in enumerate(self._guides):
            # The guide writes its allowed-token bits straight into the row (a contiguous
            # int32 CPU buffer). Outlines' kernel module does the same but imports
            # torch.compile machinery on import (2.5 s per process here).
            bits = self._mask[row]
            guide.write_mask_into(bits.data_ptr(), bits.numel(), bits.element_size())
        allowed = ((self._mask.unsqueeze(-1) >> self._bit_positions) & 1).bool()
        allowed = allowed.view(batch, -1)[:, :vocab]
        self._cap_strings(allowed)
        return scores.masked_fill(~allowed.to(scores.device), float("-inf"))

    def _advance(self, input_ids: torch.Tensor) -> None:
        assert self._guides is not None
        texts = self._compiler.token_texts()
        last_tokens = input_ids[:, -1].tolist()
        for guide, state, token in zip(self._guides, self._strings, last_tokens):
            # A finished guide has nothing to advance; the row is only being padded.
            if not guide.is_finished():
                guide.advance(token_id=token, return_tokens=False)
                state.feed(texts[token] if token < len(texts) else "")

    def _cap_strings(self, allowed: torch.Tensor) -> None:
        quotes: torch.Tensor | None = None
        for row, state in enumerate(self._strings):
            too_long = state.length >= self._max_string_chars or (
                self._max_string_tokens is not None and state.tokens >= self._max_string_tokens
            )
            if state.inside and too_long:
                if quotes is None:
                    quotes = self._compiler.quote_tokens(allowed.shape[1])
                closing = allowed[row] & quotes
                # Only narrow when the schema allows a closing token here (a constant
                # string longer than the cap must still be written out in full).
                if bool(closing.any()):
                    allowed[row] = closing


class _StringState:
    """Follows whether generated JSON text is inside a string, and how long it is."""

    __slots__ = ("escaped", "inside", "length", "tokens")

    def __init__(self) -> None:
        self.inside = False
        self.escaped = False
        self.length = 0
        self.tokens = 0

    def feed(self, text: str) -> None:
        """Follow one generated token's text."""
        if self.inside:
            self.tokens += 1
        for char in text:
            if not self.inside:
                if char == '"':
                    self.inside, self.length, self.tokens = True, 0, 0
            elif self.escaped:
                self.escaped = False
                self.length += 1
            elif char == "\\":
                self.escaped = True
            elif char == '"':
                self.inside = False
            else:
                self.length += 1
