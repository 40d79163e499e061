"""vLLM scoring backend (GPU extra, imported lazily; never needed on CPU): one pass per row, like the fused scorer.

One pooling engine returns the final (post-norm) hidden state of every token (`task="token_embed"`, pooling
`ALL`, no activation: vLLM would otherwise L2-normalise each vector). From those states, exactly as the
transformers path does:
- the embedding is their float32 mean over the pooling span;
- the difficulty is the mean cross-entropy of the target tokens, from the LM head (read from the checkpoint's
  safetensors) applied at the target positions only, in chunks of `logits_chunk_elems`.
The earlier design (a pooling engine plus a generate engine with `prompt_logprobs`) ran two passes and computed a
full-vocabulary log-softmax at every position. Token ids come from our own tokenisation, so both backends score
the same tokens. Checked against transformers by bench/vllm_cpu_check.sh (CPU) and bench/gpu_validate.sh; never
picked by `auto` until it has run on a GPU here: choose it by name (`--scoring-backend vllm`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ads_core import models
from ads_core.config.build import ScoreConfig
from ads_core.stages.score.scorer import ScoreBatchResult, TokenizedRow

ENGINE_TOKENS_PER_CALL = 8  # token budgets of rows handed to the engine at once (bounds the hidden states held)


def _model_dir(model: str) -> Path:
    path = Path(model)
    if path.is_dir():
        return path
    from huggingface_hub import snapshot_download

    return Path(snapshot_download(model, local_files_only=True))


def lm_head_weight(model: str) -> Any:
    """The output projection [vocab, hidden] from the checkpoint (the input embeddings when they are tied)."""
    from safetensors import safe_open

    directory = _model_dir(model)
    config = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    text_config = config.get("text_config", config)
    tied = bool(config.get("tie_word_embeddings", text_config.get("tie_word_embeddings", False)))
    index = directory / "model.safetensors.index.json"
    weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"] if index.exists() else None
    wanted = ["lm_head.weight"] + (["model.embed_tokens.weight", "embed_tokens.weight"] if tied else [])
    for name in wanted:
        file = directory / (weight_map.get(name, "") if weight_map else "model.safetensors")
        if not file.is_file():
            continue
        with safe_open(str(file), framework="pt") as fh:
            if name in fh.keys():  # noqa: SIM118 - safe_open has keys(), not __contains__
                return fh.get_tensor(name)
    raise models.ModelLoadError(f"{directory}: no LM head weight ({' or '.join(wanted)}) in its safetensors")


def chunked_nll(
    states: Any, targets: Any, row_idx: Any, n_rows: int, weight: Any, chunk_elems: int
) -> tuple[np.ndarray, np.ndarray]:
    """Token-mean cross-entropy per row from hidden states at target positions, LM head applied in chunks."""
    import torch

    chunk = max(1, chunk_elems // int(weight.shape[0]))
    token_nll = torch.empty(len(targets), dtype=torch.float32, device=states.device)
    for start in range(0, len(targets), chunk):
        logits = (states[start : start + chunk] @ weight.T).float()
        token_nll[start : start + chunk] = torch.nn.functional.cross_entropy(
            logits, targets[start : start + chunk], reduction="none"
        )
    sums = torch.zeros(n_rows, dtype=torch.float64, device=states.device).index_add_(0, row_idx, token_nll.double())
    counts = torch.bincount(row_idx, minlength=n_rows)
    return (sums / counts.clamp_min(1)).cpu().numpy(), counts.cpu().numpy().astype(np.int32)


class VLLMScorer:
    name = "vllm"

    @classmethod
    def load(cls, cfg: ScoreConfig) -> tuple[VLLMScorer, Any]:
        scorer = cls(models.resolve_model(cfg.model), cfg)
        return scorer, scorer.tokenizer

    def __init__(self, model: str, cfg: ScoreConfig) -> None:
        try:
            import torch
            from transformers import AutoTokenizer
            from vllm import LLM
            from vllm.config import PoolerConfig
        except ImportError as exc:  # pragma: no cover - GPU extra only
            raise RuntimeError("the vllm backend needs the GPU extra: pip install 'ads-pipeline[gpu]'") from exc
        self.cfg = cfg
        self.device = models.pick_device(cfg.device)
        self.dtype = models.pick_dtype(self.device, cfg.dtype, model=cfg.model)
        self.tokenizer = AutoTokenizer.from_pretrained(model, trust_remote_code=cfg.trust_remote_code)
        extra: dict[str, Any] = {"gpu_memory_utilization": 0.5} if self.device.startswith("cuda") else {}
        self._engine = LLM(
            model=model,
            runner="pooling",
            convert="embed",
            dtype=str(self.dtype).removeprefix("torch."),
            max_model_len=cfg.max_length,
            trust_remote_code=cfg.trust_remote_code,
            # every token's state is needed: a prefix-cache hit would skip computing (and returning) some of them
            enable_prefix_caching=False,
            pooler_config=PoolerConfig(task="token_embed", pooling_type="ALL", use_activation=False),
            **extra,
        )
        self.weight = lm_head_weight(model).to(device=self.device, dtype=self.dtype)
        self.hidden = int(self.weight.shape[1])
        self._torch = torch

    def _encode(self, rows: list[TokenizedRow]) -> list[Any]:
        from vllm import PoolingParams
        from vllm.inputs import TokensPrompt

        outs = self._engine.encode(
            [TokensPrompt(prompt_token_ids=r.input_ids) for r in rows],
            PoolingParams(use_activation=False),
            pooling_task="token_embed",
            use_tqdm=False,
        )
        return [o.outputs.data for o in outs]

    def score(self, rows: list[TokenizedRow], progress: Callable[[int], None] | None = None) -> ScoreBatchResult:
        torch = self._torch
        n = len(rows)
        embeddings = np.zeros((n, self.hidden), dtype=np.float32)
        difficulty = np.zeros(n, dtype=np.float64)
        counts = np.zeros(n, dtype=np.int32)
        limit = self.cfg.token_budget * ENGINE_TOKENS_PER_CALL
        start = 0
        while start < n:
            stop, tokens = start, 0
            while stop < n and (stop == start or tokens + len(rows[stop].input_ids) <= limit):
                tokens += len(rows[stop].input_ids)
                stop += 1
            group = rows[start:stop]
            states = self._encode(group)
            picked, targets, row_idx = [], [], []
            for j, (row, h) in enumerate(zip(group, states, strict=True)):
                if h.shape[0] != len(row.input_ids):
                    raise RuntimeError(
                        f"vLLM returned {h.shape[0]} hidden states for a {len(row.input_ids)}-token "
                        "row; token_embed pooling must return every token"
                    )
                embeddings[start + j] = h[: row.pool_len].float().mean(0).cpu().numpy()
                picked.append(h[row.prompt_len - 1 : len(row.input_ids) - 1])
                targets.extend(row.input_ids[row.prompt_len :])
                row_idx.extend([j] * (len(row.input_ids) - row.prompt_len))
            with torch.inference_mode():
                nll, cnt = chunked_nll(
                    torch.cat(picked).to(device=self.device, dtype=self.dtype),
                    torch.tensor(targets, device=self.device),
                    torch.tensor(row_idx, device=self.device),
                    len(group),
                    self.weight,
                    self.cfg.logits_chunk_elems,
                )
            difficulty[start:stop], counts[start:stop] = nll, cnt
            if progress:
                progress(sum(len(r.input_ids) for r in group))  # tokens, as every scorer reports its work
            start = stop
        lengths = np.array([len(r.input_ids) for r in rows], dtype=np.int32)
        return ScoreBatchResult(embeddings, difficulty, lengths, counts, {"real_tokens": int(lengths.sum())})
