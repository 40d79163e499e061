"""The fused scorer equals the two separate passes it replaces, whatever the batching."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import torch
from transformers import AutoModel, AutoModelForCausalLM

from ads_core import storage
from ads_core.config.build import ScoreConfig
from ads_core.stages.score import scorer as scorer_api
from ads_core.stages.score import stage as score
from ads_core.stages.score.scorer import TokenizedRow, tokenize_row
from ads_core.stages.score.transformers_scorer import TransformersScorer


@pytest.fixture(scope="module")
def rows(formatted: str) -> list[dict]:
    return score._inputs_table(formatted).to_pylist()


@pytest.fixture(scope="module")
def lm(tiny_model_dir: Path):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()
    return model


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


def _tokenize(tokenizer, rows: list[dict], cfg: ScoreConfig) -> list[TokenizedRow]:
    return [tokenize_row(tokenizer, r["question"], r["solution"], r["answer"], cfg) for r in rows]


def _separate_passes(tiny_model_dir: Path, lm, toks: list[TokenizedRow]) -> tuple[np.ndarray, np.ndarray]:
    """The reference's way: AutoModel mean pool, then a per-sample full-logits NLL."""
    base = AutoModel.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()
    embs, nlls = [], []
    with torch.inference_mode():
        for t in toks:
            ids = torch.tensor([t.input_ids])
            hidden = base(input_ids=ids).last_hidden_state[0, : t.pool_len]
            embs.append(hidden.mean(0).numpy())
            logits = lm(input_ids=ids).logits[0]
            nlls.append(torch.nn.functional.cross_entropy(logits[t.prompt_len - 1 : -1], ids[0, t.prompt_len :]).item())
    return np.stack(embs), np.array(nlls)


def _cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


@pytest.mark.parametrize("text_mode", ["question_plus_solution", "question_only"])
def test_fused_scorer_equals_separate_passes(tiny_model_dir, lm, tokenizer, rows, text_mode):
    cfg = ScoreConfig(model=str(tiny_model_dir), text_mode=text_mode, max_length=384, token_budget=4096)
    toks = _tokenize(tokenizer, rows, cfg)
    fused = TransformersScorer(lm, cfg).score(toks)
    ref_emb, ref_nll = _separate_passes(tiny_model_dir, lm, toks)
    assert _cosine(fused.embeddings, ref_emb).min() >= 0.99999
    np.testing.assert_allclose(fused.embeddings, ref_emb, atol=1e-4)
    np.testing.assert_allclose(fused.difficulty, ref_nll, atol=1e-4)
    assert (fused.n_target_tokens == [len(t.input_ids) - t.prompt_len for t in toks]).all()


def shard_uri(out, index: int, num_shards: int) -> str:
    from ads_core.stages.base import outputs_under

    return outputs_under(str(out), score.SCORE, index, num_shards)["score_shard"]


def scores_uri(out) -> str:
    return str(Path(out) / "scores" / "scores.parquet")


def test_padding_and_batch_order_do_not_change_results(tiny_model_dir, lm, tokenizer, rows):
    cfg = ScoreConfig(model=str(tiny_model_dir), max_length=384, token_budget=4096)
    toks = _tokenize(tokenizer, rows, cfg)
    one_big = TransformersScorer(lm, ScoreConfig(max_length=384, token_budget=10**7, max_padding=None)).score(toks)
    tiny_batches = TransformersScorer(lm, ScoreConfig(max_length=384, token_budget=400)).score(toks)
    perm = list(range(len(toks)))
    random.Random(0).shuffle(perm)
    shuffled = TransformersScorer(lm, cfg).score([toks[i] for i in perm])
    inverse = np.argsort(perm)
    ref_emb, ref_nll = _separate_passes(tiny_model_dir, lm, toks)  # unbatched, unpadded reference
    for batched in (tiny_batches, one_big):
        np.testing.assert_allclose(batched.embeddings, ref_emb, atol=1e-4)
        np.testing.assert_allclose(batched.difficulty, ref_nll, atol=1e-4)
    np.testing.assert_allclose(tiny_batches.difficulty, one_big.difficulty, atol=1e-5)
    np.testing.assert_allclose(shuffled.embeddings[inverse], one_big.embeddings, atol=1e-5)
    np.testing.assert_allclose(shuffled.difficulty[inverse], one_big.difficulty, atol=1e-5)
    assert one_big.stats["padding_fraction"] > tiny_batches.stats["padding_fraction"] - 1e-9


