"""Lexical evidence for the verdict models (pure Python, deterministic).

* :func:`relevancy_features` - question x statement: coverage of the question, novelty,
  answer type (a number for "how many", a name for "who"), refusals, length.
* :func:`similarity_features` - reference unit x answer unit: token F1, containment both
  ways, length ratio, the shorter side's word count (``min_tokens``: a gated verdict model
  judges two whole sentences apart from a short answer; ``sentence_words``, the same count
  when both sides end as sentences do, else 0), numbers one side lacks, negation
  mismatch, exact equality, names
  (capitalised words) one side lacks, a swapped name (each side has one the other lacks),
  how much the two sides share besides the swapped names (``swap_rest``) and an acronym of
  the other side's names ("UNEP").
* :func:`similarity_features_aliases` - the same against the best of several aliases.

``cos`` (a sentence-embedding cosine of the pair) is added as the feature ``cos`` when given.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter

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


def _pair_core(a: str, b: str) -> dict[str, float]:
    ta, tb = set(content_tokens(a)), set(content_tokens(b))
    na, nb = numbers(a), numbers(b)
    la, lb = len(normalize_tokens(a)), len(normalize_tokens(b))
    return {
        "tok_f1": token_f1(b, a),
        "cont_ab": len(ta & tb) / len(ta) if ta else 0.0,  # a covered by b
        "cont_ba": len(ta & tb) / len(tb) if tb else 0.0,  # b covered by a
        "len_ratio": math.log((lb + 1) / (la + 1)),
        "num_miss_ab": float(bool(na - nb)),  # a has a number b lacks
        "num_miss_ba": float(bool(nb - na)),  # b has a number a lacks
        "neg_mismatch": float(has_negation(a) != has_negation(b)),
        "exact": float(normalize_tokens(a) == normalize_tokens(b) and la > 0),
    }


def relevancy_features(question: str, statement: str, cos: float | None = None) -> dict[str, float]:
    f = _pair_core(question or "", statement or "")
    f["q_cov"] = f.pop("cont_ab")  # question words covered by the statement
    f["novel"] = 1.0 - f["cont_ba"]  # share of statement content not copied from question
    f.pop("exact")
    f["restates_q"] = float(f["novel"] < 0.2 and f["q_cov"] > 0.6)
    f["type_match"] = _answer_type_match(question or "", statement or "")
    f["refusal"] = float(bool(_REFUSAL.search(statement or "")))
    f["stmt_len"] = _log_len(statement or "")
    f["has_num"] = float(bool(numbers(statement or "")))
    f["is_question"] = float((statement or "").rstrip().endswith("?"))
    if cos is not None:
        f["cos"] = float(cos)
    return f


_ACRONYM = re.compile(r"\b[A-Z]{2,}\b")


def _abbreviates(short: str, long: str) -> bool:
    """Whether ``short`` holds an acronym of capitalised words of ``long`` ("UNEP")."""
    initials = "".join(word[0] for word in _CAPITALISED.findall(long or ""))
    return any(acronym in initials for acronym in _ACRONYM.findall(short or ""))


def _name_features(reference: str, answer: str) -> dict[str, float]:
    """A name of one side the other lacks (anywhere, in any case), and both at once.

    "Rome is the capital of Italy." vs "The capital of Italy is Milan.": each side has a
    name the other lacks, a swapped entity (``name_swap``), which token overlap and the
    embedding cosine of the pair both miss. An acronym of the other side's names ("UNEP"
    for "United Nations Environment Programme") is the same name, not a missing one.
    """
    ref_tokens, answer_tokens = set(content_tokens(reference)), set(content_tokens(answer))
    acronym = _abbreviates(answer, reference) or _abbreviates(reference, answer)
    # a reference name the answer lacks, and an answer name the reference lacks
    only_ref = set() if acronym else names(reference) - answer_tokens
    only_answer = set() if acronym else names(answer) - ref_tokens
    swap = bool(only_ref and only_answer)
    return {
        "acronym": float(acronym),
        "name_miss_ab": float(bool(only_ref)),
        "name_miss_ba": float(bool(only_answer)),
        "name_swap": float(swap),
        "swap_rest": _rest_f1(ref_tokens - only_ref, answer_tokens - only_answer) if swap else 0.0,
    }


def _rest_f1(reference: set[str], answer: set[str]) -> float:
    """The F1 of two sets of content tokens (0 when either is empty): with the swapped names
    taken out, how much of the rest the two sides share. A pair that says the same thing of
    another entity ("The capital of Italy is Milan." against "Rome is the capital of Italy.")
    shares all of it: 1."""
    common = len(reference & answer)
    if common == 0:
        return 0.0
    precision, recall = common / len(answer), common / len(reference)
    return 2 * precision * recall / (precision + recall)


# How a sentence ends, once closing quotes and brackets are set aside.
_SENTENCE_END = re.compile(r"""[.!?:;\u2026]["'\u2019\u201d)\]]*\s*$""")


def is_sentence(text: str) -> bool:
    """Whether ``text`` ends as a sentence does ("It's not a good idea.", "Try this:"), which
    a short answer taken from a text ("June 24, 1983", "the American Civil War") rarely does."""
    return bool(_SENTENCE_END.search(text or ""))


def similarity_features(reference: str, answer: str, cos: float | None = None) -> dict[str, float]:
    f = _pair_core(reference or "", answer or "")
    f["ref_len"] = _log_len(reference or "")
    f["min_tokens"] = float(
        min(len(normalize_tokens(reference or "")), len(normalize_tokens(answer or "")))
    )
    both = is_sentence(reference or "") and is_sentence(answer or "")
    f["sentence_words"] = f["min_tokens"] if both else 0.0
    f.update(_name_features(reference or "", answer or ""))
    f["ref_list"] = float("/" in (reference or ""))
    if cos is not None:
        f["cos"] = float(cos)
    return f


def similarity_features_aliases(
    aliases: list[str], answer: str, cosines: list[float] | None = None
) -> dict[str, float]:
    """Features against the best-matching alias (max of cont_ab + tok_f1 + cos).

    ``min_tokens`` is the exception: the shorter side's word count over every alias, so a
    reference with a short alternative ("Scottish post-punk band Orange Juice / Orange
    Juice") counts as a short answer, whichever alias matched best.
    """
    if not aliases:
        return similarity_features("", answer, 0.0 if cosines is not None else None)
    scored = [
        similarity_features(alias, answer, None if cosines is None else cosines[i])
        for i, alias in enumerate(aliases)
    ]
    best = max(
        range(len(scored)),
        key=lambda i: (scored[i]["cont_ab"] + scored[i]["tok_f1"] + scored[i].get("cos", 0.0), -i),
    )
    return {
        **scored[best],
        "min_tokens": min(f["min_tokens"] for f in scored),
        "sentence_words": min(f["sentence_words"] for f in scored),
    }
