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
from tools.fit import _differences
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
    assert _differences("m", shipped, json.loads(dumps_params(params)), 1e-3) == []
    changed = json.loads(dumps_params(params))
    changed["weights"][2][1] *= 1.01
    assert _differences("m", shipped, changed, 1e-3) == [
        f"m.weights[2][1]: {shipped['weights'][2][1]!r} != {changed['weights'][2][1]!r}"
    ]
    changed = {**shipped, "features": ["a", "b", "c", "e"]}
    assert _differences("m", shipped, changed, 1e-3) == ["m.features[3]: 'd' != 'e'"]
    assert _differences("m", shipped, {**shipped, "solver": "x"}, 1e-3) == [
        f"m: keys {sorted(shipped)} != {sorted({**shipped, 'solver': 'x'})}"
    ]


def test_every_declared_model_has_at_most_ten_inputs_each_a_candidate() -> None:
    """tools/fit.toml: at most ten inputs per model, each an input the scorers compute."""
    import tomllib

    config = tomllib.loads((ROOT / "tools" / "fit.toml").read_text(encoding="utf-8"))
    known = {
        "relevancy": {*toolkit.RELEVANCY_INPUTS, "cos", "answer_cos", "answer_len"},
        "similarity": {*toolkit.SIMILARITY_INPUTS, "cos"},
    }
    for card, scorers in config["cards"].items():
        for scorer, entry in scorers.items():
            if "same_as" in entry:
                assert entry["same_as"] in config["cards"], card
                continue
            inputs = entry["inputs"]
            assert 1 <= len(inputs) <= 10, (card, scorer)
            reads = {f"read_{label}" for label in entry.get("read", {}).get("labels", [])}
            assert set(inputs) <= known[scorer] | reads, (card, scorer)


def test_fit_needs_every_class() -> None:
    X, y, _ = synthetic_problem()
    with pytest.raises(ValueError, match="no example of class"):
        fit(X[y != 1], y[y != 1], ["a", "b", "c", "d"], CLASSES)
