"""What the predictor is trained on: frozen embeddings of every problem, and source policies' success labels.

Embeddings: the mean-pooled last hidden state (after the final norm) of the base policy over the raw problem text,
no chat template, as the official code does. The build already keeps such an embedding per row (the score stage's
``embedding`` column) when the build's model is the embedding model; those are reused (``build_embeddings``).

Labels: each source policy rolls out every problem G times with the training prompt (the chat template TRL
renders) and temperature; a label is the mean correctness (the project's math reward). Labels and embeddings are
cached under the output folder keyed by content (the policy's files, the rows, the settings), so a killed
``ads dots-train`` run again reuses what it finished.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ads_core import storage


def folder_digest(path: str) -> str:
    """sha256 over a model folder's file names and contents (weights, config, tokenizer)."""
    h = hashlib.sha256()
    root = Path(path)
    for f in sorted(p for p in root.rglob("*") if p.is_file() and not p.name.startswith(".")):
        h.update(f.relative_to(root).as_posix().encode())
        h.update(storage.content_hash(str(f)).encode())
    return h.hexdigest()[:16]


def cache_key(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def cached_array(path: Path, make: Callable[[], np.ndarray]) -> np.ndarray:
    """np.load of PATH (allow_pickle off) when present, else MAKE() written atomically."""
    if path.is_file():
        return np.load(path, allow_pickle=False)
    value = np.asarray(make())
    with storage.atomic_local_file(str(path), suffix=".npy") as tmp:
        with open(tmp, "wb") as fh:
            np.save(fh, value, allow_pickle=False)
    return value


def embed_texts(model_path: str, texts: list[str], batch_size: int = 16) -> np.ndarray:
    """Mean-pooled last hidden state of MODEL_PATH's base transformer over each text."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    from ads_core.models.smollm2 import bpe_cleanup_off

    tokenizer = bpe_cleanup_off(AutoTokenizer.from_pretrained(model_path))
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModel.from_pretrained(model_path).eval()
    out = []
    with torch.inference_mode():
        for start in range(0, len(texts), batch_size):
            enc = tokenizer(texts[start : start + batch_size], return_tensors="pt", padding=True, truncation=True)
            states = model(**enc).last_hidden_state
            mask = enc["attention_mask"].unsqueeze(-1).to(states.dtype)
            out.append(((states * mask).sum(1) / mask.sum(1).clamp(min=1)).float().numpy())
    return np.concatenate(out).astype(np.float32)


def build_embeddings(artifact: str, model_path: str, sample_ids: list[str]) -> np.ndarray | None:
    """The build's own embeddings of these rows, when the build scored with MODEL_PATH; else None."""
    final = Path(artifact).parent
    try:
        built_with = storage.read_json(str(final / "manifest.json")).get("extra", {}).get("policy_model")
    except (OSError, ValueError):
        return None
    scores = [p for p in (final.parent / "scores" / "scores.parquet",) if p.is_file()]
    if built_with != model_path or not scores:
        return None
    import pyarrow.parquet as pq

    found: dict[str, np.ndarray] = {}
    for path in scores:
        names = pq.ParquetFile(path).schema_arrow.names
        if not {"sample_id", "embedding"} <= set(names):
            continue
        table = pq.read_table(path, columns=["sample_id", "embedding"])
        for sid, emb in zip(table.column("sample_id").to_pylist(), table.column("embedding").to_pylist(), strict=True):
            found[str(sid)] = np.asarray(emb, dtype=np.float32)
    if not all(s in found for s in sample_ids):
        return None
    return np.stack([found[s] for s in sample_ids])


def rollout_success(
    model_path: str,
    prompts: list[Any],
    truths: list[str],
    num_generations: int,
    temperature: float,
    max_new_tokens: int,
    seed: int,
    batch_size: int = 16,
    progress: Callable[[int], None] | None = None,
) -> np.ndarray:
    """Mean correctness of NUM_GENERATIONS sampled completions of each prompt (chat messages) by MODEL_PATH."""
    import torch

    from ads_core.grading import grade
    from ads_core.models.loading import load_causal_lm

    loaded = load_causal_lm(model_path, device="cpu", dtype="float32")  # the one policy loader; no timed dtype
    model, tokenizer = loaded.model, loaded.tokenizer
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    texts = [tokenizer.apply_chat_template(p, tokenize=False, add_generation_prompt=True) for p in prompts]
    success = np.zeros(len(texts))
    torch.manual_seed(seed)
    with torch.inference_mode():
        for start in range(0, len(texts), batch_size):
            enc = tokenizer(texts[start : start + batch_size], return_tensors="pt", padding=True)
            out = model.generate(
                **enc,
                do_sample=True,
                temperature=temperature,
                max_new_tokens=max_new_tokens,
                num_return_sequences=num_generations,
                pad_token_id=tokenizer.pad_token_id,
            )
            done = tokenizer.batch_decode(out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
            for i, text in enumerate(done):
                row = start + i // num_generations
                success[row] += float(grade(text, truths[row]).correct) / num_generations
            if progress:
                progress(min(batch_size, len(texts) - start))
    return success
