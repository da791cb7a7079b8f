"""Fit a card's verdict models from their declared configuration (``tools/fit.toml``).

    .venv/bin/python -m tools.fit --card smollm2-135m-instruct            # fit, write, stamp
    .venv/bin/python -m tools.fit --card ... --select relevancy           # the selection table
    .venv/bin/python -m tools.fit --card ... --check                      # refit the slice

One multinomial logistic regression per card and scorer, over the inputs the
configuration names (at most :data:`MAX_INPUTS`), fitted on ``../shared/train-data/`` only.
The protocol, the same for every card and scorer (``tools/README.md``):

1. **Inputs by stepwise selection** (``--select``): from the candidates, add the input that
   raises the grouped cross-validated Spearman most, while it raises it by at least
   :data:`MIN_GAIN`, up to :data:`MAX_INPUTS`; then drop, cheapest first, any input whose
   removal costs less than :data:`MIN_GAIN`; the configuration declares the result.
2. **Every shipped input earns its place**: the fit writes the drop-one table (the CV with
   each input left out) into the file; an input whose removal costs less than
   :data:`MIN_GAIN` does not ship.
3. **Reported, not chosen on**: the dev sets of ``../shared/eval-data/`` are measured after
   (``benchmarks/agreement.py``), never read here.

The CV: 5 folds by a hash of each example's group (its question, or its reference where
there is none), out-of-fold probabilities for every example, Spearman between the expected
score (relevancy: P(yes) + 0.3 P(unsure); similarity: the expected points of a unit) and
the ordinal human label, over the examples the model can read (with the judge's read
stored, where it takes one). Deterministic: the same data gives the same bytes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import tomllib
from scipy.stats import spearmanr

from offline_scorer.toolkit import (
    LogisticModel,
    read_features,
    relevancy_inputs,
    shared_embedder,
    similarity_inputs,
    template_sha256,
)
from tools.read_training import (
    KINDS,
    SHIPPED_KIND,
    load_reads,
    pool,
    read_labels,
    reads_path,
)
from tools.verdict_training import REL_CLASSES, SIM_CLASSES, TRAIN, dumps_params, fit, fold_of

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "tools" / "fit.toml"
MODELS = ROOT / "models"
CACHE = ROOT / ".cache" / "fit"
FORMAT = "offline-scorer-verdicts/2"
MAX_INPUTS = 10
MIN_GAIN = 0.002
PENALTIES = (0.1, 1.0, 10.0)
FOLDS = 5
SLICE_EVERY = 25
# The expected score of one verdict, as the scorers compute it with default options.
POINTS = {
    "relevancy": {"yes": 1.0, "unsure": 0.3, "no": 0.0},
    "similarity": {"exact": 1.2, "semantic": 0.8, "partial": 0.4, "missing": -0.15},
}
CLASSES = {"relevancy": REL_CLASSES, "similarity": SIM_CLASSES}


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# ------------------------------------------------------------------ data


def pool_manifest(train: Path) -> str:
    """sha256 of the training pool: every data file under ``train`` with its own sha256."""
    lines = [
        f"{path.relative_to(train).as_posix()} {hashlib.sha256(path.read_bytes()).hexdigest()}"
        for path in sorted(train.rglob("*.jsonl"))
    ]
    if not lines:
        raise SystemExit(f"fit: no training data under {train} (../shared/train-data)")
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def evidence(scorer: str, examples: list[dict[str, Any]], names: list[str]) -> list[dict]:
    """Every example's evidence inputs (all of ``names`` but the reads), cached on disk by
    example id (``.cache/fit/``): the MiniLM cosines of 17k examples take minutes."""
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"{scorer}.jsonl"
    cached: dict[str, dict[str, float]] = {}
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            cached[row.pop("id")] = row
    wanted = [n for n in names if not n.startswith("read_")]
    todo = [e for e in examples if not set(wanted) <= set(cached.get(e["id"], {}))]
    if todo:
        log(f"{scorer}: computing the evidence of {len(todo)} examples")
        embedder = shared_embedder("all-minilm-l6-v2")
        with path.open("a", encoding="utf-8") as handle:
            for e in todo:
                row = dict(cached.get(e["id"], {}))
                row.update(_evidence_of(scorer, e, wanted, embedder))
                cached[e["id"]] = row
                handle.write(json.dumps({"id": e["id"], **row}) + "\n")
    return [cached[e["id"]] for e in examples]


def _evidence_of(scorer: str, e: dict[str, Any], names: list[str], embedder: Any) -> dict:
    if scorer == "relevancy":
        return relevancy_inputs(
            names, embedder, e["question"] or "", [e["statement"] or ""], e["answer"] or ""
        )[0]
    return similarity_inputs(names, embedder, [e["aliases"]], [e["answer_unit"]])[0][0]


def matrix(
    scorer: str, config: dict[str, Any], examples: list[dict[str, Any]], card: str
) -> tuple[list[dict[str, Any]], list[dict[str, float]]]:
    """The examples the model can learn from (with a read stored, where it takes one; of
    a source weighing more than 0) and their inputs."""
    weights = config.get("sources", {})
    kept = [e for e in examples if weights.get(e["source"], 1.0) > 0]
    read = config.get("read")
    reads: dict[tuple[str, str, str], dict[str, float]] = {}
    if read:
        reads = load_reads(reads_path(card, dtype=read["dtype"]))
        kept = [e for e in kept if (scorer, read["kind"], e["id"]) in reads]
    rows = evidence(scorer, kept, candidates(scorer, config))
    if read:
        for e, row in zip(kept, rows, strict=True):
            found = reads[(scorer, read["kind"], e["id"])]
            row.update(read_features(list(found), list(found.values())))
    return kept, rows


def candidates(scorer: str, config: dict[str, Any]) -> list[str]:
    """The inputs a model may choose from: its configuration's candidates and inputs."""
    return list(dict.fromkeys([*config.get("candidates", []), *config["inputs"]]))


