"""Built-in defaults, so `ads build` with no arguments runs on a laptop: bundled sample, tiny local model."""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

DEFAULT_OUT = "ads-out"


def sample_path() -> str:
    """The bundled sample: the first 300 GSM8K training problems (MIT, see data/GSM8K_LICENSE)."""
    return str(resources.files("ads_core") / "data" / "gsm8k_sample.jsonl")


def cache_dir() -> Path:
    """Where generated artifacts such as the tiny default model live (ADS_CACHE_DIR overrides)."""
    root = os.environ.get("ADS_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "ads-pipeline"
    )
    return Path(root)
