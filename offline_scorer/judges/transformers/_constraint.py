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

* constant strings (a ``const`` or ``enum`` value, e.g. a ground-truth unit the analysis
  must name) are written with JSON ``\\uXXXX`` escapes for every non-ASCII character. A
  byte-level BPE vocabulary, as Outlines reads it, often cannot spell a character such as
  ``Ó`` as whole tokens, and then the index cannot be built at all ("the vocabulary provided
  is incompatible with the regex"). Escapes are plain ASCII, which every tokenizer spells,
  and the JSON parser decodes them back, so the validated value is the constant itself.

Indexes are compiled once per schema and reused by later calls, the most recently used
:data:`MAX_INDEXES` of them kept. Most schemas recur (a statement list of a given length, a
verdict list), but the similarity analysis names each run's own units, so with generated
verdicts every run has its own schema: about 15 MB of index for the 1.5B card's
vocabulary, which an unbounded store kept for every run of a dataset (6.7 GB peak on 250
dev runs).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from offline_scorer._exceptions import JudgeOutputError

if TYPE_CHECKING:
    import torch
    from outlines_core import Index, Vocabulary
    from transformers import PreTrainedTokenizerBase


def pack_bits(flags: torch.Tensor) -> torch.Tensor:
    """A boolean vector packed into int32 words, flag ``i`` at bit ``i % 32`` of word
    ``i // 32``: the layout Outlines' guides write their masks in."""
    import torch

    words = (flags.shape[0] + 31) // 32
    padded = torch.zeros(words * 32, dtype=torch.int64)
    padded[: flags.shape[0]] = flags.to(torch.int64)
    values = (padded.view(words, 32) << torch.arange(32, dtype=torch.int64)).sum(dim=1)
    # the words as unsigned 32-bit numbers, stored in int32 (bit 31 is the sign bit)
    return (values - ((values >> 31) << 32)).to(torch.int32)


_BYTE_BITS: dict[str, torch.Tensor] = {}


def unpack_bits(bits: torch.Tensor, vocab: int) -> torch.Tensor:
    """Boolean [rows, vocab] from int32 words [rows, words], on the words' device.

    Each byte of the words is looked up in a 256 x 8 table of its bits (one
    ``index_select``): shifting every word by 0..31 took 41 ms for 64 rows of a 151,936-token
    vocabulary on one core here, the lookup 5. The words are read as bytes in memory order,
    which is token order on little-endian processors (x86-64 and ARM64, every platform
    torch ships for).
    """
    import torch

    key = str(bits.device)
    table = _BYTE_BITS.get(key)
    if table is None:
        values = torch.arange(256, dtype=torch.int32).unsqueeze(-1)
        flags = (values >> torch.arange(8, dtype=torch.int32)) & 1
        table = flags.to(torch.uint8).to(bits.device)
        _BYTE_BITS[key] = table
    index = bits.contiguous().view(torch.uint8).reshape(-1).long()
    looked_up = table.index_select(0, index)  # [rows x words x 4, 8], dtype-generic
    return looked_up.view(torch.bool).view(bits.shape[0], -1)[:, :vocab]


def _one_token(bits: torch.Tensor) -> int | None:
    """The token id when exactly one bit of these words is set, else None."""
    nonzero = bits.nonzero()
    if nonzero.shape[0] != 1:
        return None
    word_index = int(nonzero[0, 0])
    word = int(bits[word_index]) & 0xFFFFFFFF
    if word & (word - 1):
        return None
    return word_index * 32 + word.bit_length() - 1


# Indexes a compiler keeps (least recently used out first): more than the rows of any batch,
# so a batch's schemas stay, and at most about 0.5 GB of the largest indexes measured.
MAX_INDEXES = 32


class SchemaCompiler:
    """Compiles JSON schema texts into Outlines indexes, keeping the recently used ones."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, max_indexes: int = MAX_INDEXES):
        self._tokenizer = tokenizer
        self._vocabulary: Vocabulary | None = None
        self._indexes: OrderedDict[str, Index] = OrderedDict()
        self._max_indexes = max_indexes
        self._compiled = 0
        self._token_texts: list[str] | None = None
        self._quote_tokens: torch.Tensor | None = None
        self._quote_bits: torch.Tensor | None = None
        self._quote_bits_size = 0

    @property
    def eos_token_id(self) -> int:
        """The token a stopped row writes until its batch is done."""
        return int(self._tokenizer.eos_token_id)

    @property
    def compiled_count(self) -> int:
        """How many indexes have been compiled so far (a schema again after its eviction
        counts again)."""
        return self._compiled

    @property
    def kept_count(self) -> int:
        """How many indexes are kept now (at most ``max_indexes``)."""
        return len(self._indexes)

    def index_for(self, schema_json: str) -> Index:
        """Return the (cached) index of a canonical JSON schema text."""
        index = self._indexes.get(schema_json)
        if index is not None:
            self._indexes.move_to_end(schema_json)
        else:
            from outlines_core import Index
            from outlines_core.json_schema import build_regex_from_schema

            # An empty whitespace pattern gives compact JSON: about 35% fewer tokens.
            ascii_schema, constants = _placeholders_for_constants(json.loads(schema_json))
            regex = build_regex_from_schema(json.dumps(ascii_schema, ensure_ascii=False), "")
            index = Index(_escaped_constants(regex, constants), self._get_vocabulary())
            self._compiled += 1
            self._indexes[schema_json] = index
            while len(self._indexes) > self._max_indexes:
                self._indexes.popitem(last=False)  # rows still decoding hold their own
        return index

    def index_or_error(self, schema_json: str, position: int, model_id: str) -> Any:
        """The index of one prompt's schema, or the :class:`JudgeOutputError` that fails
        that prompt alone when its schema cannot be compiled for this vocabulary."""

        try:
            return self.index_for(schema_json)
        except Exception as error:
            failure = JudgeOutputError(
                f"The JSON schema of prompt {position} cannot be enforced with the "
                f"vocabulary of model '{model_id}' ({type(error).__name__}: "
                f"{str(error)[:300]}). Its text needs characters the vocabulary cannot spell "
                "where the schema fixes them (a pattern); the other prompts of the batch are "
                "not affected.",
                index=position,
            )
            failure.__cause__ = error
            return failure

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

    def quote_bits(self, vocab_size: int) -> torch.Tensor:
        """:meth:`quote_tokens` packed as the guides write masks: int32 words, token ``i``
        at bit ``i % 32`` of word ``i // 32``."""
        if self._quote_bits is None or self._quote_bits_size != vocab_size:
            self._quote_bits = pack_bits(self.quote_tokens(vocab_size))
            self._quote_bits_size = vocab_size
        return self._quote_bits

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


_PLACEHOLDER = "qzConst{}Zq"
# Characters with a meaning in a regex, outside character classes.
_REGEX_SPECIAL = frozenset("\\.+*?()|[]{}^$")


def _placeholders_for_constants(schema: Any) -> tuple[Any, dict[str, str]]:
    """Replace every non-ASCII constant string of a JSON schema by an ASCII placeholder.

    Returns the new schema and {placeholder: constant}; the placeholders are letters and
    digits only, so the schema-to-regex conversion writes them out unchanged.
    """
    constants: dict[str, str] = {}

    def swap(value: Any) -> Any:
        if isinstance(value, str) and not value.isascii():
            placeholder = _PLACEHOLDER.format(len(constants))
            constants[placeholder] = value
            return placeholder
        return value

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            out = {}
            for key, value in node.items():
                if key == "const":
                    out[key] = swap(value)
                elif key == "enum" and isinstance(value, list):
                    out[key] = [swap(item) for item in value]
                else:
                    out[key] = walk(value)
            return out
        if isinstance(node, list):
            return [walk(item) for item in node]
        return node

    return walk(schema), constants


def _escaped_constants(regex: str, constants: dict[str, str]) -> str:
    """Put each constant back into the regex as its ASCII-only JSON spelling."""
    for placeholder, value in constants.items():
        if placeholder not in regex:
            raise RuntimeError(
                f"Outlines wrote the constant placeholder {placeholder!r} differently in the "
                "schema's regex; this Outlines version is not supported."
            )
        spelled = json.dumps(value, ensure_ascii=True)[1:-1]
        pattern = "".join("\\" + char if char in _REGEX_SPECIAL else char for char in spelled)
        regex = regex.replace(placeholder, pattern)
    return regex


class PerRowSchemaProcessor:
    """One Outlines guide per batch row: a logits processor for ``generate`` and the
    constraint of our own decode loop (``_loop.py``).

    Rows whose guide has finished may only produce end-of-sequence. A row whose guide fails
    (an error while advancing or masking, or a state that allows no token at all) is
    stopped the same way and keeps its error (:meth:`error`): the other rows of the batch
    go on. A row that has taken its own budget of tokens may only end.
    """

    def __init__(
        self,
        indexes: Sequence[Index],
        compiler: SchemaCompiler,
        max_string_chars: int,
        max_string_tokens: int | None = None,
        limits: Sequence[int] | None = None,
    ):
        self._indexes = list(indexes)
        # Per row, the most new tokens it may take (rows of one batch have their own
        # budgets). Past it the row may only end.
        self._limits = list(limits) if limits is not None else None
        self._taken = [0] * len(self._indexes)
        self._compiler = compiler
        self._max_string_chars = max_string_chars
        self._max_string_tokens = max_string_tokens
        self._guides: list[Any] | None = None
        self._strings: list[_StringState] = [_StringState() for _ in self._indexes]
        self._errors: list[str | None] = [None] * len(self._indexes)
        # A row's next mask words, computed early by forced() and used by the next allowed().
        self._pending: dict[int, torch.Tensor] = {}

    def finished(self, row: int) -> bool:
        """Whether the JSON of ``row`` is complete."""
        return self._guides is not None and bool(self._guides[row].is_finished())

    def error(self, row: int) -> str | None:
        """Why the constraint of ``row`` failed during generation (None when it did not)."""
        return self._errors[row]

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        """The logits-processor form, for ``generate``: every row steps together."""
        batch, vocab = scores.shape
        if self._guides is None:
            self._start()
        else:
            for row, token in enumerate(input_ids[:, -1].tolist()):
                self.advance(row, int(token))
        allowed = self.allowed(range(batch), vocab, scores.device)
        return scores.masked_fill(~allowed, float("-inf"))

    def allowed(self, rows: Sequence[int], vocab: int, device: Any = None) -> torch.Tensor:
        """Boolean [len(rows), vocab] on ``device`` (None: the CPU): the tokens each of
        these rows may take next.

        The rows' masks stay packed (32 tokens a word) until here, and are unpacked in one
        operation on the device: on a GPU that moves 32 times fewer bytes and takes the
        unpacking off the CPU.
        """
        import torch

        self._start()
        words = [self._pending.pop(row, None) for row in rows]
        bits = torch.stack(
            [w if w is not None else self._row_bits(row, vocab) for row, w in zip(rows, words)]
        )
        return unpack_bits(bits if device is None else bits.to(device), vocab)

    def advance(self, row: int, token: int) -> None:
        """Feed the token ``row`` took (a finished or failed row has nothing to follow)."""
        self._start()
        assert self._guides is not None
        self._pending.pop(row, None)
        guide = self._guides[row]
        if self._errors[row] is not None or guide.is_finished():
            return
        self._taken[row] += 1
        try:
            guide.advance(token_id=token, return_tokens=False)
        except Exception as error:
            self._fail(row, f"{type(error).__name__}: {error}")
            return
        texts = self._compiler.token_texts()
        self._strings[row].feed(texts[token] if token < len(texts) else "")

    def forced(self, row: int, vocab: int) -> int | None:
        """The one token ``row`` may take next, when exactly one is allowed (else None)."""
        self._start()
        bits = self._row_bits(row, vocab)
        self._pending[row] = bits
        return _one_token(bits)

    def _start(self) -> None:
        if self._guides is None:
            from outlines_core import Guide

            self._guides = [Guide(index) for index in self._indexes]

    def _row_bits(self, row: int, vocab: int) -> torch.Tensor:
        """The tokens ``row`` may take next, as int32 words (see :func:`pack_bits`)."""
        import torch

        assert self._guides is not None
        words = (vocab + 31) // 32
        bits = torch.zeros(words, dtype=torch.int32)
        if self._errors[row] is None:
            # The guide writes its allowed-token bits straight into a contiguous int32 CPU
            # buffer. Outlines' kernel module does the same but imports torch.compile
            # machinery on import (2.5 s per process here).
            try:
                self._guides[row].write_mask_into(
                    bits.data_ptr(), bits.numel(), bits.element_size()
                )
            except Exception as error:
                self._fail(row, f"{type(error).__name__}: {error}")
            if vocab % 32:  # ids past the model's vocabulary are never allowed
                bits[-1] &= (1 << (vocab % 32)) - 1
            self._cap_string(row, bits, vocab)
            if not bool(bits.any()) and self._errors[row] is None:
                self._fail(row, "the constraint allows no next token here.")
        past_budget = self._limits is not None and self._taken[row] >= self._limits[row]
        if self._errors[row] is not None or past_budget:
            # A failed row, or one past its own budget (reported as cut), may only end.
            eos = self._compiler.eos_token_id
            bits.zero_()
            bit = 1 << (eos % 32)
            bits[eos // 32] = bit - (1 << 32) if bit >= 1 << 31 else bit
        return bits

    def _fail(self, row: int, reason: str) -> None:
        self._errors[row] = reason

    def _cap_string(self, row: int, bits: torch.Tensor, vocab: int) -> None:
        state = self._strings[row]
        too_long = state.length >= self._max_string_chars or (
            self._max_string_tokens is not None and state.tokens >= self._max_string_tokens
        )
        if state.inside and too_long:
            closing = bits & self._compiler.quote_bits(vocab)
            # Only narrow when the schema allows a closing token here (a constant string
            # longer than the cap must still be written out in full).
            if bool(closing.any()):
                bits.copy_(closing)


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
