"""The key/value caches of the decode loop and of label reads (issue 14).

* **a preallocated key/value cache** (``new_cache``): each layer writes its new keys into a
  buffer that doubles when full, instead of concatenating the whole cache at every step;
  guesses the model did not take are cut off again (``truncate``).
* **shared prefixes** (``PrefixStore``): the keys and values of a step's system block,
  computed once per prefix and model and copied into every row that starts with it.
* **the row layout** (``left_padded``): ``[prefix | padding | own tokens]``.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    import torch

    from offline_scorer.judges.transformers._prefix_files import PrefixFiles

# How many distinct prefixes stay cached per model (each holds keys and values for one row).
PREFIX_CACHE_ENTRIES = 32
# ... and at most this many bytes of keys and values in all.
PREFIX_CACHE_BYTES = 128 * 1024 * 1024
# A shared prefix shorter than this is not worth a cache entry.
MIN_PREFIX_TOKENS = 16
# New tokens the cache has room for before its first doubling.
FIRST_STRETCH = 128


def new_cache(model: Any, capacity: int) -> Any:
    """A cache whose full-attention layers write into preallocated buffers.

    Returns None when the model has layers of another kind (sliding windows, linear
    attention): the caller then uses ``generate``.
    """
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer

    cache = DynamicCache(config=model.config)
    if not cache.layers or any(type(layer) is not DynamicLayer for layer in cache.layers):
        return None
    growing = _growing_layer_class()
    cache.layers = cast(Any, [growing(capacity) for _ in cache.layers])
    return cache


def supports_loop(model: Any) -> bool:
    """Whether this model can run in our loop (plain full attention, a causal LM forward);
    answered once per model object."""
    known = _SUPPORTED.get(model)
    if known is None:
        try:
            known = new_cache(model, 1) is not None
        except Exception:
            known = False
        _SUPPORTED[model] = known
    return known


_SUPPORTED: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()


def left_padded(
    tails: Sequence[Sequence[int]], prefix: int, pad_id: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Rows laid out as ``[prefix | padding | own tokens]``: (ids, mask, positions).

    ``ids`` and ``positions`` hold the rows' own tokens, right-aligned after ``pad_id``
    padding (``[rows, width]``); ``mask`` covers the ``prefix`` cached positions too
    (``[rows, prefix + width]``), 1 on the prefix and the own tokens, 0 on the padding.
    Positions are counted per row from the prefix's end (0 in the padding, which no token
    attends to), so each token sees exactly what it sees without padding or cache.
    """
    import torch

    width = max(len(tail) for tail in tails)
    ids = torch.full((len(tails), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(tails), prefix + width), dtype=torch.long)
    mask[:, :prefix] = 1
    positions = torch.zeros((len(tails), width), dtype=torch.long)
    for index, tail in enumerate(tails):
        ids[index, width - len(tail) :] = torch.tensor(list(tail), dtype=torch.long)
        mask[index, prefix + width - len(tail) :] = 1
        positions[index, width - len(tail) :] = torch.arange(prefix, prefix + len(tail))
    return ids, mask, positions


class PrefixStore:
    """Keys and values of shared prompt prefixes, per model, least recently used dropped."""

    def __init__(
        self,
        entries: int = PREFIX_CACHE_ENTRIES,
        max_bytes: int = PREFIX_CACHE_BYTES,
        files: PrefixFiles | None = None,
    ):
        self.files = files
        """Where prefixes are also kept for later processes (None: in memory only)."""
        self._entries = entries
        self._max_bytes = max_bytes
        self._bytes = 0
        self._store: OrderedDict[tuple[int, ...], list[tuple[torch.Tensor, torch.Tensor]]] = (
            OrderedDict()
        )
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(
        self, model: Any, ids: tuple[int, ...], persist: bool = True
    ) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """The per-layer (keys, values) of ``ids`` for one row, computed on first use (or
        read from ``files``, where an earlier process computed them); ``persist`` False
        keeps a prefix that serves one call (an item's) off the disk."""
        with self._lock:
            found = self._store.get(ids)
            if found is not None:
                self._store.move_to_end(ids)
                self.hits += 1
                return found
        files = self.files if persist else None
        stored = files.load(ids) if files is not None else None
        layers = stored if stored is not None else self._compute(model, ids, files)
        size = sum(k.nbytes + v.nbytes for k, v in layers)
        with self._lock:
            self.misses += 1
            if ids not in self._store and size <= self._max_bytes:
                self._store[ids] = layers
                self._bytes += size
            while len(self._store) > self._entries or self._bytes > self._max_bytes:
                _, dropped = self._store.popitem(last=False)
                self._bytes -= sum(k.nbytes + v.nbytes for k, v in dropped)
        return layers

    def _compute(
        self, model: Any, ids: tuple[int, ...], files: PrefixFiles | None
    ) -> list[tuple[torch.Tensor, torch.Tensor]]:
        import torch

        cache = new_cache(model, len(ids))
        assert cache is not None
        device = model.device
        with torch.inference_mode():
            model(
                input_ids=torch.tensor([ids], device=device),
                cache=cache,
                use_cache=True,
                logits_to_keep=1,
            )
        layers = [(layer.keys.clone(), layer.values.clone()) for layer in cache.layers]
        if files is not None:
            files.save(ids, layers)
        return layers

    def __len__(self) -> int:
        return len(self._store)


