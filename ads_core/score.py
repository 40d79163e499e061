"""Fused scoring: one forward pass per row gives both the embedding and the difficulty.

A causal LM's final (post-norm) hidden states are the same whether or not the LM head is applied,
so one pass over `"Question:\\n" + question + "\\n\\nAnswer:\\n" + solution` yields
- the embedding: masked mean of the final hidden states over the pooling span, in float32;
- the difficulty: mean cross-entropy of the solution tokens given the question (natural log).
The LM head runs only at solution positions, in bounded chunks, never over the whole sequence.
Rows are batched by a token budget over length-sorted rows, then returned in their original order.

Shards (row ranges of the formatted table) are scored and written independently, so they can be
mapped in parallel and resumed one by one; `merge_scores` checks every sample_id appears once.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from ads_core import manifest as mf
from ads_core.config import ScoreConfig
from ads_core import storage

log = logging.getLogger("ads.score")

STAGE_SHARD = "score_shard"
STAGE_MERGE = "merge_scores"
TEXT_MODES = ("question_plus_solution", "question_only")
QUESTION_PREFIX = "Question:\n"
ANSWER_PREFIX = "\n\nAnswer:\n"


@dataclass
class TokenizedRow:
    input_ids: list[int]
    prompt_len: int  # tokens before the first scored (solution) token
    pool_len: int  # tokens the embedding pools over, from position 0
    truncated: bool
    nll_target: str  # "solution" or "answer" (rows without a reference solution)


@dataclass
class ScoreBatchResult:
    embeddings: np.ndarray  # float32 [n, hidden]
    difficulty: np.ndarray  # float64 [n]
    n_tokens: np.ndarray  # int32 [n]
    n_target_tokens: np.ndarray  # int32 [n]
    stats: dict[str, float] = field(default_factory=dict)


def tokenize_row(tokenizer: Any, question: str, solution: str | None, answer: str, cfg: ScoreConfig) -> TokenizedRow:
    """Token ids for one row: prompt and target tokenised apart, so the boundary is exact.

    If the row is longer than max_length, the target keeps at least a quarter of the budget
    (the question is cut from the left), so every row keeps scored tokens: never a silent inf.
    """
    target, nll_target = (solution, "solution") if solution and solution.strip() else (answer, "answer")
    prompt_ids = tokenizer(QUESTION_PREFIX + question + ANSWER_PREFIX, add_special_tokens=False)["input_ids"]
    target_ids = tokenizer(target, add_special_tokens=False)["input_ids"]
    if not target_ids:
        eos = tokenizer.eos_token_id
        target_ids = [eos if eos is not None else 0]
    limit = cfg.max_length
    truncated = len(prompt_ids) + len(target_ids) > limit
    if truncated:
        keep_target = min(len(target_ids), max(limit - len(prompt_ids), limit // 4))
        keep_prompt = limit - keep_target
        prompt_ids = prompt_ids[len(prompt_ids) - keep_prompt:] if keep_prompt else []
        target_ids = target_ids[:keep_target]
    if not prompt_ids:  # the first target token needs a position to be predicted from
        prompt_ids, target_ids = target_ids[:1], target_ids[1:] or target_ids[:1]
    ids = prompt_ids + target_ids
    pool_len = len(prompt_ids) if cfg.text_mode == "question_only" else len(ids)
    return TokenizedRow(ids, len(prompt_ids), pool_len, truncated, nll_target)


def plan_batches(lengths: Sequence[int], token_budget: int, max_padding: float | None = None) -> list[np.ndarray]:
    """Group row indices into batches of similar length whose padded size fits the budget.

    With `max_padding`, a batch also closes when adding the next (longest so far) row would make more than
    that share of the batch's padded size padding. On CPU, throughput per padded token is about the same
    for any batch of >= ~100-token rows, so padding is pure loss (29% of the work at 128 real rows with a
    16k budget); on GPU it keeps big batches wherever lengths are dense.
    """
    order = np.argsort(np.asarray(lengths), kind="stable")
    batches: list[np.ndarray] = []
    current: list[int] = []
    longest = real = 0
    for idx in order:
        n = int(lengths[idx])
        if current:
            size = max(longest, n) * (len(current) + 1)
            if size > token_budget or (max_padding is not None and size - real - n > max_padding * size):
                batches.append(np.asarray(current))
                current, longest, real = [], 0, 0
        current.append(int(idx))
        longest = max(longest, n)
        real += n
    if current:
        batches.append(np.asarray(current))
    return batches


class ScorerBackend(Protocol):
    """Scores tokenized rows; returns results in the order given."""

    name: str

    def score(self, rows: list[TokenizedRow], progress: Callable[[int], None] | None = None) -> ScoreBatchResult: ...


class TransformersScorer:
    """The fused scorer on transformers (CPU or GPU)."""

    name = "transformers"

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


def make_backend(cfg: ScoreConfig) -> tuple[ScorerBackend, Any]:
    """Pick the scorer from the hardware: vLLM when installed and a GPU is present, else transformers."""
    from ads_core import models

    choice = cfg.backend
    if choice == "auto":
        choice = "vllm" if _vllm_usable() else "transformers"
    if choice == "vllm":
        from ads_core.score_vllm import VLLMScorer

        scorer = VLLMScorer(models.resolve_model(cfg.model), cfg)
        return scorer, scorer.tokenizer
    if choice != "transformers":
        raise ValueError(f"unknown scoring backend {cfg.backend!r} (auto, transformers, vllm)")
    loaded = models.load_causal_lm(cfg.model, cfg.device, cfg.dtype, cfg.trust_remote_code)
    return TransformersScorer(loaded.model, cfg), loaded.tokenizer


def _vllm_usable() -> bool:
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        return False
    import torch

    return torch.cuda.is_available()


# ---------------------------------------------------------------------------------------------
# shard and merge stages

SCORES_SCHEMA_FIELDS = ["sample_id", "embedding", "difficulty", "n_tokens", "n_target_tokens", "truncated",
                        "nll_target"]


def shard_bounds(n_rows: int, num_shards: int, index: int) -> tuple[int, int]:
    return index * n_rows // num_shards, (index + 1) * n_rows // num_shards


def shard_dir(out_uri: str, index: int, num_shards: int) -> str:
    return storage.join(out_uri, "scores", "shards", f"shard-{index:05d}-of-{num_shards:05d}")


def _inputs_table(formatted_uri: str) -> pa.Table:
    table = storage.read_parquet(formatted_uri, columns=["sample_id", "extra_info"])
    info = table.column("extra_info").combine_chunks()
    return pa.table({
        "sample_id": table.column("sample_id"),
        "question": info.field("question"),
        "solution": info.field("solution"),
        "answer": info.field("answer"),
    })


def score_shard(formatted_uri: str, out_uri: str, index: int, cfg: ScoreConfig,
                progress: Callable[[int], None] | None = None,
                scorer: tuple[ScorerBackend, Any] | None = None) -> mf.Manifest:
    """Score rows [start, end) of shard `index` of `cfg.num_shards`; writes scores.parquet + manifest."""
    table = _inputs_table(formatted_uri)
    start, end = shard_bounds(table.num_rows, cfg.num_shards, index)
    part = table.slice(start, end - start).to_pylist()
    backend, tokenizer = scorer or make_backend(cfg)
    rows = [tokenize_row(tokenizer, r["question"], r["solution"], r["answer"], cfg) for r in part]
    result = backend.score(rows, progress) if rows else None
    hidden = result.embeddings.shape[1] if result else 0
    emb = result.embeddings if result else np.zeros((0, 0), np.float32)
    out = pa.table({
        "sample_id": pa.array([r["sample_id"] for r in part], pa.int64()),
        "embedding": pa.FixedSizeListArray.from_arrays(pa.array(emb.reshape(-1), pa.float32()), hidden)
        if result else pa.array([], pa.list_(pa.float32(), 0)),
        "difficulty": pa.array(result.difficulty if result else [], pa.float64()),
        "n_tokens": pa.array(result.n_tokens if result else [], pa.int32()),
        "n_target_tokens": pa.array(result.n_target_tokens if result else [], pa.int32()),
        "truncated": pa.array([r.truncated for r in rows], pa.bool_()),
        "nll_target": pa.array([r.nll_target for r in rows], pa.string()),
    })
    directory = shard_dir(out_uri, index, cfg.num_shards)
    uri = storage.join(directory, "scores.parquet")
    storage.write_parquet(uri, out)
    manifest = mf.Manifest(
        stage=STAGE_SHARD,
        inputs={"formatted": mf.input_entry(formatted_uri)},
        outputs={"scores": mf.output_entry(uri, out.num_rows)},
        config={**mf.config_dict(cfg), "shard_index": index, "row_start": start, "row_end": end},
        code_version=mf.code_version(sys.modules[__name__]),
        counts={"rows": out.num_rows, "truncated": int(sum(r.truncated for r in rows)),
                "nll_on_answer": int(sum(r.nll_target == "answer" for r in rows))},
        extra={"backend": backend.name, "hidden_size": hidden, **(result.stats if result else {})},
    )
    mf.write(directory, manifest)
    return manifest


def merge_scores(formatted_uri: str, shard_uris: list[str], out_uri: str) -> mf.Manifest:
    """Concatenate shard scores in formatted-row order; every sample_id must appear exactly once."""
    import pyarrow.compute as pc

    tables = [storage.read_parquet(u) for u in shard_uris]
    merged = pa.concat_tables(tables) if tables else None
    expected = storage.read_parquet(formatted_uri, columns=["sample_id"]).column("sample_id")
    if merged is None or merged.num_rows != len(expected):
        got = 0 if merged is None else merged.num_rows
        raise MergeError(f"score shards hold {got} rows, the formatted table {len(expected)}")
    ids = merged.column("sample_id")
    if pc.count_distinct(ids).as_py() != merged.num_rows:
        raise MergeError("a sample_id appears in more than one score shard")
    missing = pc.sum(pc.invert(pc.is_in(expected, value_set=ids))).as_py() or 0
    if missing:
        raise MergeError(f"{missing} formatted rows have no score")
    order = pc.index_in(expected, value_set=ids)
    merged = merged.take(order)
    if pc.any(pc.is_nan(merged.column("difficulty"))).as_py():
        raise MergeError("a difficulty is NaN; the model produced non-finite values")
    directory = storage.join(out_uri, "scores")
    uri = storage.join(directory, "scores.parquet")
    storage.write_parquet(uri, merged)
    manifest = mf.Manifest(
        stage=STAGE_MERGE,
        inputs={"formatted": mf.input_entry(formatted_uri),
                **{f"shard_{i}": mf.input_entry(u) for i, u in enumerate(shard_uris)}},
        outputs={"scores": mf.output_entry(uri, merged.num_rows)},
        config={"num_shards": len(shard_uris)},
        code_version=mf.code_version(sys.modules[__name__]),
        counts={"rows": merged.num_rows, "truncated": int(pc.sum(merged.column("truncated")).as_py() or 0)},
    )
    mf.write(directory, manifest)
    return manifest


class MergeError(Exception):
    """Shards do not cover the formatted rows exactly once."""


def embeddings_matrix(table: pa.Table) -> np.ndarray:
    """[n, hidden] float32 view of a scores table's fixed-size-list embedding column (no copy)."""
    col = table.column("embedding").combine_chunks()
    width = col.type.list_size
    return col.values.to_numpy(zero_copy_only=False).reshape(-1, width)
