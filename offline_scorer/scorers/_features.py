"""The inputs of the verdict models: named, pure, deterministic, and computed only when a
shipped model reads them.

* relevancy (question x statement, in its answer): :data:`RELEVANCY_INPUTS` - coverage of
  the question, novelty, token F1, answer type (a number for "how many", a name for
  "who"), refusals, numbers and negation, lengths; plus ``cos`` (sentence-embedding cosine
  of question and statement), ``answer_cos`` (of question and whole answer) and
  ``answer_len`` (the whole answer's log word count), computed by
  ``_verdicts.relevancy_inputs``.
* similarity (reference unit x answer unit): :data:`SIMILARITY_INPUTS` - token F1,
  containment both ways, length ratio, numbers one side lacks, negation mismatch, exact
  equality, the reference's length, a swapped name (each side has one the other lacks)
  and how much the two sides share besides it (``swap_rest``); plus ``cos``.

Every input is a function of the two texts; a verdict model names the inputs it reads
(at most ten) and nothing else is computed.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from collections.abc import Callable, Sequence

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)
STOP_WORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "of",
        "to",
        "in",
        "on",
        "at",
        "for",
        "by",
        "with",
        "from",
        "and",
        "or",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "am",
        "do",
        "does",
        "did",
        "what",
        "who",
        "whom",
        "whose",
        "which",
        "when",
        "where",
        "why",
        "how",
        "can",
        "could",
        "should",
        "would",
        "will",
        "shall",
        "may",
        "might",
        "must",
        "i",
        "you",
        "he",
        "she",
        "it",
        "we",
        "they",
        "me",
        "my",
        "your",
        "his",
        "her",
        "its",
        "our",
        "their",
        "this",
        "that",
        "these",
        "those",
        "there",
        "here",
        "as",
        "if",
        "then",
        "than",
        "so",
        "not",
        "no",
        "yes",
        "about",
        "into",
        "over",
        "under",
        "any",
        "some",
        "s",
        "t",
        "just",
        "also",
        "very",
        "has",
        "have",
        "had",
        "having",
        "get",
        "got",
        "one",
        "also",
        "other",
        "such",
        "up",
        "out",
        "more",
        "most",
        "only",
        "own",
        "same",
        "too",
        "all",
        "both",
        "each",
        "few",
        "many",
        "much",
    ]
)
NEGATIONS = frozenset(
    [
        "not",
        "no",
        "never",
        "none",
        "nobody",
        "nothing",
        "neither",
        "nor",
        "cannot",
        "cant",
        "dont",
        "doesnt",
        "didnt",
        "isnt",
        "arent",
        "wasnt",
        "werent",
        "wont",
        "wouldnt",
        "shouldnt",
        "couldnt",
        "without",
        "hardly",
    ]
)
_REFUSAL = re.compile(
    r"^\s*(i have no comment|no comment|i don'?t know|i do not know|unknown|n/?a|none|"
    r"i'?m not sure|i cannot answer|i can'?t answer|sorry|error\b|i am unable|as an ai)",
    re.I,
)
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_CAPITALISED = re.compile(r"\b[A-Z][A-Za-z]+")
_NUMBER_WORDS = {
    "zero": "0",
    "one": "1",
    "two": "2",
    "three": "3",
    "four": "4",
    "five": "5",
    "six": "6",
    "seven": "7",
    "eight": "8",
    "nine": "9",
    "ten": "10",
    "eleven": "11",
    "twelve": "12",
    "first": "1",
    "second": "2",
    "third": "3",
    "fourth": "4",
    "fifth": "5",
}


def normalize_tokens(text: str) -> list[str]:
    """SQuAD-style (as benchmarks/agreement.py): lower, no punctuation, no articles."""
    lowered = (text or "").lower().translate(_PUNCT)
    return _ARTICLES.sub(" ", lowered).split()


def stem(word: str) -> str:
    """Tiny suffix stripper (deterministic; enough to match plurals and tenses)."""
    for suffix, min_len in (
        ("ational", 8),
        ("ization", 8),
        ("ations", 7),
        ("ation", 6),
        ("ness", 6),
        ("ments", 7),
        ("ment", 6),
        ("ings", 6),
        ("ing", 5),
        ("edly", 6),
        ("ied", 5),
        ("ies", 5),
        ("ed", 4),
        ("ly", 5),
        ("es", 5),
        ("s", 4),
    ):
        if word.endswith(suffix) and len(word) >= min_len:
            base = word[: -len(suffix)]
            return base + ("y" if suffix in ("ied", "ies") else "")
    return word


def content_tokens(text: str) -> list[str]:
    toks = []
    for t in normalize_tokens(text):
        t = _NUMBER_WORDS.get(t, t)
        if t in STOP_WORDS:
            continue
        toks.append(stem(t))
    return toks


def numbers(text: str) -> set[str]:
    found = {m.group(0).replace(",", "") for m in _NUMBER.finditer(text or "")}
    for t in normalize_tokens(text):
        if t in _NUMBER_WORDS:
            found.add(_NUMBER_WORDS[t])
    return found


def names(text: str) -> set[str]:
    """Capitalised non-stopwords ("Rome", "Milan"), as content tokens (lowered, stemmed).

    Sentence-initial words count too: a reference often opens with its entity ("Rome is
    the capital of Italy."); an opening "The" or "It" is a stopword and drops out.
    """
    found = set()
    for word in _CAPITALISED.findall(text or ""):
        lowered = word.lower()
        if lowered not in STOP_WORDS and lowered not in _NUMBER_WORDS:
            found.add(stem(lowered))
    return found


def has_negation(text: str) -> bool:
    toks = (text or "").lower().replace("n't", " not").translate(_PUNCT).split()
    return any(t in NEGATIONS for t in toks)


def token_f1(a: str, b: str) -> float:
    pa, pb = normalize_tokens(a), normalize_tokens(b)
    if not pa or not pb:
        return float(pa == pb)
    common = sum((Counter(pa) & Counter(pb)).values())
    if common == 0:
        return 0.0
    p, r = common / len(pa), common / len(pb)
    return 2 * p * r / (p + r)


def containment(a: str, b: str) -> float:
    """Share of a's distinct content tokens found in b (0 when a has none)."""
    ta, tb = set(content_tokens(a)), set(content_tokens(b))
    if not ta:
        return 0.0
    return len(ta & tb) / len(ta)


def _wh_type(question: str) -> str:
    q = (question or "").lower()
    if re.search(r"\bhow (many|much|long|old|far|tall|big)\b|\bwhat (percentage|number)\b", q):
        return "number"
    if re.search(r"\bwhen\b|\bwhat year\b|\bwhat date\b|\bwhat time\b", q):
        return "date"
    if re.search(r"\bwho\b|\bwhom\b|\bwhose\b", q):
        return "person"
    if re.search(r"\bwhere\b", q):
        return "place"
    if re.search(r"\bwhy\b|\bhow\b", q):
        return "explain"
    return "other"


def _answer_type_match(question: str, statement: str) -> float:
    kind = _wh_type(question)
    if kind in ("number", "date"):
        return float(
            bool(numbers(statement))
            or bool(
                re.search(
                    r"\b(january|february|march|april|may|june|july|august|september|october|"
                    r"november|december|century|decade|ago|year|years)\b",
                    statement.lower(),
                )
            )
        )
    if kind in ("person", "place"):
        qwords = set(normalize_tokens(question))
        caps = [
            w
            for w in re.findall(r"\b[A-Z][a-z]+", statement[1:] if statement else "")
            if w.lower() not in qwords
        ]
        return float(bool(caps))
    if kind == "explain":
        return float(
            bool(
                re.search(
                    r"\b(because|since|due|so|cause|reason|by|through|when)\b", statement.lower()
                )
            )
        )
    return 0.5


def _log_len(text: str) -> float:
    return math.log1p(len(normalize_tokens(text)))


def _covered(a: str, b: str) -> float:
    """Share of a's distinct content tokens found in b (0 when a has none)."""
    return containment(a, b)


def _number_missing(a: str, b: str) -> float:
    """1 when ``a`` has a number ``b`` lacks."""
    return float(bool(numbers(a) - numbers(b)))


def _negation_mismatch(a: str, b: str) -> float:
    return float(has_negation(a) != has_negation(b))


def _length_ratio(a: str, b: str) -> float:
    """log((words of b + 1) / (words of a + 1))."""
    return math.log((len(normalize_tokens(b)) + 1) / (len(normalize_tokens(a)) + 1))


Input = Callable[[str, str], float]
"""One lexical input of a verdict: a function of its two texts."""

RELEVANCY_INPUTS: dict[str, Input] = {
    # (question, statement)
    "q_cov": _covered,
    "novel": lambda q, s: 1.0 - _covered(s, q),
    "tok_f1": lambda q, s: token_f1(s, q),
    "len_ratio": _length_ratio,
    "num_miss_ab": _number_missing,
    "num_miss_ba": lambda q, s: _number_missing(s, q),
    "neg_mismatch": _negation_mismatch,
    "type_match": lambda q, s: _answer_type_match(q, s),
    "refusal": lambda q, s: float(bool(_REFUSAL.search(s))),
    "stmt_len": lambda q, s: _log_len(s),
    "has_num": lambda q, s: float(bool(numbers(s))),
}
"""The lexical relevancy inputs by name, each of (question, statement)."""

SIMILARITY_INPUTS: dict[str, Input] = {
    # (reference unit, answer unit)
    "tok_f1": lambda r, a: token_f1(a, r),
    "cont_ab": _covered,
    "cont_ba": lambda r, a: _covered(a, r),
    "len_ratio": _length_ratio,
    "num_miss_ab": _number_missing,
    "num_miss_ba": lambda r, a: _number_missing(a, r),
    "neg_mismatch": _negation_mismatch,
    "exact": lambda r, a: float(
        bool(normalize_tokens(r)) and normalize_tokens(r) == normalize_tokens(a)
    ),
    "ref_len": lambda r, a: _log_len(r),
    "name_swap": lambda r, a: float(_swapped_names(r, a) is not None),
    "swap_rest": lambda r, a: _swap_rest(r, a),
}
"""The lexical similarity inputs by name, each of (reference unit, answer unit)."""


def lexical_inputs(
    table: dict[str, Input], names: Sequence[str], a: str, b: str
) -> dict[str, float]:
    """The named inputs of ``table`` that ``names`` asks for (others are skipped)."""
    return {name: float(table[name](a or "", b or "")) for name in names if name in table}


def _abbreviates(short: str, long: str) -> bool:
    """Whether ``short`` holds an acronym of capitalised words of ``long`` ("UNEP")."""
    initials = "".join(word[0] for word in _CAPITALISED.findall(long or ""))
    return any(acronym in initials for acronym in _ACRONYM.findall(short or ""))


_ACRONYM = re.compile(r"\b[A-Z]{2,}\b")


def _swapped_names(reference: str, answer: str) -> tuple[set[str], set[str]] | None:
    """The names each side has and the other lacks, when both sides have one (a swapped
    entity: "Rome is the capital of Italy." against "The capital of Italy is Milan."), which
    token overlap and the embedding cosine both miss; None otherwise. An acronym of the
    other side's names ("UNEP" for "United Nations Environment Programme") is the same name.
    """
    if _abbreviates(answer, reference) or _abbreviates(reference, answer):
        return None
    only_ref = names(reference) - set(content_tokens(answer))
    only_answer = names(answer) - set(content_tokens(reference))
    return (only_ref, only_answer) if only_ref and only_answer else None


def _swap_rest(reference: str, answer: str) -> float:
    """With the swapped names taken out, the F1 of the two sides' other content tokens (0
    when no name is swapped): a pair that says the same thing of another entity shares all
    of it, 1."""
    swapped = _swapped_names(reference, answer)
    if swapped is None:
        return 0.0
    ref = set(content_tokens(reference)) - swapped[0]
    ans = set(content_tokens(answer)) - swapped[1]
    common = len(ref & ans)
    if common == 0:
        return 0.0
    precision, recall = common / len(ans), common / len(ref)
    return 2 * precision * recall / (precision + recall)
