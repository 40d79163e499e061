"""Loading a policy model through the normal `from_pretrained` path (a local dir, a hub id in the local cache, or a
tiny preset built on first use), on the device and in the dtype the hardware gives."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ads_core.models.hardware import pick_device, pick_dtype
from ads_core.models.tiny import resolve_model


@dataclass
class LoadedModel:
    model: Any
    tokenizer: Any
    device: str
    dtype: Any
    name: str


def load_causal_lm(
    model: str | None, device: str = "auto", dtype: str = "auto", trust_remote_code: bool = False
) -> LoadedModel:
    """Load tokenizer and causal LM through the normal `from_pretrained` path."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    name = resolve_model(model)
    dev = pick_device(device)
    torch_dtype = pick_dtype(dev, dtype, model=name)
    try:
        tokenizer = AutoTokenizer.from_pretrained(name, trust_remote_code=trust_remote_code)
        lm = AutoModelForCausalLM.from_pretrained(name, dtype=torch_dtype, trust_remote_code=trust_remote_code)
    except OSError as exc:
        raise ModelLoadError(
            f"cannot load model {name!r}: {exc}. Pass a local model directory, or a hub id that is in the "
            "local Hugging Face cache (no downloads at run time)."
        ) from exc
    lm.to(dev).eval()
    return LoadedModel(lm, tokenizer, dev, torch_dtype, name)


class ModelLoadError(Exception):
    """The model could not be loaded; the CLI turns it into an `error:` line."""
