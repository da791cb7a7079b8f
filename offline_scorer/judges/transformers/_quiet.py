"""transformers' own progress bars off while we load, convert or save a model."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def quiet_transformers() -> Iterator[None]:
    """transformers' own progress bars off for the duration (they would print a bar per
    load; our one log line says what is loaded, from where and how big)."""
    from transformers import modeling_gguf_pytorch_utils as gguf_utils
    from transformers.utils import logging as hf_logging

    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    # The GGUF conversion wraps its tensors in a plain tqdm bar, outside that switch.
    bar = getattr(gguf_utils, "tqdm", None)
    if bar is not None:
        setattr(gguf_utils, "tqdm", lambda iterable, *args, **kwargs: iterable)  # noqa: B010
    try:
        yield
    finally:
        if bar is not None:
            setattr(gguf_utils, "tqdm", bar)  # noqa: B010
        if was_enabled:
            hf_logging.enable_progress_bar()  # type: ignore[no-untyped-call]
