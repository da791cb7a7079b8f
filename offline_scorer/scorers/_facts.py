"""Extraction keeps the facts: a statement or unit may not assert what its source does not.

A small judge asked to list an answer's statements sometimes changes a fact it copies
("arrested in Sudan in 1994" became "... in 2014"), and the changed statement is then
judged. Every item the judge extracts is checked against its source text: a number (in
digits) or a capitalised name that the source does not contain sends the item
back to the source sentence closest to it. The step result counts these fallbacks
(``fact_fallbacks``, present when the judge extracted).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from offline_scorer.scorers._features import numbers, token_f1
from offline_scorer.scorers._split import split_answer

_WORD = re.compile(r"[^\W\d_][\w'’-]*")
_DIGITS = re.compile(r"\d+(?:[.,]\d+)*")


def unsupported_facts(item: str, source: str) -> list[str]:
    """The numbers (in digits) and capitalised names of ``item`` that ``source`` lacks.

    A capitalised word counts as a name only when the source lacks it in any case, so a
    sentence-initial "The" or "Water" is never flagged when the source has "the" or "water".

    Example:
        >>> unsupported_facts("He was arrested in Sudan in 2014.", "Arrested in Sudan in 1994.")
        ['2014']
    """
    return _Source(source).unsupported(item)


class _Source:
    """What a source text states: its numbers and its words (read once per source)."""

    def __init__(self, text: str):
        self.numbers = numbers(text)
        self.words = {word.casefold() for word in _WORD.findall(text)}

    def unsupported(self, item: str) -> list[str]:
        # Numbers written in digits; the source may hold them in digits or words ("two").
        written = {m.group(0).replace(",", "") for m in _DIGITS.finditer(item)}
        names = [
            word
            for word in _WORD.findall(item)
            if word[0].isupper() and word.casefold() not in self.words
        ]
        return sorted(written - self.numbers) + sorted(set(names), key=names.index)


def keep_facts(items: Sequence[str], source: str) -> tuple[list[str], int]:
    """``items`` with every item that asserts an unsupported fact replaced by its source
    sentence (the one sharing the most words with it), and how many were replaced."""
    facts = _Source(source)
    kept: list[str] = []
    fallbacks = 0
    sentences: list[str] | None = None
    for item in items:
        if source.strip() and facts.unsupported(item):
            sentences = sentences or split_answer(source, limit=None) or [source.strip()]
            fallbacks += 1
            item = _plain(max(sentences, key=lambda s: (token_f1(item, s), -sentences.index(s))))
        kept.append(item)
    return kept, fallbacks


def _plain(sentence: str) -> str:
    """A source sentence as an extracted item may be written: on one line, without double
    quotes or backslashes (later steps quote items inside constrained JSON)."""
    return " ".join(re.sub(r"[\x00-\x1f]", " ", sentence).replace('"', "'").split()).replace(
        "\\", "/"
    )
