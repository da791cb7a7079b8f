"""What each kind of evidence adds to the verdict models, measured on the dev sets.

    .venv/bin/python -m benchmarks.verdict_ablation [--limit 100] [--out benchmarks/results/verdict-ablation.md]

For every feature set of ``tools.fit_verdicts.ABLATIONS`` the verdict models are fitted on
``../shared/train-data`` (exactly as ``tools/fit_verdicts.py`` does, same examples and features),
then the dev rows that ``agreement.py`` scores (same sampling, same seed) are scored with the
scorers' own extraction, evidence and formulas: Spearman and ROC AUC against the human
labels, with the ``expected`` and ``hard`` scorings. Rows are not scored through the
scorers' pipeline (no reason step, no judge) so that one run compares every feature set on
identical inputs; the shipped set's figures equal what ``agreement.py`` prints for
relevancy. For similarity each set is one model over every verdict, like the shipped file's
short-answer model; the shipped file also sends whole sentences to a second model
(``SENTENCE_GATE`` in ``tools/fit_verdicts.py``), which ``agreement.py`` measures.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks import agreement
from offline_scorer.toolkit import (
    RELEVANCY_LABELS,
    AnswerSimilarityOptions,
    LogisticModel,
    aliases_of,
    analysis_from,
    best_label,
    expected_relevancy_score,
    expected_similarity_score,
    relevancy_evidence,
    relevancy_score,
    shared_embedder,
    similarity_evidence,
    similarity_score,
    split_answer,
    split_reference,
)
from tools import fit_verdicts as fv
from tools.verdict_training import REL_CLASSES, SIM_CLASSES, fit


def text(value: Any) -> str:
    return "" if value is None else str(value)


def relevancy_rows(embedder: Any, rows: list[dict]) -> list[list[dict[str, float]]]:
    return [
        relevancy_evidence(
            embedder, text(r["input"]), split_answer(text(r["output"])), text(r["output"])
        )
        if split_answer(text(r["output"]))
        else []
        for r in rows
    ]


def similarity_rows(embedder: Any, rows: list[dict]) -> list[tuple[list[str], list[str], Any]]:
    out = []
    for r in rows:
        references = split_reference(text(r["ground_truth"]))
        answers = split_answer(text(r["output"]))
        table = (
            similarity_evidence(
                embedder,
                [aliases_of(u) or [u] for u in references],
                answers,
                text(r["ground_truth"]),
                text(r["output"]),
            )
            if references and answers
            else [[] for _ in references]
        )
        out.append((references, answers, table))
    return out


def model_of(params: dict) -> LogisticModel:
    return LogisticModel.model_validate(params)


def relevancy_scores(model: LogisticModel, evidence: list[list[dict]]) -> dict[str, list[float]]:
    hard, expected = [], []
    for statements in evidence:
        probabilities = [model.probabilities(f) for f in statements]
        expected.append(expected_relevancy_score(probabilities))
        hard.append(relevancy_score([best_label(p, RELEVANCY_LABELS) for p in probabilities]))
    return {"expected": expected, "hard": hard}


def similarity_scores(model: LogisticModel, evidence: list[tuple]) -> dict[str, list[float]]:
    options = AnswerSimilarityOptions()
    hard, expected = [], []
    for references, answers, table in evidence:
        probabilities = [[model.probabilities(f) for f in row] for row in table]
        analysis = analysis_from(options.points(), references, answers, probabilities)
        extra = analysis["extra_in_output"]
        expected.append(
            expected_similarity_score(
                [m["probabilities"] for m in analysis["matches"]], extra_units=extra
            )
        )
        hard.append(similarity_score(analysis["matches"], extra_units=extra))
    return {"expected": expected, "hard": hard}


def fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=100, help="dev rows per dataset")
    parser.add_argument("--data", type=Path, default=agreement.DEFAULT_DATA)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/verdict-ablation.md"))
    args = parser.parse_args(argv)
    started = time.perf_counter()
    embedder = shared_embedder(fv.EMBEDDER)
    rel, sim = fv.training_examples(fv.TRAIN)
    Xr, yr = fv.relevancy_matrix(embedder, rel)
    Xs, ys = fv.similarity_matrix(embedder, sim)
    print(f"train features in {time.perf_counter() - started:.0f}s", file=sys.stderr)
    models: dict[str, dict[str, LogisticModel]] = {"relevancy": {}, "similarity": {}}
    for scorer, X, y, names, classes, sources in (
        ("relevancy", Xr, yr, fv.REL_FEATURES_ALL, REL_CLASSES, fv.source_weights(rel)),
        ("similarity", Xs, ys, fv.SIM_FEATURES_ALL, SIM_CLASSES, fv.source_weights(sim)),
    ):
        for tag, columns in fv.ABLATIONS[scorer].items():
            Xc = X[:, [names.index(c) for c in columns]]
            weights = fv.balanced_weights(y, len(classes)) * sources
            models[scorer][tag] = model_of(
                fit(Xc, y, columns, classes, l2=fv.L2, sample_weight=weights)
            )
    folder = agreement.resolve_data(args.data)
    lines = [
        "| dataset | scorer | rows | evidence | scoring | Spearman | ROC AUC |",
        "|---|---|---:|---|---|---:|---:|",
    ]
    for dataset, scorers in agreement.DATASETS.items():
        rows = agreement.sample_rows(
            agreement.load_rows(folder, dataset), args.limit, agreement.SEED
        )
        human = [float(r["human_score"]) for r in rows]
        binary = agreement.is_binary(human)
        for scorer_id in scorers:
            scorer = "similarity" if scorer_id == agreement.SIMILARITY else "relevancy"
            if scorer == "relevancy":
                evidence: Any = relevancy_rows(embedder, rows)
            else:
                evidence = similarity_rows(embedder, rows)
            for tag, model in models[scorer].items():
                scored = (
                    relevancy_scores(model, evidence)
                    if scorer == "relevancy"
                    else similarity_scores(model, evidence)
                )
                for scoring, values in scored.items():
                    rho = agreement.spearman(values, human)
                    auc = agreement.roc_auc(human, values) if binary else None
                    lines.append(
                        f"| {dataset} | {scorer} | {len(rows)} | {tag} | {scoring} | "
                        f"{fmt(rho)} | {fmt(auc) if binary else 'n/a (graded)'} |"
                    )
    table = "\n".join(lines) + "\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(table, encoding="utf-8")
    print(table)
    print(f"{time.perf_counter() - started:.0f}s; written to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
