"""The first clause of a reason, written from the verdicts, so the reason cannot contradict them.

With read verdicts the judge did not reach the verdicts itself; its reason starts from a
prefill that states them ("The score is 0.5 because 1 of 2 statements answer the
question, 1 is off the topic") and it only adds the specifics. Generated verdicts keep the
plain prefill (the judge wrote the verdicts, and recordings of it stay valid).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def _count(number: int, one: str, many: str) -> str:
    return f"{number} {one if number == 1 else many}"


def relevancy_summary(verdicts: Sequence[Mapping[str, Any]], language: str) -> str:
    """``1 of 2 statements answer the question, 1 is off the topic`` (or French)."""
    if not verdicts or not all("probabilities" in v for v in verdicts):
        return ""
    labels = [str(v.get("result")) for v in verdicts]
    yes, unsure, no, n = (
        labels.count("yes"),
        labels.count("unsure"),
        labels.count("no"),
        len(labels),
    )
    if language == "fr":
        parts = [
            f"{yes} affirmation{'s' if n > 1 else ''} sur {n} "
            f"{'répond' if yes <= 1 else 'répondent'} à la question"
        ]
        if unsure:
            parts.append(
                f"{unsure} {'reste' if unsure == 1 else 'restent'} seulement dans le sujet"
            )
        if no:
            parts.append(f"{no} {'est' if no == 1 else 'sont'} hors sujet")
        return ", ".join(parts)
    parts = [
        f"{yes} of {_count(n, 'statement', 'statements')} {'answers' if n == 1 else 'answer'} the question"
    ]
    if unsure:
        parts.append(f"{unsure} {'is' if unsure == 1 else 'are'} only on the topic")
    if no:
        parts.append(f"{no} {'is' if no == 1 else 'are'} off the topic")
    return ", ".join(parts)


def similarity_summary(analysis: Mapping[str, Any], language: str) -> str:
    """``1 of 2 reference facts is in the answer, 1 is missing`` (or French)."""
    matches = analysis.get("matches") or []
    if not matches or not all("probabilities" in m for m in matches):
        return ""
    kinds = [str(m.get("match_type")) for m in matches]
    n, missing = len(kinds), kinds.count("missing")
    found, partial = n - missing - kinds.count("partial"), kinds.count("partial")
    extra = len(analysis.get("extra_in_output") or [])
    if language == "fr":
        parts = [
            f"{found} fait{'s' if n > 1 else ''} de la référence sur {n} "
            f"{'se retrouve' if found <= 1 else 'se retrouvent'} dans la réponse"
        ]
        if partial:
            parts.append(f"{partial} en partie")
        if missing:
            parts.append(f"{missing} {'manque' if missing == 1 else 'manquent'}")
        if extra:
            parts.append(
                f"la réponse ajoute {_count(extra, 'autre affirmation', 'autres affirmations')}"
            )
        return ", ".join(parts)
    parts = [
        f"{found} of {_count(n, 'reference fact', 'reference facts')} "
        f"{'is' if found <= 1 else 'are'} in the answer"
    ]
    if partial:
        parts.append(f"{partial} only in part")
    if missing:
        parts.append(f"{missing} {'is' if missing == 1 else 'are'} missing")
    if extra:
        parts.append(f"the answer adds {_count(extra, 'other statement', 'other statements')}")
    return ", ".join(parts)
