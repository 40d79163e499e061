"""Model loading, hardware-derived device/dtype, and the tiny default model built locally.

`--model` is anything `from_pretrained` accepts: a local directory or a hub id (resolved from the
local cache; set HF_HUB_OFFLINE=1 to be sure nothing is fetched). The default model is a small
Qwen2-architecture causal LM built deterministically from a seed (and warmed up for 100 seeded steps
on the bundled sample, so its difficulties mean something), with a byte-level BPE tokenizer trained
on the bundled sample, saved with `save_pretrained` and loaded back through the real
`from_pretrained` path, so the demo and tests need no download.

The code lives in named modules (`tiny`: the default model and the built-in names; `smollm2`: SmolLM2-135M
from its GGUF; `hardware`: device and dtype; `loading`: loading a model; `dtype`: the
measured CPU dtype; `fingerprint`: content fingerprints); this package re-exports them.
"""

from __future__ import annotations

from ads_core.models.hardware import (
    BF16_CPU_FLAGS,
    DTYPES,
    GPU_DEVICE_NODES,
    cpu_flags,
    cpu_has_native_bf16,
    dtype_choice,
    dtype_name,
    pick_device,
    pick_dtype,
)
from ads_core.models.loading import LoadedModel, ModelLoadError, load_causal_lm
from ads_core.models.tiny import (
    BUILTIN_MODELS,
    CHATML_TEMPLATE,
    DEFAULT_MODEL,
    SPECIAL_TOKENS,
    TINY_PRESETS,
    TINY_VERSION,
    Progress,
    TinyModelSpec,
    absent_key,
    build_tokenizer,
    cached_model_dir,
    default_model_dir,
    is_built,
    make_tiny_model,
    preset_of,
    resolve_model,
    warm_up,
)

__all__ = [
    "BUILTIN_MODELS",
    "BF16_CPU_FLAGS",
    "CHATML_TEMPLATE",
    "DEFAULT_MODEL",
    "DTYPES",
    "GPU_DEVICE_NODES",
    "SPECIAL_TOKENS",
    "TINY_PRESETS",
    "TINY_VERSION",
    "LoadedModel",
    "ModelLoadError",
    "Progress",
    "TinyModelSpec",
    "absent_key",
    "build_tokenizer",
    "cached_model_dir",
    "cpu_flags",
    "cpu_has_native_bf16",
    "default_model_dir",
    "dtype_choice",
    "dtype_name",
    "is_built",
    "load_causal_lm",
    "make_tiny_model",
    "pick_device",
    "pick_dtype",
    "preset_of",
    "resolve_model",
    "warm_up",
]
