"""Deterministic extraction for small judges: answers into statements, references into units.

A 135M judge asked to list an answer's statements copies examples, merges or loops; a
sentence and clause splitter does that job better and never changes a fact. It is the
``extraction="split"`` of the built-in scorers (the default for cards that say so).

* :func:`split_answer` - sentences, long ones cut at ``; `` and at ``, and/but/...`` clause
  boundaries when both sides are long enough.
* :func:`reference_groups` - a reference as units, each unit a list of interchangeable
  aliases: a list of accepted answers, or one string with `` / `` or `` | `` alternatives, is
  ONE unit with several aliases; prose references are split like answers.

Every list holds non-empty stripped strings, no repeats, at most :data:`MAX_ITEMS` (the rest
is folded into the last item, so nothing is dropped).
"""

from __future__ import annotations

import json
import re

MAX_ITEMS = 16
MIN_CLAUSE_WORDS = 5  # both sides of a clause cut need at least this many words
LONG_SENTENCE_WORDS = 18  # only sentences longer than this are cut into clauses

_ABBREVIATIONS = frozenset(
    [
        "mr",
        "mrs",
        "ms",
        "dr",
        "prof",
        "sr",
        "jr",
        "st",
        "mt",
        "ft",
        "vs",
        "etc",
        "inc",
        "ltd",
        "co",
        "corp",
        "no",
        "nos",
        "vol",
        "fig",
        "figs",
        "al",
        "approx",
        "dept",
        "est",
        "jan",
        "feb",
        "mar",
        "apr",
        "jun",
        "jul",
        "aug",
        "sep",
        "sept",
        "oct",
        "nov",
        "dec",
        "u.s",
        "u.k",
        "e.g",
        "i.e",
        "a.m",
        "p.m",
        "ca",
        "cf",
        "gen",
        "gov",
        "sen",
        "rep",
        "col",
        "lt",
        "sgt",
        "capt",
        "cmdr",
        "adm",
        "rev",
        "hon",
        "pp",
        "ed",
        "eds",
        "op",
    ]
)
_PLACEHOLDER = "\u2063"  # invisible separator used to protect dots that do not end a sentence
_CLAUSE_CONJ = re.compile(r",\s+(?=(?:and|but|while|whereas|although|though|so|yet)\s)", re.I)


def _protect(text: str) -> str:
    # decimals and version numbers: 3.5, 1.2.3
    text = re.sub(r"(?<=\d)\.(?=\d)", _PLACEHOLDER, text)
    # e.g. / i.e. / U.S. / a.m. style dotted abbreviations
    text = re.sub(
        r"\b((?:[A-Za-z]\.){2,})",
        lambda m: m.group(1).replace(".", _PLACEHOLDER),
        text,
    )

    # single initials (J. R. R. Tolkien) and known abbreviations followed by a dot
    def repl(m: re.Match[str]) -> str:
        word = m.group(1)
        if len(word) == 1 and word.isupper():
            return word + _PLACEHOLDER
        if word.lower() in _ABBREVIATIONS:
            return word + _PLACEHOLDER
        return m.group(0)

    text = re.sub(r"\b([A-Za-z]+)\.(?=\s|$)", repl, text)
    return text


def _sentences(text: str) -> list[str]:
    text = _protect(text)
    # paragraph / bullet breaks always end a unit
    parts: list[str] = []
    for block in re.split(r"\n\s*\n|\n\s*(?:[-*\u2022]|\d+[.)])\s+|\n(?=[A-Z])", text):
        block = block.strip()
        if not block:
            continue
        # sentence end: . ! ? (optionally followed by quotes/brackets) then space + capital/digit/quote
        pieces = re.split(r"(?<=[.!?])[\"'\u201d\u2019)\]]*\s+(?=[\"'\u201c(\[]?[A-Z0-9])", block)
        parts.extend(p for p in pieces if p.strip())
    return [p.replace(_PLACEHOLDER, ".").strip() for p in parts]


def _words(text: str) -> int:
    return len(text.split())


def _split_clauses(sentence: str) -> list[str]:
    if _words(sentence) <= LONG_SENTENCE_WORDS:
        return [sentence]
    out: list[str] = []
    for chunk in re.split(r";\s+", sentence):
        out.extend(_split_at(chunk, _CLAUSE_CONJ))
    # merge back any piece that came out too short (semicolon pieces included)
    merged: list[str] = []
    for piece in out:
        if merged and (_words(piece) < MIN_CLAUSE_WORDS or _words(merged[-1]) < MIN_CLAUSE_WORDS):
            merged[-1] = (
                merged[-1] + "; " + piece if not piece[:1].islower() else merged[-1] + ", " + piece
            )
        else:
            merged.append(piece)
    return merged


def _split_at(text: str, pattern: re.Pattern[str]) -> list[str]:
    pieces: list[str] = []
    start = 0
    for m in pattern.finditer(text):
        left, right = text[start : m.start()], text[m.end() :]
        if _words(left) >= MIN_CLAUSE_WORDS and _words(right) >= MIN_CLAUSE_WORDS:
            pieces.append(left)
            start = m.end()
    pieces.append(text[start:])
    return pieces


def _clean(items: list[str], limit: int | None = MAX_ITEMS) -> list[str]:
    out: list[str] = []
    seen: set[str] = set()
    for item in items:
        item = re.sub(r"\s+", " ", item).strip()
        if not item or not re.search(r"\w", item):
            continue
        key = item.lower()
        if key in seen:
            continue
        seen.add(key)
        out.append(item)
    if limit is not None and len(out) > limit:
        # keep the first limit - 1 and fold the rest into the last item (nothing dropped)
        out = [*out[: limit - 1], " ".join(out[limit - 1 :])]
    return out


def split_answer(text: object, limit: int | None = MAX_ITEMS) -> list[str]:
    """Statements of an answer: sentences, long ones cut into clauses. Empty text -> []."""
    if text is None:
        return []
    if not isinstance(text, str):
        text = json.dumps(text, separators=(",", ":"), ensure_ascii=False)
    if not text.strip():
        return []
    units: list[str] = []
    for sentence in _sentences(text):
        units.extend(_split_clauses(sentence))
    return _clean(units, limit)


def split_reference(reference: object, references: list[str] | None = None) -> list[str]:
    """Reference units as text: aliases of one unit are joined with `` / ``."""
    return [" / ".join(g) if len(g) > 1 else g[0] for g in reference_groups(reference, references)]


def aliases_of(reference: object, references: list[str] | None = None) -> list[str]:
    """All alternative surface forms of a short reference (list, ' / ' or ' | ' separated)."""
    if references:
        items = [str(r) for r in references if str(r).strip()]
    elif isinstance(reference, list):
        items = [str(r) for r in reference if str(r).strip()]
    elif reference is None:
        items = []
    else:
        text = (
            reference
            if isinstance(reference, str)
            else json.dumps(reference, separators=(",", ":"))
        )
        items = (
            re.split(r"\s+[/|]\s+|(?<=\w)/(?=\w)|\s*\|\s*", text) if _words(text) <= 30 else [text]
        )
    return _clean(items)


def reference_groups(reference: object, references: list[str] | None = None) -> list[list[str]]:
    """Reference as a list of units, each unit a list of interchangeable aliases.

    Short references with alternatives -> one unit with several aliases.
    Prose references (several sentences) -> one unit per statement, one alias each.
    """
    aliases = aliases_of(reference, references)
    if not aliases:
        return []
    if len(aliases) == 1:
        units = split_answer(aliases[0])
        return [[u] for u in units] if units else []
    return [aliases[:MAX_ITEMS]]