@lru_cache(maxsize=1)
def _growing_layer_class() -> Any:
    """The cache layer class, made on first use (transformers loads only then)."""
    from transformers.cache_utils import DynamicLayer

    return type("GrowingLayer", (_Growing, DynamicLayer), {})


class _Growing:
    """One layer's keys and values in a buffer that doubles when full.

    It answers the calls transformers makes on a cache layer (``update``,
    ``get_seq_length``, ``get_mask_sizes``) and the loop's own (``preload``, ``select``);
    it is mixed into transformers' own layer class, whose type checks the cache makes.
    """

    is_sliding = False
    is_compileable = False
    is_initialized = False

    def __init__(self, capacity: int):
        self._capacity = max(1, capacity)
        self._length = 0
        self._keys: torch.Tensor | None = None
        self._values: torch.Tensor | None = None
        self.keys: torch.Tensor | None = None
        self.values: torch.Tensor | None = None

    def _allocate(self, like: torch.Tensor, batch: int) -> None:
        _, heads, _, dim = like.shape
        shape = (batch, heads, self._capacity, dim)
        self._keys = like.new_empty(shape)
        self._values = like.new_empty(shape)
        self.device = like.device
        self.is_initialized = True

    def preload(self, keys: torch.Tensor, values: torch.Tensor, batch: int) -> None:
        """Start every row of the batch from the same (one-row) keys and values."""
        self._capacity = max(self._capacity, keys.shape[2])
        self._allocate(keys, batch)
        assert self._keys is not None and self._values is not None
        length = keys.shape[2]
        self._keys[:, :, :length] = keys
        self._values[:, :, :length] = values
        self._set_length(length)

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self._allocate(key_states, key_states.shape[0])
        assert self._keys is not None and self._values is not None
        start, count = self._length, key_states.shape[2]
        if start + count > self._capacity:
            self._grow(start + count)
        self._keys[:, :, start : start + count] = key_states
        self._values[:, :, start : start + count] = value_states
        self._set_length(start + count)
        assert self.keys is not None and self.values is not None
        return self.keys, self.values

    def _grow(self, needed: int) -> None:
        import torch

        assert self._keys is not None and self._values is not None
        capacity = max(needed, 2 * self._capacity)
        keys = self._keys.new_empty((*self._keys.shape[:2], capacity, self._keys.shape[3]))
        values = torch.empty_like(keys)
        keys[:, :, : self._length] = self._keys[:, :, : self._length]
        values[:, :, : self._length] = self._values[:, :, : self._length]
        self._keys, self._values, self._capacity = keys, values, capacity

    def _set_length(self, length: int) -> None:
        assert self._keys is not None and self._values is not None
        self._length = length
        self.keys = self._keys[:, :, :length]
        self.values = self._values[:, :, :length]

    def select(self, rows: torch.Tensor) -> None:
        """Keep only these batch rows (only the filled part is copied, so the unused rest
        of the buffer never becomes resident memory)."""
        assert self._keys is not None and self._values is not None
        keys = self._keys.new_empty((rows.shape[0], *self._keys.shape[1:]))
        values = self._values.new_empty(keys.shape)
        keys[:, :, : self._length] = self._keys[rows, :, : self._length]
        values[:, :, : self._length] = self._values[rows, :, : self._length]
        self._keys, self._values = keys, values
        self._set_length(self._length)

    def truncate(self, length: int) -> None:
        """Forget every position from ``length`` on (guesses the model did not take)."""
        self._set_length(min(length, self._length))

    def get_seq_length(self) -> int:
        return self._length

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self._length + query_length, 0

    def get_max_length(self) -> int:
        return -1
