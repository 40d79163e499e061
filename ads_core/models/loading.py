"""Loading a policy model through the normal `from_pretrained` path (a local dir, a hub id in the local cache, or a
tiny preset built on first use): every load of a policy goes through here, for scoring and evaluation
(`load_causal_lm`: on the device and in the dtype the hardware gives) and for training (`load_for_training`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ads_core.models.hardware import pick_device, pick_dtype
from ads_core.models.smollm2 import bpe_cleanup_off
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
    name = resolve_model(model)
    dev = pick_device(device)
    torch_dtype = pick_dtype(dev, dtype, model=name)
    lm, tokenizer = _from_pretrained(name, torch_dtype, trust_remote_code)
    lm.to(dev).eval()
    return LoadedModel(lm, tokenizer, dev, torch_dtype, name)


def load_for_training(model: str, device: str) -> tuple[Any, Any]:
    """The policy a trainer updates and its tokenizer: float32, or bfloat16 on a CUDA GPU that supports it (never
    the measured CPU dtype: training on a CPU stays in float32); left where it loads (the trainer places it);
    the tokenizer left-padded with a pad token, as TRL generates from left-padded prompts."""
    import torch

    torch_dtype = torch.bfloat16 if device == "cuda" and torch.cuda.is_bf16_supported() else torch.float32
    lm, tokenizer = _from_pretrained(model, torch_dtype)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return lm, tokenizer


def _from_pretrained(name: str, torch_dtype: Any, trust_remote_code: bool = False) -> tuple[Any, Any]:
    """Tokenizer and causal LM; one line (`ModelLoadError`) when the model cannot be loaded."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        tokenizer = bpe_cleanup_off(AutoTokenizer.from_pretrained(name, trust_remote_code=trust_remote_code))
        lm = AutoModelForCausalLM.from_pretrained(name, dtype=torch_dtype, trust_remote_code=trust_remote_code)
    except OSError as exc:
        raise ModelLoadError(
            f"cannot load model {name!r}: {exc}. Pass a local model directory, or a hub id that is in the "
            "local Hugging Face cache (no downloads at run time)."
        ) from exc
    return lm, tokenizer


class ModelLoadError(Exception):
    """The model could not be loaded; the CLI turns it into an `error:` line."""
