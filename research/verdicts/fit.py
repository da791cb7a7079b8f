"""Logistic regression (binary and multinomial) in numpy: L2, standardised features,
deterministic Newton (IRLS) fit, grouped CV, JSON parameters.

    params = fit(X, y, feature_names, classes, l2=1.0)   # y: int class indices
    P = predict_proba(params, X)                          # (n, K)
    write_params(params, "model.json")                    # 6 significant digits, sorted keys
    P_oof = grouped_cv_proba(X, y, groups, names, classes, l2=1.0, folds=5)

Parameter dict: {"kind": "logistic", "classes": [...], "features": [...], "means": [...],
"scales": [...], "weights": [[per class] per feature-row...], "intercepts": [...], "l2": ...}
For K classes, weights is K x d (class 0 row is all zeros: reference class); binary models
are the K=2 case, so P(class 1) = sigmoid(w1.x + b1).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np


def _softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def _standardise(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    means = X.mean(axis=0)
    scales = X.std(axis=0)
    scales = np.where(scales < 1e-9, 1.0, scales)
    return means, scales


def fit(
    X: np.ndarray,
    y: np.ndarray,
    feature_names: list[str],
    classes: list[str],
    l2: float = 1.0,
    sample_weight: np.ndarray | None = None,
    max_iter: int = 100,
    tol: float = 1e-10,
) -> dict:
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.int64)
    n, d = X.shape
    K = len(classes)
    w_s = np.ones(n) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    means, scales = _standardise(X)
    Z = np.hstack([(X - means) / scales, np.ones((n, 1))])   # last column: intercept
    D = d + 1
    m = K - 1                                                  # free classes 1..K-1
    theta = np.zeros((m, D))
    Y = np.zeros((n, K))
    Y[np.arange(n), y] = 1.0
    reg = np.full(D, l2)
    reg[-1] = 1e-8                                             # (almost) no penalty on intercepts

    def objective(th: np.ndarray) -> float:
        logits = np.hstack([np.zeros((n, 1)), Z @ th.T])
        logits -= logits.max(axis=1, keepdims=True)
        logp = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
        return float(-(w_s * (Y * logp).sum(axis=1)).sum() + 0.5 * (reg * th * th).sum())

    f_old = objective(theta)
    for _ in range(max_iter):
        P = _softmax(np.hstack([np.zeros((n, 1)), Z @ theta.T]))
        G = ((P[:, 1:] - Y[:, 1:]) * w_s[:, None]).T @ Z + reg * theta       # (m, D)
        H = np.zeros((m * D, m * D))
        for a in range(m):
            for b in range(a, m):
                coef = P[:, a + 1] * ((a == b) - P[:, b + 1]) * w_s
                block = (Z * coef[:, None]).T @ Z
                if a == b:
                    block = block + np.diag(reg)
                H[a * D:(a + 1) * D, b * D:(b + 1) * D] = block
                H[b * D:(b + 1) * D, a * D:(a + 1) * D] = block.T
        step = np.linalg.solve(H, G.reshape(-1)).reshape(m, D)
        t = 1.0
        while True:                                     # backtracking: monotone and deterministic
            cand = theta - t * step
            f_new = objective(cand)
            if f_new <= f_old + 1e-12 or t < 1e-6:
                break
            t *= 0.5
        theta = cand
        if abs(f_old - f_new) <= tol * max(1.0, abs(f_old)):
            f_old = f_new
            break
        f_old = f_new
    weights = np.vstack([np.zeros((1, d)), theta[:, :d]])
    intercepts = np.concatenate([[0.0], theta[:, d]])
    return {
        "kind": "logistic",
        "classes": list(classes),
        "features": list(feature_names),
        "means": means.tolist(),
        "scales": scales.tolist(),
        "weights": weights.tolist(),
        "intercepts": intercepts.tolist(),
        "l2": l2,
    }


def predict_proba(params: dict, X: np.ndarray) -> np.ndarray:
    X = np.asarray(X, dtype=np.float64)
    Zs = (X - np.asarray(params["means"])) / np.asarray(params["scales"])
    logits = Zs @ np.asarray(params["weights"]).T + np.asarray(params["intercepts"])
    return _softmax(logits)


def fold_of(group: str, folds: int) -> int:
    return int(hashlib.sha1(str(group).encode()).hexdigest(), 16) % folds


def grouped_cv_proba(X, y, groups, feature_names, classes, l2=1.0, folds=5, sample_weight=None):
    """Out-of-fold probabilities; folds assigned by a hash of the group (question)."""
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y)
    fold = np.array([fold_of(g, folds) for g in groups])
    P = np.zeros((len(y), len(classes)))
    for k in range(folds):
        tr, te = fold != k, fold == k
        if not te.any():
            continue
        sw = None if sample_weight is None else np.asarray(sample_weight)[tr]
        p = fit(X[tr], y[tr], feature_names, classes, l2=l2, sample_weight=sw)
        P[te] = predict_proba(p, X[te])
    return P


def _round(obj):
    if isinstance(obj, float):
        return float(f"{obj:.6g}") if np.isfinite(obj) else obj
    if isinstance(obj, list):
        return [_round(v) for v in obj]
    if isinstance(obj, dict):
        return {k: _round(v) for k, v in obj.items()}
    return obj


def dumps_params(params: dict) -> str:
    return json.dumps(_round(params), sort_keys=True, indent=1) + "\n"


def write_params(params: dict, path: str | Path) -> None:
    Path(path).write_text(dumps_params(params), encoding="utf-8")


def read_params(path: str | Path) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    X = rng.normal(size=(500, 3))
    logits = np.stack([np.zeros(500), X[:, 0] * 2, X[:, 1] * 2 - 1], 1)
    y = np.array([rng.choice(3, p=p) for p in _softmax(logits)])
    p1 = fit(X, y, ["a", "b", "c"], ["x", "y", "z"], l2=0.1)
    p2 = fit(X.copy(), y.copy(), ["a", "b", "c"], ["x", "y", "z"], l2=0.1)
    assert dumps_params(p1) == dumps_params(p2)
    print(dumps_params(p1))
    yb = (X[:, 0] + 0.5 * rng.normal(size=500) > 0).astype(int)
    pb = fit(X, yb, ["a", "b", "c"], ["neg", "pos"])
    print("binary acc", float(((predict_proba(pb, X)[:, 1] > 0.5) == yb).mean()))
