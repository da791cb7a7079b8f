"""benchmarks/ and tools/: they use the package only through its public faces, and the
verdict-model fit of tools/verdict_training.py is deterministic and optimal (no model)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import offline_scorer.toolkit as toolkit
from tools.fit_verdicts import differences
from tools.verdict_training import dumps_params, fit, penalised_loss, predict_proba

ROOT = Path(__file__).resolve().parents[1]
SCRIPT_FOLDERS = ("benchmarks", "tools")


def private_imports(source: str) -> list[str]:
    """The imports of ``offline_scorer`` private modules or names in ``source``.

    Private: any part of the dotted path, or an imported name, that starts with ``_``
    (``offline_scorer.judges._protocol``, ``from offline_scorer import _prompts``).
    """
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            paths = [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            paths = [alias.name for alias in node.names]
        else:
            continue
        for path in paths:
            parts = path.split(".")
            if parts[0] == "offline_scorer" and any(p.startswith("_") for p in parts[1:]):
                found.append(f"line {node.lineno}: {path}")
    return found


def script_files() -> list[Path]:
    files = [p for folder in SCRIPT_FOLDERS for p in sorted((ROOT / folder).rglob("*.py"))]
    assert files, "no scripts found"
    return files


def test_the_private_import_check_catches_each_form() -> None:
    assert private_imports("from offline_scorer.judges._protocol import parse_json_output")
    assert private_imports("from offline_scorer import _prompts")
    assert private_imports("import offline_scorer.scorers._split")
    assert private_imports("def f():\n    from offline_scorer.toolkit import _REFUSAL\n")
    assert not private_imports("from offline_scorer.toolkit import REFUSAL, split_answer")
    assert not private_imports("from offline_scorer import load_model\nimport offline_scorer")
    assert not private_imports("from _peer import x\nfrom tools.x import _y")  # not the package


@pytest.mark.parametrize("path", script_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_benchmarks_and_tools_import_no_private_module(path: Path) -> None:
    found = private_imports(path.read_text(encoding="utf-8"))
    assert not found, (
        f"{path.relative_to(ROOT)} imports private parts; use offline_scorer.toolkit: {found}"
    )


def test_benchmarks_and_tools_do_not_patch_sys_path() -> None:
    patched = [p for p in script_files() if "sys.path" in p.read_text(encoding="utf-8")]
    assert not patched, patched


def test_toolkit_all_is_sorted_importable_and_documented() -> None:
    names = toolkit.__all__
    assert names == sorted(names)
    documented = toolkit.__doc__ or ""
    for name in names:
        value = getattr(toolkit, name)
        if callable(value):
            assert (value.__doc__ or "").strip(), f"{name} has no docstring"
        assert f"``{name}``" in documented, f"{name} is not listed in the module docstring"


def test_toolkit_imports_nothing_heavy() -> None:
    code = (
        "import sys, offline_scorer.toolkit; "
        "print([m for m in ('torch', 'transformers', 'outlines') if m in sys.modules])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


# ------------------------------------------------------------------ the verdict-model fit

CLASSES = ["no", "unsure", "yes"]


def synthetic_problem(seed: int = 0, n: int = 120) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Three overlapping classes over four features of different scales, one constant."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, size=n)
    X = rng.normal(size=(n, 4)) * [1.0, 10.0, 0.1, 0.0] + [0.0, 5.0, -1.0, 3.0]
    X[:, 0] += y * 0.8
    X[:, 1] -= (y == 1) * 6.0
    weights = rng.uniform(0.5, 2.0, size=n)
    return X, y, weights


def reference_class_gradient(
    params: dict, X: np.ndarray, y: np.ndarray, weights: np.ndarray, l2: float
) -> np.ndarray:
    """Gradient of the verdict models' objective at ``params``, written from the formula.

    The objective: ``sum_i w_i * -log p(y_i | z_i) + l2 / 2 * |W_free|^2 + 1e-8 / 2 *
    |b_free|^2``, where the first class is the reference (weights and intercept fixed at 0)
    and only the other classes' rows ``(W_free, b_free)`` are free. One row per free class:
    the derivative by its weights, then by its intercept.
    """
    Z = (X - params["means"]) / params["scales"]
    W = np.asarray(params["weights"])[1:]
    b = np.asarray(params["intercepts"])[1:]
    P = predict_proba(params, X)
    Y = np.eye(P.shape[1])[y]
    residual = ((P - Y) * weights[:, None])[:, 1:]
    return np.hstack([residual.T @ Z + l2 * W, (residual.sum(axis=0) + 1e-8 * b)[:, None]])


def fit_of(l2: float = 1.0, seed: int = 0) -> tuple[dict, np.ndarray, np.ndarray, np.ndarray]:
    X, y, weights = synthetic_problem(seed)
    return fit(X, y, ["a", "b", "c", "d"], CLASSES, l2=l2, sample_weight=weights), X, y, weights


@pytest.mark.parametrize("l2", [0.3, 1.0, 4.0])
def test_fit_is_a_stationary_point_of_the_reference_class_loss(l2: float) -> None:
    params, X, y, weights = fit_of(l2)
    gradient = reference_class_gradient(params, X, y, weights, l2)
    assert np.abs(gradient).max() < 1e-10, np.abs(gradient).max()
    # The first class is the reference.
    assert params["weights"][0] == [0.0] * 4 and params["intercepts"][0] == 0.0
    # The constant feature is standardised with scale 1 and gets no weight.
    assert params["scales"][3] == 1.0
    assert np.allclose(np.asarray(params["weights"])[:, 3], 0.0, atol=1e-12)


def test_a_wrong_objective_is_not_stationary() -> None:
    """The gradient check can fail: another penalty, no sample weights, or one penalised
    row per class (scikit-learn's LogisticRegression) each have another optimum."""
    params, X, y, weights = fit_of(1.0)
    assert np.abs(reference_class_gradient(params, X, y, weights, 4.0)).max() > 1e-2
    assert np.abs(reference_class_gradient(params, X, y, np.ones_like(weights), 1.0)).max() > 1e-2
    # One row per class, all penalised, rows summing to zero (the symmetric optimum).
    Z = (X - params["means"]) / params["scales"]
    W = np.asarray(params["weights"])
    W = W - W.mean(axis=0)
    residual = (predict_proba(params, X) - np.eye(3)[y]) * weights[:, None]
    assert np.abs(residual.T @ Z + 1.0 * W).max() > 1e-2


def test_the_loss_gradient_and_hessian_agree() -> None:
    """The analytic gradient and Hessian of penalised_loss match central differences."""
    X, y, weights = synthetic_problem(seed=2, n=40)
    Z = np.hstack(
        [(X - X.mean(axis=0)) / np.where(X.std(axis=0) > 0, X.std(axis=0), 1), np.ones((40, 1))]
    )
    reg = np.array([0.5, 0.5, 0.5, 0.5, 1e-8])
    theta = np.random.default_rng(3).normal(size=2 * 5)
    _, gradient, hessian = penalised_loss(theta, Z, y, weights, reg)
    step = 1e-6
    for j in range(theta.size):
        e = np.zeros_like(theta)
        e[j] = step
        up, g_up, _ = penalised_loss(theta + e, Z, y, weights, reg)
        down, g_down, _ = penalised_loss(theta - e, Z, y, weights, reg)
        assert abs((up - down) / (2 * step) - gradient[j]) < 1e-5
        assert np.abs((g_up - g_down) / (2 * step) - hessian[:, j]).max() < 1e-5
    assert np.allclose(hessian, hessian.T)


def test_fit_is_deterministic() -> None:
    first, *_ = fit_of(seed=1)
    second, *_ = fit_of(seed=1)
    assert first == second  # every float, before rounding
    assert dumps_params(first) == dumps_params(second)


def test_the_slice_check_compares_the_numbers() -> None:
    params, *_ = fit_of()
    shipped = json.loads(dumps_params(params))
    assert differences(shipped, json.loads(dumps_params(params))) == []
    changed = json.loads(dumps_params(params))
    changed["weights"][2][1] += 1e-5
    assert differences(shipped, changed, "m") == [
        f"m.weights[2][1]: {shipped['weights'][2][1]!r} in the file, "
        f"{changed['weights'][2][1]!r} refitted"
    ]
    changed = {**shipped, "features": ["a", "b", "c", "e"]}
    assert differences(shipped, changed, "m") == ["m.features[3]: 'd' in the file, 'e' refitted"]
    assert differences(shipped, {**shipped, "solver": "x"}, "m") == [
        "m.solver: only in one of them"
    ]


def test_fit_needs_every_class() -> None:
    X, y, _ = synthetic_problem()
    with pytest.raises(ValueError, match="no example of class"):
        fit(X[y != 1], y[y != 1], ["a", "b", "c", "d"], CLASSES)


def test_the_gated_fit_routes_its_rows_as_the_scorer_routes_them() -> None:
    """The written model sends exactly the rows ``sentence_rows`` picks to its sentence
    model at run time (``GatedModel``), and of those the rows ``sentence_pair_rows`` picks
    to its model of sentence pairs; the sentence model is fitted on the rows past the
    training gate (five words or more), which the run-time gate contains, and the pair
    model on the rows past both run-time gates, with their own source weights."""
    from tools.fit_verdicts import (
        REL_FEATURES_ALL,
        SENTENCE_GATE,
        SENTENCE_PAIR_GATE,
        SENTENCE_TRAINING_GATE,
        SIM_FEATURES_ALL,
        fit_models,
        sentence_pair_rows,
        sentence_rows,
    )

    rng = np.random.default_rng(7)
    Xr = rng.normal(size=(90, len(REL_FEATURES_ALL)))
    yr = np.arange(90) % 3
    n = 400
    Xs = rng.normal(size=(n, len(SIM_FEATURES_ALL)))
    Xs[:, SIM_FEATURES_ALL.index("min_tokens")] = rng.integers(0, 9, size=n)
    Xs[:, SIM_FEATURES_ALL.index("sentence_words")] = rng.integers(0, 9, size=n)
    Xs[:, SIM_FEATURES_ALL.index("reference_words")] = rng.integers(1, 45, size=n)
    Xs[:, SIM_FEATURES_ALL.index("answer_words")] = rng.integers(1, 45, size=n)
    ys = np.arange(n) % 4
    weights = np.where(np.arange(n) % 10 == 0, 0.0, 1.0)  # a source weighted 0 is left out
    pair_weights = np.where(np.arange(n) % 3 == 0, 3.0, weights)
    _, written = fit_models(Xr, yr, Xs, ys, sentences=(Xs, ys, weights, pair_weights))
    model = toolkit.GatedModel.model_validate(json.loads(dumps_params(written)))
    assert [c.model_dump(exclude_none=True) for c in model.when] == SENTENCE_GATE
    inner = model.model
    assert isinstance(inner, toolkit.GatedModel)
    assert [c.model_dump(exclude_none=True) for c in inner.when] == SENTENCE_PAIR_GATE
    rows, pairs = sentence_rows(Xs), sentence_pair_rows(Xs)
    assert 0 < pairs.sum() < rows.sum() < len(rows)
    assert not (pairs & ~rows).any()
    # some rows get past the gate only as short sentences (the any_of condition)
    short = Xs[:, SIM_FEATURES_ALL.index("min_tokens")] < 5
    assert (rows & short).any()
    for x, past, pair in zip(Xs, rows, pairs, strict=True):
        values = dict(zip(SIM_FEATURES_ALL, x.tolist(), strict=True))
        assert all(c.holds(values) for c in model.when) == past
        chosen = (inner.model if pair else inner.otherwise) if past else model.otherwise
        assert model.probabilities(values) == chosen.probabilities(values)
    trained = sentence_rows(Xs, SENTENCE_TRAINING_GATE) & (weights > 0)
    assert 0 < trained.sum() < (rows & (weights > 0)).sum()
    assert not (trained & ~rows).any()
    # the rows past the run-time gate only (short sentences) do not enter the sentence
    # model's fit, nor the rows off both gates the pair model's: left out, each is the same
    _, without = fit_models(
        Xr,
        yr,
        Xs,
        ys,
        sentences=(Xs, ys, np.where(trained, weights, 0), np.where(pairs, pair_weights, 0)),
    )
    assert without["model"] == written["model"]
    # the pair model weighs its rows with its own weights, the sentence model does not
    _, even = fit_models(Xr, yr, Xs, ys, sentences=(Xs, ys, weights, weights))
    assert even["model"]["otherwise"] == written["model"]["otherwise"]
    assert even["model"]["model"] != written["model"]["model"]
    # without a sentence pool the model is the plain logistic one, as shipped
    _, plain = fit_models(Xr, yr, Xs, ys)
    assert toolkit.LogisticModel.model_validate(json.loads(dumps_params(plain))).features


def test_the_demo_sentence_pairs_reach_the_shipped_sentence_pair_model() -> None:
    """The paraphrase and the wrong capital that `--cv` scores each candidate fit on
    (OBVIOUS_PAIRS) are rows the sentence-pair model judges: they pass both gates of the
    tool and of the shipped file (real MiniLM features)."""
    from tools.fit_verdicts import (
        EMBEDDER,
        OUT,
        SENTENCE_PAIR_GATE,
        SIM_FEATURES_ALL,
        obvious_matrix,
        sentence_pair_rows,
    )

    X = obvious_matrix(toolkit.shared_embedder(EMBEDDER))
    assert X.shape == (2, len(SIM_FEATURES_ALL))
    assert sentence_pair_rows(X).all()
    shipped = toolkit.GatedModel.model_validate(
        json.loads(OUT.read_text(encoding="utf-8"))["similarity"]
    )
    inner = shipped.model
    assert isinstance(inner, toolkit.GatedModel)
    assert [c.model_dump(exclude_none=True) for c in inner.when] == SENTENCE_PAIR_GATE
    for x in X:
        values = dict(zip(SIM_FEATURES_ALL, x.tolist(), strict=True))
        assert shipped.holds(values) and inner.holds(values)


def test_the_forum_gate_routes_relevancy_by_the_answer_s_words() -> None:
    """With a forum pool, the relevancy model is gated on the whole answer's words: answers
    of at least FORUM_WORDS go to a model of FORUM_FEATURES fitted on the forum pool's rows
    of weight above 0 (a row weighted 0 changes nothing), shorter ones to the ungated model,
    which is the one fitted without the forum pool, number for number."""
    from tools.fit_verdicts import (
        FORUM_FEATURES,
        FORUM_GATE,
        FORUM_WORDS,
        REL_FEATURES_ALL,
        SIM_FEATURES_ALL,
        fit_models,
    )

    rng = np.random.default_rng(11)
    Xr = rng.normal(size=(90, len(REL_FEATURES_ALL)))
    yr = np.arange(90) % 3
    Xf = np.vstack([Xr, rng.normal(size=(60, len(REL_FEATURES_ALL)))])
    Xf[:, REL_FEATURES_ALL.index("answer_words")] = rng.integers(0, 9, size=150)
    yf = np.arange(150) % 3
    wf = np.where(np.arange(150) % 7 == 0, 0.0, 1.0)
    Xs = rng.normal(size=(40, len(SIM_FEATURES_ALL)))
    ys = np.arange(40) % 4
    plain, _ = fit_models(Xr, yr, Xs, ys)
    written, _ = fit_models(Xr, yr, Xs, ys, forum=(Xf, yf, wf))
    model = toolkit.GatedModel.model_validate(json.loads(dumps_params(written)))
    assert [c.model_dump(exclude_none=True) for c in model.when] == FORUM_GATE
    assert model.model.features == FORUM_FEATURES
    assert written["otherwise"] == plain
    for x in Xf:
        values = dict(zip(REL_FEATURES_ALL, x.tolist(), strict=True))
        long_enough = values["answer_words"] >= FORUM_WORDS
        chosen = model.model if long_enough else model.otherwise
        assert model.holds(values) == long_enough
        assert model.probabilities(values) == chosen.probabilities(values)
    # a row weighted 0 is left out of the fit altogether
    kept = wf > 0
    again, _ = fit_models(Xr, yr, Xs, ys, forum=(Xf[kept], yf[kept], wf[kept]))
    assert again == written


def test_relevancy_evidence_carries_the_answer_s_length() -> None:
    """Each verdict's evidence holds the whole answer's words and their log, which the
    shipped relevancy gate and its forum model read (real MiniLM)."""
    import math

    from tools.fit_verdicts import EMBEDDER, OUT, REL_FEATURES_ALL

    answer = "Paris. It is in France and has been the capital for centuries."
    rows = toolkit.relevancy_evidence(
        toolkit.shared_embedder(EMBEDDER), "What is the capital of France?", ["Paris.", "x"], answer
    )
    for row in rows:
        assert row["answer_words"] == 12.0
        assert row["answer_len"] == pytest.approx(math.log1p(12.0))
        assert set(REL_FEATURES_ALL) <= set(row)
    shipped = toolkit.GatedModel.model_validate(
        json.loads(OUT.read_text(encoding="utf-8"))["relevancy"]
    )
    assert shipped.holds(rows[0])
    assert not shipped.holds({**rows[0], "answer_words": 2.0})
