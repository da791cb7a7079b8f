"""The transformers judge: a local model with Outlines-constrained JSON, free text, and
label probabilities read from one forward pass (see ``judges/_protocol.py``)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from typing import Any, Literal

from offline_scorer._exceptions import (
    ConfigurationError,
    JudgeOutputError,
    OfflineScorerError,
)
from offline_scorer.judges._cards import (
    DEFAULT_MODEL,
    ModelCard,
    card_for,
    model_fingerprint,
    resolve_model,
)
from offline_scorer.judges._keys import Prompt, schema_text
from offline_scorer.judges._protocol import (
    NO_USAGE,
    Answer,
    CallLog,
    ItemUsage,
    JudgeBase,
    JudgeCall,
    Request,
    parse_json_output,
)
from offline_scorer.judges._settings import Device, DType, GenerationSettings, JudgeConfig
from offline_scorer.judges.transformers._budget import (
    Encoded,
    budget_message,
    fit_to_window,
    json_budgets,
)
from offline_scorer.judges.transformers._constraint import PerRowSchemaProcessor, SchemaCompiler
from offline_scorer.judges.transformers._decoding import (
    _free_accelerator_memory,
    _join_prefill,
    decode_rows,
    is_out_of_memory,
    trim_to_sentence,
)
from offline_scorer.judges.transformers._labels import score_label_rows
from offline_scorer.judges.transformers._loading import (
    LoadedModel,
    fingerprint_with_dtype,
    planned_dtype,
    shared_model,
)


class TransformersJudge(JudgeBase):
    """A judge running a local transformers model, with Outlines-constrained JSON.

    The model loads on first use (or :meth:`load`), fully offline. Decoding is greedy.
    Prompts are sorted by length and sent in sub-batches of ``settings.batch_size`` (None:
    the card's recommendation for the device, 8 on a CPU and 64 on a GPU for the cards
    shipped) with left padding; results come back in input order.

    Args:
        model: a model card name, a local HF model directory, a .gguf file, or an already
            loaded :class:`LoadedModel`.
        settings: token budgets and batch size.
        device: ``auto``, ``cpu``, ``cuda`` or ``mps``.
        dtype: ``auto``, ``float32``, ``bfloat16`` or ``float16``.
        trust_remote_code: allow custom modelling code from the model directory.
        allow_pickle: allow pickle (``.bin``) weights.
        threads: CPU threads (default: physical cores).

    Example:
        >>> judge = TransformersJudge()  # doctest: +SKIP
        >>> judge.generate_text([[{"role": "user", "content": "Say hi"}]])  # doctest: +SKIP
    """

    backend = "transformers"
    """The backend table key of this judge (read verdicts are fitted per backend)."""

    @classmethod
    def from_config(cls, config: JudgeConfig) -> TransformersJudge:
        """The judge a :class:`JudgeConfig` describes (the backend table's builder)."""
        return cls(config.model, settings=config.generation, **config.load_options)

    def __init__(
        self,
        model: str | LoadedModel = DEFAULT_MODEL,
        *,
        settings: GenerationSettings | None = None,
        device: Device = "auto",
        dtype: DType = "auto",
        trust_remote_code: bool = False,
        allow_pickle: bool = False,
        threads: int | None = None,
    ):
        self._reference = model
        self._load_options: dict[str, Any] = {
            "device": device,
            "dtype": dtype,
            "trust_remote_code": trust_remote_code,
            "allow_pickle": allow_pickle,
            "threads": threads,
        }
        self._loaded: LoadedModel | None = model if isinstance(model, LoadedModel) else None
        self._parent: TransformersJudge | None = None
        self._compiler: Any = None
        self._fingerprint: str | None = None
        self._lock = threading.Lock()
        self._log = CallLog()
        self._system_ids: dict[str, list[int]] = {}
        # The card's recommendations for the device apply where the settings name none
        # (prompts per pass: GenerationSettings.prompts_per_pass). Looked up once: reading
        # the cards means reading every TOML file in models/.
        self._card = card_for(
            self._reference if isinstance(self._reference, str) else self.model_id
        )
        self.settings = settings or GenerationSettings()

    # ------------------------------------------------------------------ identity

    def load(self) -> LoadedModel:
        """Load the model now (it otherwise loads on the first call) and return it."""
        if self._parent is not None:
            return self._parent.load()
        with self._lock:
            if self._loaded is None:
                assert not isinstance(self._reference, LoadedModel)
                self._loaded = shared_model(str(self._reference), **self._load_options)
            return self._loaded

    @property
    def config(self) -> JudgeConfig | None:
        """The configuration that rebuilds this judge (None around an already loaded model)."""
        if not isinstance(self._reference, str):
            return None
        return JudgeConfig(model=self._reference, generation=self.settings, **self._load_options)

    def with_settings(self, settings: GenerationSettings) -> TransformersJudge:
        """A judge with other generation settings on the same weights (loaded once).

        The local agent uses it: its answers need other token budgets than the scorers'
        judge, but never a second copy of the model.
        """
        twin = TransformersJudge(self._reference, settings=settings, **self._load_options)
        twin._parent = self
        return twin

    @property
    def loaded(self) -> bool:
        """Whether the model is in memory."""
        if self._parent is not None:
            return self._parent.loaded
        return self._loaded is not None

    @property
    def model_id(self) -> str:
        """Short model name; loads the model to learn it only for non-card references."""
        if self._parent is not None:
            return self._parent.model_id
        if self._loaded is not None:
            return self._loaded.model_id
        return str(self._reference)

    @property
    def model_card(self) -> ModelCard | None:
        """The model card this judge runs (None for a directory or .gguf of your own)."""
        if self._parent is not None:
            return self._parent.model_card
        return self._card

    @property
    def fingerprint(self) -> str:
        """Identity of the weights (name plus checksum), known without loading them."""
        if self._parent is not None:
            return self._parent.fingerprint
        if self._loaded is not None:
            return self._loaded.fingerprint
        if self._fingerprint is None:
            assert not isinstance(self._reference, LoadedModel)
            resolved = resolve_model(self._reference)
            self._fingerprint = fingerprint_with_dtype(
                model_fingerprint(resolved),
                planned_dtype(resolved, self._load_options["device"], self._load_options["dtype"]),
            )
        return self._fingerprint

    # ------------------------------------------------------------------ calls

    def answer(self, request: Request) -> list[Answer[Any]]:
        """Answer one request (see :class:`JudgeBase` for the three calls).

        ``json``: one object per prompt, constrained to its JSON schema and validated; a
        prompt whose JSON did not close within its budget or did not validate gets a
        :class:`JudgeOutputError`, one too long for the context window a
        :class:`ContextLengthError`, as its answer's error (the others keep their values).

        ``text``: greedy free text that stops at the end-of-sequence token, at
        ``settings.max_sentences_text`` complete sentences, or at its token budget (then it
        is trimmed back to its last full sentence and marked ``truncated``). A prompt that
        ends with an assistant message is continued, and its answer starts with it.

        ``labels``: how likely each allowed label is as the prompt's continuation, read
        from ONE forward pass per sub-batch without decoding (a label of several tokens
        adds its tokens to a row). A label's log-probability is the sum of its tokens'
        log-probabilities after the prompt, rounded to 4 decimals, so an item alone and
        inside any batch gives the same numbers. ``hidden_state`` adds the last-layer
        hidden state at the prompt's last token, for a linear probe.
        """
        if request.kind == "labels":
            outcomes, usages = self._read_labels(request)
        elif request.kind == "json":
            outcomes, usages = self._generate_json(request)
        else:
            budgets = [self.settings.max_new_tokens_text] * len(request)
            outcomes, usages = self._generate("text", request.prompts, None, budgets)
        return [Answer.of(o, u) for o, u in zip(outcomes, usages, strict=True)]

    def _generate_json(self, request: Request) -> tuple[list[Any], list[ItemUsage]]:
        assert request.schemas is not None
        texts = [schema_text(s) for s in request.schemas]
        raw, usages = self._generate(
            "json", request.prompts, texts, json_budgets(texts, self.settings)
        )
        results = [
            outcome
            if isinstance(outcome, BaseException)
            else parse_json_output(outcome, schema, index=index)
            for index, (outcome, schema) in enumerate(zip(raw, request.schemas))
        ]
        return results, usages

    def _read_labels(self, request: Request) -> tuple[list[Any], list[ItemUsage]]:
        assert request.labels is not None
        prompts = request.prompts
        started = time.perf_counter()
        results: list[Any] = [None] * len(prompts)
        usages: list[ItemUsage | None] = [None] * len(prompts)
        if prompts:
            loaded = self.load()
            encoded = [self._encode(position, prompt) for position, prompt in enumerate(prompts)]
            valid = fit_to_window(encoded, [8] * len(encoded), 8, loaded, results, usages)
            outcomes = score_label_rows(
                loaded,
                [(item.token_ids, request.labels[item.position]) for item in valid],
                hidden_state=request.hidden_state,
                prefixes=loaded.prefixes if self.settings.prefix_cache else None,
                prefix_lengths=[item.item_prefix or item.prefix for item in valid],
                # An item's own prefix serves its reads once: it is not kept on disk.
                persist=[not item.item_prefix for item in valid],
                rows_per_pass=self.settings.reads_per_pass(loaded.device, self.model_card),
            )
            for item, (outcome, usage) in zip(valid, outcomes, strict=True):
                results[item.position] = outcome
                usages[item.position] = usage
        done = [usage or NO_USAGE for usage in usages]
        self._log.add(JudgeCall("labels", done, time.perf_counter() - started))
        return results, done

    # ------------------------------------------------------------------ internals

    def _generate(
        self,
        kind: Literal["json", "text"],
        prompts: Sequence[Prompt],
        schema_texts: list[str] | None,
        budgets: list[int],
    ) -> tuple[list[Any], list[ItemUsage]]:
        started = time.perf_counter()
        call = JudgeCall(kind)
        results: list[Any] = [None] * len(prompts)
        usages: list[ItemUsage | None] = [None] * len(prompts)
        if prompts:
            loaded = self.load()
            encoded = [self._encode(position, prompt) for position, prompt in enumerate(prompts)]
            floor = budgets[0] if kind == "text" else self.settings.max_new_tokens_json
            valid = fit_to_window(encoded, budgets, floor, loaded, results, usages)
            # Longest first: similar lengths share a sub-batch, so little padding is wasted.
            valid.sort(key=lambda item: -len(item.token_ids))
            size = self.settings.prompts_per_pass(loaded.device, self.model_card)
            for start in range(0, len(valid), size):
                chunk = valid[start : start + size]
                self._run_chunk(kind, chunk, schema_texts, results, usages)
        call.items = [usage or NO_USAGE for usage in usages]
        call.seconds = time.perf_counter() - started
        self._log.add(call)
        return results, call.items

    def _encode(self, position: int, prompt: Prompt) -> Encoded:
        tokenizer = self.load().tokenizer
        messages = [dict(message) for message in prompt]
        if not messages:
            raise ConfigurationError(f"Prompt {position} has no messages.")
        # The chat template renders the messages exactly once; the ids go straight to the model.
        # A final assistant message is a prefill: the model continues it.
        prefill = messages[-1]["role"] == "assistant"
        text = tokenizer.apply_chat_template(
            messages,
            tokenize=False,
            add_generation_prompt=not prefill,
            continue_final_message=prefill,
        )
        ids = list(tokenizer(text, add_special_tokens=False)["input_ids"])
        prefix = self._leading(messages[:1], ids) if len(messages) >= 2 else 0
        users = [i for i, message in enumerate(messages) if message["role"] == "user"]
        # A prompt with a focus message (a second user message: the part under judgment)
        # shares everything before it with the other reads of its item.
        item = self._leading(messages[: users[-1]], ids) if len(users) >= 2 else 0
        content = messages[-1]["content"] if prefill else ""
        return Encoded(position, ids, content, prefix=prefix, item_prefix=item)

    def _leading(self, messages: list[dict[str, Any]], ids: list[int]) -> int:
        """How many leading ids are these leading messages, rendered (0 when they are not a
        prefix of ``ids`` or do not start with the system message).

        A step's system block is the same for all its prompts, so its keys and values are
        computed once (see ``_loop.py``); the rendering of one text is remembered.
        """
        if not messages or messages[0]["role"] != "system":
            return 0
        key = json.dumps(messages, sort_keys=True)
        known = self._system_ids.get(key)
        if known is None:
            tokenizer = self.load().tokenizer
            text = tokenizer.apply_chat_template(messages, tokenize=False)
            known = list(tokenizer(text, add_special_tokens=False)["input_ids"])
            if len(self._system_ids) >= 64:
                self._system_ids.clear()
            self._system_ids[key] = known
        return len(known) if ids[: len(known)] == known else 0

    def _run_chunk(
        self,
        kind: Literal["json", "text"],
        chunk: list[Encoded],
        schema_texts: list[str] | None,
        results: list[Any],
        usages: list[ItemUsage | None],
    ) -> None:
        started = time.perf_counter()
        processor = None
        if kind == "json":
            assert schema_texts is not None
            chunk, indexes = self._compile_rows(chunk, schema_texts, results, usages)
            if not chunk:
                return
            processor = self._processor(indexes, [item.budget for item in chunk])
        try:
            # Each row stops at its own end or its own budget.
            generated = self._forward(chunk, processor)
        except OfflineScorerError:
            raise
        except Exception as error:
            if len(chunk) > 1:
                # One row must not sink its batch: retry in halves, down to one prompt, so
                # only the row that fails (out of memory even alone, or any other error in
                # its own generation) gets the error.
                if is_out_of_memory(error):
                    _free_accelerator_memory()
                middle = len(chunk) // 2
                for half in (chunk[:middle], chunk[middle:]):
                    self._run_chunk(kind, half, schema_texts, results, usages)
                return
            hint = (
                " even alone; use a smaller model or a shorter input"
                if is_out_of_memory(error)
                else ""
            )
            failure = JudgeOutputError(
                f"Generation failed for prompt {chunk[0].position}{hint}: "
                f"{type(error).__name__}: {error}",
                index=chunk[0].position,
            )
            failure.__cause__ = error
            results[chunk[0].position] = failure
            usages[chunk[0].position] = ItemUsage(len(chunk[0].token_ids), 0, 0.0)
            return
        share = (time.perf_counter() - started) / len(chunk)
        for row, (item, (ids, ended)) in enumerate(zip(chunk, generated)):
            text = str(self.load().tokenizer.decode(ids, skip_special_tokens=True))
            truncated = not ended
            if kind == "json":
                result: Any = text
                row_error = processor.error(row) if processor is not None else None
                if row_error is not None:
                    result = JudgeOutputError(
                        f"The JSON constraint of prompt {item.position} failed while "
                        f"generating: {row_error} Output so far: {text[:200]!r}",
                        index=item.position,
                        raw_output=text,
                    )
                elif processor is not None and not processor.finished(row):
                    result = JudgeOutputError(
                        budget_message(item, self.load().context_length, text),
                        index=item.position,
                        raw_output=text,
                    )
            else:
                text = _join_prefill(item.prefill, text)
                result = trim_to_sentence(text.strip()) if truncated else text.strip()
            results[item.position] = result
            usages[item.position] = ItemUsage(
                len(item.token_ids), len(ids), share, truncated=truncated
            )

    def _compile_rows(
        self,
        chunk: list[Encoded],
        schema_texts: list[str],
        results: list[Any],
        usages: list[ItemUsage | None],
    ) -> tuple[list[Encoded], list[Any]]:
        """Compile each row's schema; a row whose schema cannot be compiled fails alone."""

        if self._compiler is None:
            self._compiler = SchemaCompiler(self.load().tokenizer)
        kept, indexes = [], []
        for item in chunk:
            index = self._compiler.index_or_error(
                schema_texts[item.position], item.position, self.model_id
            )
            if isinstance(index, JudgeOutputError):
                results[item.position] = index
                usages[item.position] = ItemUsage(len(item.token_ids), 0, 0.0)
            else:
                kept.append(item)
                indexes.append(index)
        return kept, indexes

    def _processor(self, indexes: list[Any], limits: list[int]) -> Any:

        return PerRowSchemaProcessor(
            indexes,
            self._compiler,
            self.settings.max_string_chars,
            self.settings.max_string_tokens,
            limits,
        )

    def _forward(self, chunk: list[Encoded], processor: Any) -> list[tuple[list[int], bool]]:
        """Greedy generation of one sub-batch: (new ids, ended with EOS) per row; each row
        stops at its own budget."""
        return decode_rows(self.load(), chunk, processor, self.settings)
