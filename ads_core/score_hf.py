"""The fused scorer on transformers (CPU or GPU): one forward pass gives the embedding and the NLL.

A causal LM's final (post-norm) hidden states are the same whether or not the LM head is applied,
so one pass over `"Question:\\n" + question + "\\n\\nAnswer:\\n" + solution` yields
- the embedding: masked mean of the final hidden states over the pooling span, in float32;
- the difficulty: mean cross-entropy of the solution tokens given the question (natural log).
The LM head runs only at solution positions, in bounded chunks, never over the whole sequence.
Rows are batched by a token budget over length-sorted rows, then returned in their original order.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ads_core.config import ScoreConfig
from ads_core.scorer import ScoreBatchResult, TokenizedRow, plan_batches


class TransformersScorer:
    """The fused scorer on transformers (CPU or GPU)."""

    name = "transformers"

    @classmethod
    def load(cls, cfg: ScoreConfig) -> tuple[TransformersScorer, Any]:
        from ads_core import models

        loaded = models.load_causal_lm(cfg.model, cfg.device, cfg.dtype, cfg.trust_remote_code)
        return cls(loaded.model, cfg), loaded.tokenizer

    def __init__(self, model: Any, cfg: ScoreConfig) -> None:
        self.model = model
        self.cfg = cfg
        self.backbone = model.base_model
        self.lm_head = model.get_output_embeddings()
        self.device = next(model.parameters()).device
        pad = getattr(model.config, "pad_token_id", None)
        self.pad_id = int(pad) if pad is not None else 0

    def score(self, rows: list[TokenizedRow], progress: Callable[[int], None] | None = None) -> ScoreBatchResult:
        import torch

        n = len(rows)
        hidden = int(self.model.config.hidden_size)
        embeddings = np.zeros((n, hidden), dtype=np.float32)
        difficulty = np.zeros(n, dtype=np.float64)
        n_target = np.zeros(n, dtype=np.int32)
        lengths = np.array([len(r.input_ids) for r in rows], dtype=np.int64)
        real_tokens, padded_tokens, t0 = int(lengths.sum()), 0, time.perf_counter()
        with torch.inference_mode():
            for batch in plan_batches(lengths, self.cfg.token_budget, self.cfg.max_padding):
                width = int(lengths[batch].max())
                padded_tokens += width * len(batch)
                ids = torch.full((len(batch), width), self.pad_id, dtype=torch.long)
                mask = torch.zeros((len(batch), width), dtype=torch.long)
                pool = torch.zeros((len(batch), width), dtype=torch.float32)
                for j, i in enumerate(batch):
                    row = rows[i]
                    ids[j, : len(row.input_ids)] = torch.tensor(row.input_ids)
                    mask[j, : len(row.input_ids)] = 1
                    pool[j, : row.pool_len] = 1.0
                ids, mask, pool = ids.to(self.device), mask.to(self.device), pool.to(self.device)
                states = self.backbone(input_ids=ids, attention_mask=mask, use_cache=False).last_hidden_state
                # masked sum as a batched matmul: no [batch, width, hidden] temporary (and no copy in fp32)
                emb = torch.bmm(pool.unsqueeze(1), states.float()).squeeze(1) / pool.sum(1, keepdim=True).clamp_min(1.0)
                embeddings[batch] = emb.cpu().numpy()
                nll, counts = self._target_nll(states, [rows[i] for i in batch])
                difficulty[batch] = nll
                n_target[batch] = counts
                if progress:
                    progress(len(batch))
        elapsed = time.perf_counter() - t0
        stats = {"real_tokens": real_tokens, "padded_tokens": padded_tokens, "seconds": elapsed,
                 "tokens_per_s": real_tokens / elapsed if elapsed else 0.0,
                 "padding_fraction": 1 - real_tokens / padded_tokens if padded_tokens else 0.0}
        return ScoreBatchResult(embeddings, difficulty, lengths.astype(np.int32), n_target, stats)

    def _target_nll(self, states: Any, rows: list[TokenizedRow]) -> tuple[np.ndarray, np.ndarray]:
        """Token-mean NLL over target tokens, applying the LM head only at those positions, chunked."""
        import torch

        row_idx, pos, tgt = [], [], []
        for j, row in enumerate(rows):
            count = len(row.input_ids) - row.prompt_len
            row_idx.extend([j] * count)
            pos.extend(range(row.prompt_len - 1, len(row.input_ids) - 1))
            tgt.extend(row.input_ids[row.prompt_len:])
        device = states.device
        row_t = torch.tensor(row_idx, device=device)
        pos_t = torch.tensor(pos, device=device)
        tgt_t = torch.tensor(tgt, device=device)
        picked = states[row_t, pos_t]  # [n_target_tokens, hidden]
        vocab = int(self.lm_head.weight.shape[0])
        chunk = max(1, self.cfg.logits_chunk_elems // vocab)
        token_nll = torch.empty(len(tgt), dtype=torch.float32, device=device)
        for start in range(0, len(tgt), chunk):
            logits = self.lm_head(picked[start:start + chunk]).float()
            token_nll[start:start + chunk] = torch.nn.functional.cross_entropy(
                logits, tgt_t[start:start + chunk], reduction="none")
        sums = torch.zeros(len(rows), dtype=torch.float64, device=device).index_add_(0, row_t, token_nll.double())
        counts = torch.bincount(row_t, minlength=len(rows))
        return (sums / counts.clamp_min(1)).cpu().numpy(), counts.cpu().numpy().astype(np.int32)
