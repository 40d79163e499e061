"""The fused scorer on transformers (CPU or GPU): one forward pass gives the embedding and the NLL.

A causal LM's final (post-norm) hidden states are the same whether or not the LM head is applied,
so one pass over `"Question:\\n" + question + "\\n\\nAnswer:\\n" + solution` yields
- the embedding: masked mean of the final hidden states over the pooling span, in float32;
- the difficulty: mean cross-entropy of the solution tokens given the question (natural log).
The LM head runs only at solution positions, in bounded chunks, never over the whole sequence.

Batches: padded (length-sorted rows, right padding, a token budget) or packed (rows laid end to end,
`position_ids` restarting per row, no attention mask). transformers turns restarting position ids into a
block-diagonal causal mask (SDPA, eager) or varlen flash-attention (`flash_attention_2`, batch flattened to one
sequence). Only varlen skips the cross-row work: SDPA still computes and masks the whole pack, so `packing=auto`
packs only under flash-attention. Results come back in the rows' original order either way.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ads_core.config.build import ScoreConfig
from ads_core.stages.score.scorer import ScoreBatchResult, TokenizedRow, plan_batches, plan_packs, run_order

log = logging.getLogger("ads.score")


def _flash_attn_available() -> bool:
    try:
        from transformers.utils import is_flash_attn_2_available
    except ImportError:  # pragma: no cover - very old transformers
        return False
    return bool(is_flash_attn_2_available())


class TransformersScorer:
    """The fused scorer on transformers (CPU or GPU)."""

    name = "transformers"

    @classmethod
    def load(cls, cfg: ScoreConfig) -> tuple[TransformersScorer, Any]:
        from ads_core import models

        loaded = models.load_causal_lm(cfg.model, cfg.device, cfg.dtype, cfg.trust_remote_code)
        if loaded.device.startswith("cuda") and cfg.packing != "off" and _flash_attn_available():
            loaded.model.set_attn_implementation("flash_attention_2")  # varlen: packed rows cost no padding
        return cls(loaded.model, cfg), loaded.tokenizer

    def __init__(self, model: Any, cfg: ScoreConfig) -> None:
        self.model = model
        self.cfg = cfg
        self.backbone = model.base_model
        self.lm_head = model.get_output_embeddings()
        self.device = next(model.parameters()).device
        pad = getattr(model.config, "pad_token_id", None)
        self.pad_id = int(pad) if pad is not None else 0
        attn = str(getattr(model.config, "_attn_implementation", None) or "eager")
        self.varlen = attn.startswith("flash_attention")
        self.packing = cfg.packing == "on" or (cfg.packing == "auto" and self.varlen)
        # Under varlen a pack may fill the whole budget; a dense mask costs pack_len^2, so keep packs row-sized.
        self.pack_len = cfg.token_budget if self.varlen else min(cfg.max_length, cfg.token_budget)

    def _plan(self, lengths: np.ndarray) -> list[list[np.ndarray]]:
        """The batches (each a list of packs of row indices), in the order they run (`run_order`: a fair ETA)."""
        if self.packing:
            return run_order(plan_packs(lengths, self.cfg.token_budget, self.pack_len))
        batches = plan_batches(lengths, self.cfg.token_budget, self.cfg.max_padding)
        return run_order([[np.asarray([i]) for i in b] for b in batches])  # one row per pack: right padding

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
            for packs in self._plan(lengths):
                order, states, emb = self._forward(rows, lengths, packs)
                padded_tokens += states.shape[0] * states.shape[1]
                embeddings[order] = emb.cpu().numpy()
                nll, counts = self._target_nll(
                    states, [rows[i] for i in order], self._starts(lengths, packs, states.shape[1])
                )
                difficulty[order] = nll
                n_target[order] = counts
                if progress:
                    progress(int(lengths[order].sum()))  # tokens: the work done, whatever the rows' lengths
        elapsed = time.perf_counter() - t0
        stats = {
            "real_tokens": real_tokens,
            "padded_tokens": padded_tokens,
            "seconds": elapsed,
            "tokens_per_s": real_tokens / elapsed if elapsed else 0.0,
            "padding_fraction": 1 - real_tokens / padded_tokens if padded_tokens else 0.0,
            "packed": float(self.packing),
        }
        return ScoreBatchResult(embeddings, difficulty, lengths.astype(np.int32), n_target, stats)

    @staticmethod
    def _starts(lengths: np.ndarray, packs: list[np.ndarray], width: int) -> list[int]:
        """Offset of each row's first token in the flattened [packs * width] states, in pack order."""
        starts = []
        for b, pack in enumerate(packs):
            offset = b * width
            for i in pack:
                starts.append(offset)
                offset += int(lengths[i])
        return starts

    def _forward(self, rows: list[TokenizedRow], lengths: np.ndarray, packs: list[np.ndarray]) -> tuple[Any, ...]:
        """One forward over a batch of packs: (row indices in pack order, states [packs, width, hidden], embeddings)."""
        import torch

        width = max(int(lengths[p].sum()) for p in packs)
        per_pack = max(len(p) for p in packs)
        ids = torch.full((len(packs), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(packs), width), dtype=torch.long)
        position = torch.zeros((len(packs), width), dtype=torch.long)
        pool = torch.zeros((len(packs), per_pack, width), dtype=torch.float32)
        order: list[int] = []
        for b, pack in enumerate(packs):
            offset = 0
            for r, i in enumerate(pack):
                row, size = rows[i], int(lengths[i])
                ids[b, offset : offset + size] = torch.tensor(row.input_ids)
                mask[b, offset : offset + size] = 1
                position[b, offset : offset + size] = torch.arange(size)
                pool[b, r, offset : offset + row.pool_len] = 1.0
                order.append(int(i))
                offset += size
            position[b, offset:] = torch.arange(width - offset)  # the pad tail is a sequence of its own
        ids, pool = ids.to(self.device), pool.to(self.device)
        if not self.packing:
            kwargs = {"attention_mask": mask.to(self.device)}
        elif self.varlen:  # flash-attention finds the rows (cu_seqlens) from a single flattened sequence
            ids, kwargs = ids.view(1, -1), {"position_ids": position.view(1, -1).to(self.device)}
        else:  # SDPA / eager: restarting position ids with no attention mask make a block-diagonal causal mask
            kwargs = {"position_ids": position.to(self.device)}
        states = self.backbone(input_ids=ids, use_cache=False, **kwargs).last_hidden_state
        states = states.view(len(packs), width, -1)
        # masked sums as one batched matmul: no [batch, width, hidden] temporary (and no copy in fp32)
        emb = torch.bmm(pool, states.float()) / pool.sum(-1, keepdim=True).clamp_min(1.0)
        picked = [emb[b, r] for b, pack in enumerate(packs) for r in range(len(pack))]
        return np.asarray(order), states, torch.stack(picked)

    def _target_nll(self, states: Any, rows: list[TokenizedRow], starts: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """Token-mean NLL over target tokens, applying the LM head only at those positions, chunked."""
        import torch

        pos, tgt, row_idx = [], [], []
        for j, (row, start) in enumerate(zip(rows, starts, strict=True)):
            count = len(row.input_ids) - row.prompt_len
            row_idx.extend([j] * count)
            pos.extend(range(start + row.prompt_len - 1, start + len(row.input_ids) - 1))
            tgt.extend(row.input_ids[row.prompt_len :])
        device = states.device
        row_t = torch.tensor(row_idx, device=device)
        tgt_t = torch.tensor(tgt, device=device)
        picked = states.reshape(-1, states.shape[-1])[torch.tensor(pos, device=device)]  # [n_target, hidden]
        vocab = int(self.lm_head.weight.shape[0])
        chunk = max(1, self.cfg.logits_chunk_elems // vocab)
        token_nll = torch.empty(len(tgt), dtype=torch.float32, device=device)
        for start in range(0, len(tgt), chunk):
            logits = self.lm_head(picked[start : start + chunk]).float()
            token_nll[start : start + chunk] = torch.nn.functional.cross_entropy(
                logits, tgt_t[start : start + chunk], reduction="none"
            )
        sums = torch.zeros(len(rows), dtype=torch.float64, device=device).index_add_(0, row_t, token_nll.double())
        counts = torch.bincount(row_t, minlength=len(rows))
        return (sums / counts.clamp_min(1)).cpu().numpy(), counts.cpu().numpy().astype(np.int32)