# ------------------------------------------------------------------ fitting


def arrays(
    scorer: str, config: dict[str, Any], examples: list[dict], rows: list[dict], names: list[str]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """X, y, the fitting weights (balanced classes times source weights) and the groups."""
    classes = CLASSES[scorer]
    X = np.array([[row[n] for n in names] for row in rows], dtype=np.float64)
    y = np.array([classes.index(e["label"]) for e in examples])
    counts = np.bincount(y, minlength=len(classes)).astype(float)
    balanced = (len(y) / (len(classes) * np.maximum(counts, 1)))[y]
    sources = config.get("sources", {})
    w = balanced * np.array([sources.get(e["source"], 1.0) for e in examples])
    return X, y, w, [e["group"] for e in examples]


def expected(scorer: str, P: np.ndarray) -> np.ndarray:
    """Each verdict's expected score from its class probabilities."""
    return P @ np.array([POINTS[scorer][c] for c in CLASSES[scorer]])


def cv_score(
    scorer: str, config: dict, examples: list[dict], rows: list[dict], names: list[str]
) -> dict[str, float]:
    """Grouped CV of a model over ``names``: Spearman of the out-of-fold expected score
    with the ordinal label, and the out-of-fold log loss (balanced classes)."""
    X, y, w, groups = arrays(scorer, config, examples, rows, names)
    fold = np.array([fold_of(g, FOLDS) for g in groups])
    P = np.zeros((len(y), len(CLASSES[scorer])))
    for k in range(FOLDS):
        train, test = fold != k, fold == k
        params = fit(X[train], y[train], names, CLASSES[scorer], config["l2"], w[train])
        model = LogisticModel.model_validate(params)
        P[test] = _predict(model, X[test])
    rho = float(spearmanr(expected(scorer, P), y).statistic)
    loss = float(-(w * np.log(np.clip(P[np.arange(len(y)), y], 1e-12, 1))).sum() / w.sum())
    return {"spearman": round(rho, 4), "log_loss": round(loss, 4)}


def _predict(model: LogisticModel, X: np.ndarray) -> np.ndarray:
    Z = (X - np.array(model.means)) / np.array(model.scales)
    logits = Z @ np.array(model.weights).T + np.array(model.intercepts)
    logits -= logits.max(axis=1, keepdims=True)
    P = np.exp(logits)
    return P / P.sum(axis=1, keepdims=True)


def stepwise_selection(
    scorer: str, config: dict, examples: list[dict], rows: list[dict]
) -> list[dict[str, Any]]:
    """Step 1 of the protocol: the table of the stepwise selection (adds, then drops)."""
    chosen: list[str] = []
    best = 0.0
    table = []
    pool_names = candidates(scorer, config)
    while len(chosen) < MAX_INPUTS:
        tried = {
            name: cv_score(scorer, config, examples, rows, [*chosen, name])["spearman"]
            for name in pool_names
            if name not in chosen
        }
        if not tried:
            break
        name = max(tried, key=lambda n: (tried[n], -pool_names.index(n)))
        gain = tried[name] - best
        table.append({"add": name, "spearman": tried[name], "gain": round(gain, 4)})
        log(f"  + {name:14} {tried[name]:.4f} ({gain:+.4f})")
        if gain < MIN_GAIN:
            break
        chosen.append(name)
        best = tried[name]
    # Then backward: an input the others have made redundant (its removal costs less than
    # MIN_GAIN) goes, the cheapest first, until every input left earns its place.
    while len(chosen) > 1:
        without = {
            name: cv_score(scorer, config, examples, rows, [n for n in chosen if n != name])[
                "spearman"
            ]
            for name in chosen
        }
        name = max(without, key=lambda n: (without[n], chosen.index(n)))
        cost = round(best - without[name], 4)
        if cost >= MIN_GAIN:
            break
        table.append({"drop": name, "spearman": without[name], "cost": cost})
        log(f"  - {name:14} {without[name]:.4f} (cost {cost:+.4f})")
        chosen.remove(name)
        best = without[name]
    return table


def drop_one(
    scorer: str, config: dict, examples: list[dict], rows: list[dict]
) -> list[dict[str, Any]]:
    """Step 2 of the protocol: the CV of the declared inputs, then with each left out, then
    at the other penalties (step 4)."""
    names = list(config["inputs"])
    full = cv_score(scorer, config, examples, rows, names)
    table: list[dict[str, Any]] = [{"inputs": "all declared", **full}]
    for name in names:
        rest = [n for n in names if n != name]
        score = cv_score(scorer, config, examples, rows, rest) if rest else None
        if score is not None:
            cost = round(full["spearman"] - score["spearman"], 4)
            table.append({"inputs": f"without {name}", **score, "cost": cost})
    reads = [n for n in names if n.startswith("read_")]
    if reads and len(reads) < len(names):  # what the judge's read adds to the evidence
        rest = [n for n in names if n not in reads]
        score = cv_score(scorer, config, examples, rows, rest)
        cost = round(full["spearman"] - score["spearman"], 4)
        table.append({"inputs": "without the judge's read", **score, "cost": cost})
    for l2 in PENALTIES:
        if l2 != config["l2"]:
            score = cv_score(scorer, {**config, "l2": l2}, examples, rows, names)
            cost = round(full["spearman"] - score["spearman"], 4)
            table.append({"inputs": f"all declared, l2 {l2:g}", **score, "cost": cost})
    return table


def chosen_by(selection: list[dict[str, Any]]) -> list[str]:
    """The inputs a selection kept: those added with a gain of at least MIN_GAIN, less
    those dropped after."""
    added = [row["add"] for row in selection if "add" in row and row["gain"] >= MIN_GAIN]
    dropped = {row["drop"] for row in selection if "drop" in row}
    return [name for name in added if name not in dropped]


def fit_scorer(
    card: str, scorer: str, config: dict, examples: list[dict], manifest: str
) -> dict[str, Any]:
    """The verdict file's entry of one scorer: model, read, stamp and fit record."""
    if len(config["inputs"]) > MAX_INPUTS:
        raise SystemExit(f"fit: {card} {scorer}: more than {MAX_INPUTS} inputs declared")
    kept, rows = matrix(scorer, config, examples, card)
    names = list(config["inputs"])
    log(f"{card} {scorer}: {len(kept)} examples; stepwise selection ...")
    selection = stepwise_selection(scorer, config, kept, rows)
    if sorted(chosen_by(selection)) != sorted(names):
        raise SystemExit(
            f"fit: {card} {scorer}: the declared inputs {names} are not those the stepwise "
            f"selection keeps, {chosen_by(selection)}: declare those (tools/README.md)"
        )
    params = fit_model(scorer, config, kept, rows)
    log(f"{card} {scorer}: grouped CV of the declared inputs ...")
    table = drop_one(scorer, config, kept, rows)
    read = config.get("read")
    template = read["template"] if read else None
    prompts = {}
    if template:
        scorer_folder, step = template.split("/")
        name = f"{scorer_folder}/en/{step}.jinja"
        prompts[name] = template_sha256(name)
    return {
        "model": params,
        "scoring": "expected",
        "embedder": "all-minilm-l6-v2" if {"cos", "answer_cos"} & set(names) else None,
        "read": {"template": template, "labels": read["labels"]} if read else None,
        "stamp": {
            "language": "en",
            "prompts": prompts,
            "backend": read["backend"] if read else None,
            "dtype": read["dtype"] if read else None,
            "pool": manifest,
        },
        "fit": {
            "config": config,
            "examples": len(kept),
            "classes": dict(sorted(Counter(e["label"] for e in kept).items())),
            "sources": dict(sorted(Counter(e["source"] for e in kept).items())),
            "cv": {
                "folds": FOLDS,
                "metric": "spearman of the out-of-fold expected score with the ordinal label",
                "selection": selection,
                "table": table,
            },
            "slice": slice_fit(scorer, config, kept, rows),
        },
    }


def slice_fit(scorer: str, config: dict, examples: list[dict], rows: list[dict]) -> dict:
    """The same fit on every :data:`SLICE_EVERY`-th example: a refit a test can afford.
    Each example is named by its id, source and label (a few ids recur with another
    source)."""
    picked = list(range(0, len(examples), SLICE_EVERY))
    chosen = [examples[i] for i in picked]
    return {
        "every": SLICE_EVERY,
        "examples": [[e["id"], e["source"], e["label"]] for e in chosen],
        "model": fit_model(scorer, config, chosen, [rows[i] for i in picked]),
    }


def fit_model(scorer: str, config: dict, examples: list[dict], rows: list[dict]) -> dict:
    """The model over the declared inputs, fitted on these examples."""
    names = list(config["inputs"])
    X, y, w, _ = arrays(scorer, config, examples, rows, names)
    return fit(X, y, names, CLASSES[scorer], config["l2"], w)


# ------------------------------------------------------------------ the file


def card_config(card: str, path: Path = CONFIG) -> dict[str, Any]:
    """A card's declared configuration (``tools/fit.toml``)."""
    cards = tomllib.loads(path.read_text(encoding="utf-8"))["cards"]
    if card not in cards:
        raise SystemExit(f"fit: no configuration for card {card!r} in {path}: {sorted(cards)}")
    return dict(cards[card])


def build(card: str, train: Path = TRAIN) -> dict[str, Any]:
    """The whole verdict file of a card."""
    config = card_config(card)
    examples = pool(train)
    manifest = pool_manifest(train)
    out: dict[str, Any] = {"format": FORMAT, "card": card}
    for scorer in ("relevancy", "similarity"):
        entry = config[scorer]
        if "same_as" in entry:
            out[scorer] = {"same_as": entry["same_as"]}
        else:
            out[scorer] = fit_scorer(card, scorer, entry, examples[scorer], manifest)
    return out


def write(card: str, content: dict[str, Any]) -> str:
    """Write the verdict file and put its sha256 into the card; returns the sha256."""
    text = dumps_params(content)
    path = MODELS / f"{card}.verdicts.json"
    path.write_text(text, encoding="utf-8")
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    toml = MODELS / f"{card}.toml"
    body = toml.read_text(encoding="utf-8")
    body, found = re.subn(
        r'(\[verdicts\][^\[]*?sha256 = ")[0-9a-f]{64}(")', rf"\g<1>{digest}\g<2>", body
    )
    if found != 1:
        raise SystemExit(f"fit: {toml} has no [verdicts] sha256 to update")
    toml.write_text(body, encoding="utf-8")
    return digest


def check(card: str, train: Path = TRAIN, rel: float = 1e-3) -> list[str]:
    """Refit each scorer's slice from the data and compare it with the file's, value for
    value (relative ``rel``); the differences found (empty: the same)."""
    shipped = json.loads((MODELS / f"{card}.verdicts.json").read_text(encoding="utf-8"))
    config = card_config(card)
    examples = pool(train)
    problems = []
    for scorer in ("relevancy", "similarity"):
        entry = shipped[scorer]
        if "same_as" in entry:
            continue
        if entry["fit"]["config"] != config[scorer]:
            problems.append(f"{scorer}: the file's configuration is not tools/fit.toml's")
        by_key = {(e["id"], e["source"], e["label"]): e for e in examples[scorer]}
        stored = entry["fit"]["slice"]
        picked = [by_key[tuple(key)] for key in stored["examples"] if tuple(key) in by_key]
        if len(picked) != len(stored["examples"]):
            gone = len(stored["examples"]) - len(picked)
            problems.append(f"{scorer}: {gone} slice examples are no longer in the pool")
            continue
        kept, rows = matrix(scorer, config[scorer], picked, card)
        if len(kept) != len(picked):
            problems.append(f"{scorer}: {len(picked) - len(kept)} slice examples lost their read")
            continue
        refit = json.loads(dumps_params(fit_model(scorer, config[scorer], kept, rows)))
        problems += _differences(scorer, stored["model"], refit, rel)
    return problems


def _differences(where: str, a: Any, b: Any, rel: float) -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            return [f"{where}: keys {sorted(a)} != {sorted(b)}"]
        return [d for k in a for d in _differences(f"{where}.{k}", a[k], b[k], rel)]
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{where}: {len(a)} values != {len(b)}"]
        return [
            d
            for i, (x, z) in enumerate(zip(a, b))
            for d in _differences(f"{where}[{i}]", x, z, rel)
        ]
    if isinstance(a, float) or isinstance(b, float):
        if abs(float(a) - float(b)) > rel * max(abs(float(a)), abs(float(b)), 1e-3):
            return [f"{where}: {a} != {b}"]
        return []
    return [] if a == b else [f"{where}: {a!r} != {b!r}"]


def with_read(scorer: str, config: dict[str, Any], dtype: str) -> dict[str, Any]:
    """A configuration whose candidates also hold the read the scorer's card models take."""
    kind = SHIPPED_KIND[scorer]
    labels = read_labels(kind, scorer)
    read = {
        "template": f"answer-{scorer}/{KINDS[kind][0]}",
        "labels": labels,
        "kind": kind,
        "backend": "transformers",
        "dtype": dtype,
    }
    reads = [f"read_{label}" for label in labels]
    return {**config, "read": read, "candidates": [*candidates(scorer, config), *reads]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--card", required=True)
    parser.add_argument("--train", type=Path, default=TRAIN)
    parser.add_argument("--select", choices=["relevancy", "similarity"], default=None)
    parser.add_argument("--check", action="store_true", help="refit the slices and compare")
    parser.add_argument(
        "--with-read",
        metavar="DTYPE",
        default=None,
        help="with --select: add the judge's read (stored in tools/reads/ in this dtype) to "
        "the candidates, on the examples read: does the card's judge add anything?",
    )
    args = parser.parse_args(argv)
    if args.check:
        problems = check(args.card, args.train)
        print("\n".join(problems) or f"{args.card}: the slices refit to the file's values")
        return 1 if problems else 0
    if args.select:
        config = card_config(args.card)[args.select]
        if args.with_read:
            config = with_read(args.select, config, args.with_read)
        examples, rows = matrix(args.select, config, pool(args.train)[args.select], args.card)
        log(f"{args.card} {args.select}: stepwise selection over {len(examples)} examples")
        print(json.dumps(stepwise_selection(args.select, config, examples, rows), indent=1))
        return 0
    content = build(args.card, args.train)
    digest = write(args.card, content)
    for scorer in ("relevancy", "similarity"):
        entry = content[scorer]
        for row in entry.get("fit", {}).get("cv", {}).get("table", []):
            print(f"{scorer:10} {row['inputs']:28} {row['spearman']:.4f} {row.get('cost', '')}")
    print(f"models/{args.card}.verdicts.json written, sha256 {digest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
