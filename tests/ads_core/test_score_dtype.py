"""The scoring dtype follows the machine, and the dtype `auto` picks here scores like fp32 within tolerance."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.stats import spearmanr

from ads_core import models
from ads_core.config.build import ScoreConfig
from ads_core.stages.score import cache as score_cache
from ads_core.stages.score import stage as score
from ads_core.stages.score.scorer import tokenize_row
from ads_core.stages.score.transformers_scorer import TransformersScorer
from ads_core.storage import manifest as mf

# Measured on the 47M bench model (AMX CPU): cosine >= 0.99992, max |dNLL| 0.0032, Spearman 0.9998.
MIN_COSINE, MAX_DNLL, MIN_SPEARMAN = 0.9999, 0.01, 0.999


def shard_uri(out, index: int, num_shards: int) -> str:
    from ads_core.stages.base import outputs_under

    return outputs_under(str(out), score.SCORE, index, num_shards)["score_shard"]


def scores_uri(out) -> str:
    return str(Path(out) / "scores" / "scores.parquet")


def test_cpu_flags_are_read_from_cpuinfo(tmp_path: Path):
    info = tmp_path / "cpuinfo"
    info.write_text(
        "processor\t: 0\nmodel name\t: X\nflags\t\t: fpu sse avx2 avx512f amx_bf16 amx_tile\n\n"
        "processor\t: 1\nflags\t\t: fpu\n"
    )
    assert models.cpu_flags(str(info)) == {"fpu", "sse", "avx2", "avx512f", "amx_bf16", "amx_tile"}
    assert models.cpu_flags(str(tmp_path / "missing")) == frozenset()


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ({"avx2", "avx512f", "amx_bf16"}, torch.bfloat16),
        ({"avx2", "avx512f", "avx512_vnni"}, torch.float32),  # AVX512 alone: what get_cpu_capability() reports
        ({"avx2", "fma"}, torch.float32),
        (set(), torch.float32),
    ],
)
def test_auto_dtype_on_cpu_without_measuring(flags, expected):
    """AMX is bf16 and emulated bf16 is fp32 without timing anything; AVX512-BF16 alone is measured
    (tests/ads_core/test_dtype_measured.py)."""
    assert models.pick_dtype("cpu", "auto", frozenset(flags)) == expected


def test_gpu_is_bf16_and_an_explicit_dtype_wins_and_a_bad_one_is_named():
    assert models.pick_dtype("cuda:0", "auto", frozenset()) == torch.bfloat16
    assert models.pick_dtype("cpu", "float32", frozenset({"amx_bf16"})) == torch.float32
    assert models.pick_dtype("cpu", "bfloat16", frozenset({"avx2"})) == torch.bfloat16
    with pytest.raises(ValueError, match="score.dtype.*float64"):
        models.pick_dtype("cpu", "float64")


def test_this_machine_auto_follows_amx_or_the_measurement():
    flags = models.cpu_flags()
    name = models.dtype_name("cpu")
    if "amx_bf16" in flags:
        assert name == "bfloat16"
    elif not flags & {"avx512_bf16", "bf16"}:
        assert name == "float32"
    else:  # measured once per machine and cached: the cached entry is the answer
        from ads_core.models import dtype

        assert name == dtype.measured_choice(dtype.DEFAULT_HIDDEN)["choice"]
    assert models.pick_dtype("cpu") == getattr(torch, name)


def _scores(tiny_model_dir: Path, formatted: str, dtype: str):
    cfg = ScoreConfig(model=str(tiny_model_dir), max_length=384, device="cpu", dtype=dtype)
    scorer, tokenizer = TransformersScorer.load(cfg)
    assert {p.dtype for p in scorer.model.parameters()} == {models.pick_dtype("cpu", dtype, model=str(tiny_model_dir))}
    rows = score._inputs_table(formatted).to_pylist()
    toks = [tokenize_row(tokenizer, r["question"], r["solution"], r["answer"], cfg) for r in rows]
    return scorer.score(toks)


@pytest.mark.parametrize("dtype", ["auto", "bfloat16"])
def test_the_chosen_dtype_scores_like_fp32(tiny_model_dir, formatted, dtype):
    """On whatever machine runs this: auto's dtype (and bf16 always, so the bound is tested everywhere)."""
    ref = _scores(tiny_model_dir, formatted, "float32")
    got = _scores(tiny_model_dir, formatted, dtype)
    a, b = got.embeddings.astype(np.float64), ref.embeddings.astype(np.float64)
    cosine = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    assert cosine.min() >= MIN_COSINE
    assert np.abs(got.difficulty - ref.difficulty).max() <= MAX_DNLL
    assert spearmanr(got.difficulty, ref.difficulty).statistic >= MIN_SPEARMAN
    assert (got.n_target_tokens == ref.n_target_tokens).all()


def test_manifests_record_the_resolved_dtype_and_the_cache_keys_on_it(tiny_model_dir, formatted, tmp_path):
    base = {"model": str(tiny_model_dir), "max_length": 128, "device": "cpu", "cache": False}
    for dtype, out in (("auto", tmp_path / "auto"), ("float32", tmp_path / "f32")):
        cfg = ScoreConfig(**base, dtype=dtype)
        shard = score.score_shard(formatted, shard_uri(out, 0, cfg.num_shards), 0, cfg)
        merged = score.merge_scores(formatted, [shard.output_uri("scores")], scores_uri(out))
        expected = models.dtype_name("cpu", dtype, str(tiny_model_dir))
        assert shard.extra["dtype"] == expected
        assert mf.read(str(out / "scores")).extra["dtype"] == expected == merged.extra["dtype"]
    spaces = {
        d: score_cache.namespace(ScoreConfig(**base, dtype=d), "fp", score.VERSION)
        for d in ("auto", "float32", "bfloat16")
    }
    assert spaces["float32"] != spaces["bfloat16"]
    assert spaces["auto"] == spaces[models.dtype_name("cpu", model=str(tiny_model_dir))]