def test_lm_head_chunking_is_exact(tiny_model_dir, lm, tokenizer, rows):
    vocab = lm.get_output_embeddings().weight.shape[0]
    toks = _tokenize(tokenizer, rows[:16], ScoreConfig(max_length=256))
    whole = TransformersScorer(lm, ScoreConfig(logits_chunk_elems=10**9)).score(toks)
    chunked = TransformersScorer(lm, ScoreConfig(logits_chunk_elems=vocab * 3)).score(toks)
    np.testing.assert_allclose(chunked.difficulty, whole.difficulty, atol=1e-6)


def test_rows_without_solution_score_the_answer(tokenizer):
    cfg = ScoreConfig(max_length=64)
    with_solution = tokenize_row(tokenizer, "What is 2+2?", "2+2 = 4, so \\boxed{4}", "4", cfg)
    without = tokenize_row(tokenizer, "What is 2+2?", None, "4", cfg)
    assert with_solution.nll_target == "solution" and without.nll_target == "answer"
    answer_ids = tokenizer("4", add_special_tokens=False)["input_ids"]
    assert without.input_ids[without.prompt_len :] == answer_ids


def test_long_rows_are_truncated_and_flagged_never_infinite(tiny_model_dir, lm, tokenizer):
    cfg = ScoreConfig(max_length=32)
    long_question = "How many apples " * 60 + "?"
    long_solution = "We count the apples one by one. " * 40
    toks = [
        tokenize_row(tokenizer, long_question, "short answer 7", "7", cfg),
        tokenize_row(tokenizer, "Short?", long_solution, "7", cfg),
        tokenize_row(tokenizer, long_question, long_solution, "7", cfg),
    ]
    assert all(t.truncated for t in toks)
    assert all(len(t.input_ids) <= 32 and len(t.input_ids) - t.prompt_len >= 1 for t in toks)
    result = TransformersScorer(lm, cfg).score(toks)
    assert np.isfinite(result.difficulty).all()
    assert not tokenize_row(tokenizer, "Short?", "7", "7", cfg).truncated


def test_plan_batches_respects_budget_and_covers_every_row():
    lengths = [5, 100, 7, 60, 60, 3, 99, 1]
    batches = scorer_api.plan_batches(lengths, token_budget=128)
    covered = sorted(int(i) for b in batches for i in b)
    assert covered == list(range(len(lengths)))
    for b in batches:
        assert len(b) == 1 or max(lengths[i] for i in b) * len(b) <= 128


def test_shards_merge_to_the_single_pass_result(tiny_model_dir, formatted, tmp_path):
    cfg1 = ScoreConfig(model=str(tiny_model_dir), max_length=256, num_shards=1)
    cfg3 = ScoreConfig(model=str(tiny_model_dir), max_length=256, num_shards=3)
    scorer = scorer_api.make_backend(cfg1)
    one = score.score_shard(formatted, shard_uri(tmp_path / "a", 0, cfg1.num_shards), 0, cfg1, scorer=scorer)
    merged_one = score.merge_scores(formatted, [one.output_uri("scores")], scores_uri(tmp_path / "a"))
    shard_uris = [
        score.score_shard(formatted, shard_uri(tmp_path / "b", i, cfg3.num_shards), i, cfg3, scorer=scorer).output_uri(
            "scores"
        )
        for i in range(3)
    ]
    merged_three = score.merge_scores(formatted, shard_uris[::-1], scores_uri(tmp_path / "b"))
    a = storage.read_parquet(merged_one.output_uri("scores"))
    b = storage.read_parquet(merged_three.output_uri("scores"))
    expected_ids = storage.read_parquet(formatted, columns=["sample_id"]).column("sample_id")
    assert a.column("sample_id").equals(expected_ids) and b.column("sample_id").equals(expected_ids)
    np.testing.assert_allclose(score.embeddings_matrix(a), score.embeddings_matrix(b), atol=1e-5)
    np.testing.assert_allclose(a.column("difficulty").to_numpy(), b.column("difficulty").to_numpy(), atol=1e-5)
    assert a.schema.field("embedding").type == pa.list_(pa.float32(), score.embeddings_matrix(a).shape[1])


def test_merge_rejects_missing_and_duplicate_shards(tiny_model_dir, formatted, tmp_path):
    cfg = ScoreConfig(model=str(tiny_model_dir), max_length=128, num_shards=2)
    scorer = scorer_api.make_backend(cfg)
    uris = [
        score.score_shard(formatted, shard_uri(tmp_path, i, cfg.num_shards), i, cfg, scorer=scorer).output_uri("scores")
        for i in range(2)
    ]
    with pytest.raises(score.MergeError, match="rows"):
        score.merge_scores(formatted, uris[:1], scores_uri(tmp_path))
    with pytest.raises(score.MergeError):
        score.merge_scores(formatted, [uris[0], uris[0]], scores_uri(tmp_path))


