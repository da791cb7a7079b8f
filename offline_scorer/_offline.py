"""Force every Hugging Face library into offline mode before any of them is imported.

offline-scorer promises that no import, model load or generation opens a network
connection. The switches below are read by huggingface_hub and transformers at import time,
so this module runs from ``offline_scorer/__init__.py`` before anything heavy is imported.
"""

from __future__ import annotations

import os
import sys

_SWITCHES = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1",
    "DO_NOT_TRACK": "1",
    # transformers >= 5 swaps layers for kernels fetched from the Hub ("kernelize") when the
    # kernels package is installed, by default: on a CUDA device that is a download, and
    # offline it fails the load. Our loads also pass use_kernels=False.
    "USE_HUB_KERNELS": "NO",
}


def force_offline() -> None:
    """Set the offline switches, also on an already imported huggingface_hub."""
    os.environ.update(_SWITCHES)
    hub_constants = sys.modules.get("huggingface_hub.constants")
    if hub_constants is not None:
        # The user imported huggingface_hub before us: its constants are already frozen.
        hub_constants.HF_HUB_OFFLINE = True  # type: ignore[attr-defined]
        hub_constants.HF_HUB_DISABLE_TELEMETRY = True  # type: ignore[attr-defined]
