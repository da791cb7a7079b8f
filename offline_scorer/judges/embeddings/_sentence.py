"""A mean-pooled sentence encoder (all-MiniLM-L6-v2 and its kind), loaded offline."""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from offline_scorer._exceptions import ModelLoadError, UnknownModelError
from offline_scorer._resources import data_folder
from offline_scorer.judges._cards import ModelSource, sha256_of, source_path
from offline_scorer.judges.transformers._quiet import quiet_transformers

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

COSINE_DIGITS = 4
"""Cosines are rounded to this many decimals (see :meth:`SentenceEmbedder.cosine`)."""


class EmbeddingCard(BaseModel):
    """One known sentence-embedding model."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str
    license: str
    parameters: int
    dimensions: int
    max_tokens: int
    source: ModelSource


def embedding_card(name: str) -> EmbeddingCard:
    """The embedding card called ``name`` (from ``models/embeddings/``).

    Raises:
        UnknownModelError: no such card.
    """
    path = data_folder("models") / "embeddings" / f"{name}.toml"
    if not path.is_file():
        raise UnknownModelError(f"Unknown embedding model '{name}': no card {path.name}.")
    with path.open("rb") as handle:
        return EmbeddingCard.model_validate(tomllib.load(handle))


class SentenceEmbedder:
    """Embeds texts one at a time (so a text's vector never depends on its batch).

    The weights are checked against the card's sha256 on load. Each text is encoded alone:
    padding a batch changes the last bits of the vectors, and evidence must not depend on
    what else is being scored. The encoder is small (a few milliseconds per sentence on a
    CPU) and recent vectors are memoized.

    Args:
        card: the embedding model's card.
        device: where to run (``cpu`` by default; it is small).
    """

    def __init__(self, card: EmbeddingCard, *, device: str = "cpu"):
        self.card = card
        self.device = device
        self._model: Any = None
        self._tokenizer: Any = None
        self._memo: OrderedDict[str, list[float]] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        """The card name."""
        return self.card.name

    def _load(self) -> None:
        weights = source_path(self.card.source)
        if weights is None:
            raise ModelLoadError(
                f"The sentence-embedding model '{self.card.name}' used by this judge's verdict "
                f"model is not installed. Install it with: {self.card.source.install} (or "
                "choose verdicts='generate' / a card without a fitted verdict model)."
            )
        if self.card.source.sha256 and sha256_of(weights) != self.card.source.sha256:
            raise ModelLoadError(
                f"The weights of embedding model '{self.card.name}' ({weights}) do not match "
                "the sha256 in its card: the file is corrupt or not the expected version. "
                f"Reinstall it: {self.card.source.install}"
            )
        from transformers import AutoModel, AutoTokenizer

        folder = str(Path(weights).parent)
        with quiet_transformers():
            self._tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
            model = AutoModel.from_pretrained(folder, local_files_only=True, use_safetensors=True)
        self._model = model.to(self.device).eval()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """L2-normalised mean-pooled vectors, one per text, each computed alone."""
        with self._lock:
            if self._model is None:
                self._load()
            return [self._one(text) for text in texts]

    def cosine(self, first: str, second: str) -> float:
        """Cosine similarity of two texts, rounded to :data:`COSINE_DIGITS` decimals."""
        a, b = self.embed([first, second])
        return round(sum(x * y for x, y in zip(a, b)), COSINE_DIGITS)

    def _one(self, text: str) -> list[float]:
        cached = self._memo.get(text)
        if cached is not None:
            self._memo.move_to_end(text)
            return cached
        import torch

        batch = self._tokenizer(
            [text or " "],
            truncation=True,
            max_length=self.card.max_tokens,
            return_tensors="pt",
        ).to(self.device)
        with torch.inference_mode():
            hidden = self._model(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            vector = torch.nn.functional.normalize(pooled, p=2, dim=1)[0].float().cpu().tolist()
        self._memo[text] = vector
        if len(self._memo) > 4096:
            self._memo.popitem(last=False)
        return vector


_SHARED: dict[str, SentenceEmbedder] = {}
_SHARED_LOCK = threading.Lock()


def shared_embedder(name: str) -> SentenceEmbedder:
    """One embedder per card name in this process (loaded on first use)."""
    with _SHARED_LOCK:
        if name not in _SHARED:
            _SHARED[name] = SentenceEmbedder(embedding_card(name))
        return _SHARED[name]