def test_config_validation():
    with pytest.raises(ValueError, match="text_mode"):
        ScoreConfig(text_mode="everything")
    with pytest.raises(ValueError, match="num_shards"):
        ScoreConfig(num_shards=0)


def test_vllm_single_pass_math_matches_the_fused_scorer(tiny_model_dir, lm, tokenizer, rows):
    """The vLLM backend's own parts, without vLLM: the LM head read from the safetensors is the model's, and the
    chunked NLL over per-row final hidden states (what token_embed pooling returns) equals the fused scorer's."""
    from ads_core.stages.score.vllm import chunked_nll, lm_head_weight

    weight = lm_head_weight(str(tiny_model_dir))
    torch.testing.assert_close(weight, lm.get_output_embeddings().weight.detach(), atol=0, rtol=0)
    cfg = ScoreConfig(max_length=256)
    toks = _tokenize(tokenizer, rows[:12], cfg)
    fused = TransformersScorer(lm, ScoreConfig(max_length=256, logits_chunk_elems=weight.shape[0] * 7)).score(toks)
    picked, targets, row_idx = [], [], []
    with torch.inference_mode():
        for j, t in enumerate(toks):
            states = lm.base_model(input_ids=torch.tensor([t.input_ids]), use_cache=False).last_hidden_state[0]
            picked.append(states[t.prompt_len - 1 : len(t.input_ids) - 1])
            targets.extend(t.input_ids[t.prompt_len :])
            row_idx.extend([j] * (len(t.input_ids) - t.prompt_len))
        nll, counts = chunked_nll(
            torch.cat(picked), torch.tensor(targets), torch.tensor(row_idx), len(toks), weight, weight.shape[0] * 5
        )
    np.testing.assert_allclose(nll, fused.difficulty, atol=1e-5)
    assert (counts == fused.n_target_tokens).all()


def test_vllm_lm_head_missing_is_a_clear_error(tmp_path):
    from ads_core import models
    from ads_core.stages.score.vllm import lm_head_weight

    (tmp_path / "config.json").write_text('{"tie_word_embeddings": false}')
    with pytest.raises(models.ModelLoadError, match="no LM head weight"):
        lm_head_weight(str(tmp_path))


def test_difficulty_measures_sum_and_answer_only(tiny_model_dir, formatted, tmp_path, lm, tokenizer, rows):
    """nll_sum is the token-mean NLL times the scored tokens; nll_answer is the answer's NLL given the question
    alone, equal to a separate full-logits pass over those tokens; the embedding is the same for every measure."""
    tables = {}
    scorer = None
    for measure in ("nll_mean", "nll_sum", "nll_answer"):
        cfg = ScoreConfig(model=str(tiny_model_dir), max_length=256, difficulty=measure, cache=False, dtype="float32")
        scorer = scorer or scorer_api.make_backend(cfg)
        done = score.score_shard(formatted, shard_uri(tmp_path / measure, 0, 1), 0, cfg, scorer=scorer)
        tables[measure] = storage.read_parquet(done.output_uri("scores"))
    mean, counts = (tables["nll_mean"].column(c).to_numpy() for c in ("difficulty", "n_target_tokens"))
    np.testing.assert_allclose(tables["nll_sum"].column("difficulty").to_numpy(), mean * counts, rtol=1e-9)
    answer_toks = [tokenize_row(tokenizer, r["question"], None, r["answer"], cfg) for r in rows]
    _, expected = _separate_passes(tiny_model_dir, lm, answer_toks[:6])
    got = tables["nll_answer"]
    np.testing.assert_allclose(got.column("difficulty").to_numpy()[:6], expected, atol=1e-4)
    assert got.column("n_target_tokens").to_pylist()[:6] == [len(t.input_ids) - t.prompt_len for t in answer_toks[:6]]
    assert set(got.column("nll_target").to_pylist()) == {"answer"}
    assert not np.allclose(got.column("difficulty").to_numpy(), mean)  # a different measure, not the same numbers
    for measure in ("nll_sum", "nll_answer"):
        np.testing.assert_array_equal(
            score.embeddings_matrix(tables[measure]), score.embeddings_matrix(tables["nll_mean"])
        )
