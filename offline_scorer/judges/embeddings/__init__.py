"""Sentence-embedding models: evidence for fitted verdict models (no text generation).

Like judge weights, an embedding model comes from a card in ``models/embeddings/``, is
verified against its sha256 before first use, and loads offline from the package that
ships it. Importing this package never imports torch.
"""

from offline_scorer.judges.embeddings._sentence import (
    EmbeddingCard,
    SentenceEmbedder,
    embedding_card,
    shared_embedder,
)

__all__ = ["EmbeddingCard", "SentenceEmbedder", "embedding_card", "shared_embedder"]
