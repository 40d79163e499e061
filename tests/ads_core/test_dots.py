"""DOTS's parts without a trainer: the predictor learns a planted difficulty structure (and beats raw embeddings on
it), the selection rule concentrates near the target, the sampler's rounds and state, the replay buffer."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ads_core.common.errors import InputError
from ads_core.sampler.dots import predictor as dp
from ads_core.sampler.dots.options import DotsSamplerConfig
from ads_core.sampler.dots.sampler import DotsSampler
from ads_core.sampler.dots.selection import draw_without_replacement, select_round
from ads_core.train.trl.replay.buffer import Group, ReplayBuffer


def planted_task(n: int = 240, policies: int = 5, seed: int = 0) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Embeddings whose difficulty lives in 3 small-scale dimensions, drowned by 21 large nuisance ones; each
    policy's success is sigmoid(skill + 3 h) observed through 8 rollouts."""
    rng = np.random.default_rng(seed)
    signal = rng.normal(size=(n, 3))
    nuisance = 4.0 * rng.normal(size=(n, 21))
    z = np.concatenate([0.3 * signal, nuisance], axis=1).astype(np.float32)
    h = signal @ np.array([1.0, -0.7, 0.5]) / 1.3
    labels = {}
    for m, skill in enumerate(np.linspace(-1.0, 1.0, policies)):
        p = 1 / (1 + np.exp(-(skill + 3 * h)))
        labels[f"policy{m}"] = rng.binomial(8, p) / 8.0
    return z, labels


def test_the_predictor_recovers_a_planted_difficulty_structure_raw_embeddings_do_not():
    z, labels = planted_task(n=240)
    held_out = labels.pop("policy2")  # a policy the predictor never saw
    settings = dp.FitSettings(hidden=32, layers=2, dropout=0.0, epochs=20, batch_size=64, reference_size=64, lr=3e-3)
    model = dp.fit(z, labels, settings)
    found = dp.evaluate(model, z, held_out, reference_size=64)
    assert found["rho"] > 0.6, found
    assert found["rho_raw"] < 0.3, found  # the nuisance dimensions dominate the cosine
    assert found["rho"] - found["rho_raw"] > 0.4, found


def test_selection_concentrates_near_half_and_draws_without_replacement():
    rng = np.random.default_rng(0)
    predicted_success = np.linspace(0.0, 1.0, 201)
    batches = select_round(predicted_success, batch_size=10, mu=2, alpha=0.5, tau=1e-2, rng=rng)
    chosen = np.concatenate(batches)
    assert len(batches) == 2 and len(set(chosen.tolist())) == 20
    assert np.abs(1 - predicted_success[chosen] - 0.5).max() <= 0.1  # the 20 rows nearest 0.5 lie within 0.05
    uniform = np.abs(predicted_success - 0.5).mean()
    assert np.abs(predicted_success[chosen] - 0.5).mean() < uniform / 5
    # tau = 1e-3 makes almost every weight underflow; the draw still returns distinct rows, nearest first
    first = draw_without_replacement(-np.abs(predicted_success - 0.5) / 1e-3, 3, np.random.default_rng(1))
    assert first.tolist() == [100, 99, 101] or sorted(first.tolist()) == [99, 100, 101]


def test_the_sampler_runs_a_round_every_mu_steps_on_reference_rollouts_and_restores_exactly():
    z, labels = planted_task(n=120)
    model = dp.fit(z, labels, dp.FitSettings(hidden=16, layers=2, epochs=2, batch_size=64, reference_size=32))
    truth = labels["policy3"]
    cfg = DotsSamplerConfig(batch_size=6, mu=2, reference_size=20, seed=3)
    n = len(z)

    def make() -> DotsSampler:
        rollout = lambda rows, seed: truth[rows]  # noqa: E731  (the trainer's reference rollouts)
        return DotsSampler(
            np.zeros(n, dtype=np.int64), np.arange(n), cfg, predictor=model, embeddings=z, reference_rollouts=rollout
        )

    a, b = make(), make()
    seen = []
    for step in range(5):
        rows = a.next_batch()
        assert len(rows) == 6 and len(set(rows.tolist())) == 6
        a.update(rows, truth[rows])
        seen.append(rows.tolist())
        if step == 2:
            b.load_state_dict(a.state_dict())
    m = a.metrics()
    assert m["dots/round"] == 3 and m["dots/reference_rollouts"] == 20 and -1 <= m["dots/rho"] <= 1
    assert set(m) >= {"dots/effective_share", "dots/reference_seconds", "dots/new_round"}
    b_rows = [b.next_batch().tolist() for _ in range(2)]  # b continues from step 3 exactly as a did
    assert b_rows == seen[3:5]
    # regression: a missing predictor is an option to set, not "the sampler rejects the cluster columns"
    with pytest.raises(InputError, match="dots-train") as missing:
        DotsSampler(np.zeros(n, dtype=np.int64), np.arange(n), DotsSamplerConfig())
    assert missing.value.options == ("sampler.dots.predictor",) and not isinstance(missing.value, ValueError)


def _group(row: int, rewards: list[float], width: int = 3) -> Group:
    g = len(rewards)
    return Group(
        row=row,
        step=1,
        prompt_ids=torch.arange(4) + row,
        completion_ids=torch.full((g, width), row),
        completion_mask=torch.ones(g, width),
        behaviour_logps=torch.full((g, width), -0.5 - row),
        rewards=torch.tensor(rewards, dtype=torch.float32),
        advantages=torch.tensor(rewards, dtype=torch.float32) - torch.tensor(rewards, dtype=torch.float32).mean(),
    )


def test_the_buffer_keeps_mixed_groups_fifo_and_saves_its_draws(tmp_path):
    buf = ReplayBuffer(capacity=3, seed=7)
    assert buf.add([_group(0, [1, 1]), _group(1, [0, 1]), _group(2, [0, 0]), _group(3, [1, 0])]) == 2
    assert buf.add([_group(4, [0, 1]), _group(5, [1, 0])]) == 2
    assert [g.row for g in buf.groups] == [3, 4, 5]  # row 1 evicted first; rows 0 and 2 never kept
    path = str(tmp_path / "buffer.safetensors")
    buf.save(path)
    again = ReplayBuffer(capacity=3, seed=0)
    again.load(path)
    assert [g.row for g in again.sample(2)] == [g.row for g in buf.sample(2)]  # the generator came back too
    assert torch.equal(again.groups[1].behaviour_logps, buf.groups[1].behaviour_logps)
    with pytest.raises(ValueError, match="buffer_size 3"):
        ReplayBuffer(capacity=4, seed=0).load(path)
