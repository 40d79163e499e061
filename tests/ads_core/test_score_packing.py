"""Packed batches (rows end to end, position ids restarting per row) score exactly like padded ones."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from ads_core.config.build import ScoreConfig
from ads_core.stages.score import scorer as scorer_api
from ads_core.stages.score import stage as score
from ads_core.stages.score.scorer import tokenize_row
from ads_core.stages.score.transformers_scorer import TransformersScorer


@pytest.fixture(scope="module")
def toks(formatted: str, tiny_model_dir: Path):
    rows = score._inputs_table(formatted).to_pylist()
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    cfg = ScoreConfig(max_length=384)
    return [tokenize_row(tokenizer, r["question"], r["solution"], r["answer"], cfg) for r in rows]


@pytest.fixture(scope="module")
def lm(tiny_model_dir: Path):
    return AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()


def test_plan_packs_covers_every_row_once_within_the_limits():
    lengths = [5, 100, 7, 60, 60, 3, 99, 1, 300, 40]
    batches = scorer_api.plan_packs(lengths, token_budget=256, pack_len=128)
    packs = [list(p) for b in batches for p in b]
    assert sorted(i for p in packs for i in p) == list(range(len(lengths)))
    for pack in packs:  # a row longer than the pack length gets a pack of its own
        assert len(pack) == 1 or sum(lengths[i] for i in pack) <= 128
    for batch in batches:
        assert len(batch) == 1 or max(sum(lengths[i] for i in p) for p in batch) * len(batch) <= 256
    assert len(packs) < len(lengths)  # short rows really share packs


@pytest.mark.parametrize("text_mode", ["question_plus_solution", "question_only"])
def test_packed_scores_equal_padded_scores(lm, toks, text_mode):
    """SDPA on CPU: restarting position ids and no attention mask give a block-diagonal causal mask, so no row
    sees another; a leak across rows would move the embeddings and NLLs far beyond these tolerances."""
    base = {"max_length": 384, "token_budget": 1024, "text_mode": text_mode}
    pool = (lambda r: r.prompt_len) if text_mode == "question_only" else (lambda r: len(r.input_ids))
    rows = [scorer_api.TokenizedRow(r.input_ids, r.prompt_len, pool(r), r.truncated, r.nll_target) for r in toks]
    padded_scorer = TransformersScorer(lm, ScoreConfig(**base, packing="off"))
    packed_scorer = TransformersScorer(lm, ScoreConfig(**base, packing="on"))
    assert not padded_scorer.packing and packed_scorer.packing
    padded, packed = padded_scorer.score(rows), packed_scorer.score(rows)
    np.testing.assert_allclose(packed.embeddings, padded.embeddings, atol=1e-4)
    np.testing.assert_allclose(packed.difficulty, padded.difficulty, atol=1e-4)
    assert (packed.n_target_tokens == padded.n_target_tokens).all()
    # against padded batches filled to the same budget (no max_padding cut), packing wastes fewer tokens
    full = TransformersScorer(lm, ScoreConfig(**base, packing="off", max_padding=None)).score(rows)
    assert packed.stats["padding_fraction"] < full.stats["padding_fraction"]
    np.testing.assert_allclose(full.difficulty, padded.difficulty, atol=1e-4)


def test_packing_without_restarting_positions_would_leak(lm, toks):
    """The control: the same packs fed as one plain sequence (positions 0..N) give different numbers, so the
    equality above is the mask's doing, not an accident of the model. (transformers detects packed rows only
    without a KV cache: the scorer passes use_cache=False.)"""
    first, second = toks[0], toks[1]
    ids = torch.tensor([first.input_ids + second.input_ids])
    with torch.inference_mode():
        alone = lm.base_model(input_ids=torch.tensor([second.input_ids])).last_hidden_state[0]
        n = len(first.input_ids)
        restart = torch.cat([torch.arange(n), torch.arange(len(second.input_ids))]).unsqueeze(0)
        packed = lm.base_model(input_ids=ids, position_ids=restart, use_cache=False).last_hidden_state[0, n:]
        plain = lm.base_model(input_ids=ids, use_cache=False).last_hidden_state[0, n:]
    torch.testing.assert_close(packed, alone, atol=1e-4, rtol=1e-4)
    assert (plain - alone).abs().max() > 1e-2


def test_auto_packs_only_under_varlen_attention(lm):
    assert lm.config._attn_implementation == "sdpa"
    assert not TransformersScorer(lm, ScoreConfig(packing="auto")).packing
    assert TransformersScorer(lm, ScoreConfig(packing="on")).packing
