"""The ADS sampler inside real verl 0.9 on CPU: RLHFDataset from a real artifact, the train dataloader exactly
as RayPPOTrainer builds it, real DataProto steps through the subclass's update hook, checkpoint round trips.

What is simulated: only the GPU parts of a step (the rollout's token tensors and the actor's worker group).
The batch is assembled with verl's own calls in `fit`'s order (`from_single_dict`, uid, `_get_gen_batch`,
`repeat(interleave=True)`, `union`), rows are shuffled as `_balance_batch` may do, and the reward comes from
our `compute_score`.
"""

from __future__ import annotations

import uuid
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("verl")

from omegaconf import OmegaConf  # noqa: E402
from tensordict import TensorDict  # noqa: E402
from torchdata.stateful_dataloader import StatefulDataLoader  # noqa: E402
from verl import DataProto  # noqa: E402
from verl.trainer.ppo.ray_trainer import Role  # noqa: E402
from verl.trainer.ppo.utils import create_rl_dataset  # noqa: E402
from verl.utils import tensordict_utils as tu  # noqa: E402
from verl.utils.dataset.rl_dataset import collate_fn  # noqa: E402

from ads_core.sampler.ads import ADSSampler
from ads_core.sampler.kinds import build_sampler
from ads_core.train.options import TrainConfig
from ads_core.train.reward import compute_score
from ads_core.train.verl import config as vc
from ads_core.train.verl import sampler_file as sf
from ads_core.train.verl.sampler import ADSVerlSampler, BatchIdentityError, dataset_columns
from ads_core.train.verl.trainer import ADS_STATE_FILE, ADSRayPPOTrainer

N_ROLLOUTS = 4
PROMPT_LEN, RESPONSE_LEN = 6, 5


class FakeActorWorkerGroup:
    """Stands in for the GPU worker group: the only remote calls the hooks reach."""

    def __init__(self) -> None:
        self.updates = 0

    def update_actor(self, batch_td: TensorDict) -> TensorDict:
        assert "input_ids" in batch_td.keys()  # verl converted the batch to no-padding format
        self.updates += 1
        out = TensorDict({}, batch_size=[])
        tu.assign_non_tensor_data(out, "metrics", {"mfu": 0.5, "pg_loss": [0.1, 0.3]})
        return out

    def save_checkpoint(self, *args, **kwargs) -> None:
        pass

    def load_checkpoint(self, *args, **kwargs) -> None:
        pass


def make_config(artifact: Path, model: str, ckpt: Path, *extra: str, verl: dict | None = None, **sampler):
    """verl's config for a run whose sampler file (written beside CKPT, as `ads train` writes RUN_DIR/sampler.json)
    holds TrainConfig's sampler with SAMPLER's changes (2 clusters x 4 rows by default) and VERL's options."""
    sampler = {"ads": {"active_clusters": 2, "mini_cluster_size": 4}} | sampler
    chosen = TrainConfig(trainer="verl", sampler=sampler, verl=verl or {})
    path = ckpt.parent / f"{ckpt.name}-{sf.FILE}"
    sf.write(str(path), sf.RunSampler.of(chosen.sampler, chosen.verl))
    cfg = vc.resolve(
        [
            f"data.train_files={artifact}",
            f"actor_rollout_ref.model.path={model}",
            f"{sf.HYDRA_KEY}={path}",
            "data.filter_overlong_prompts=false",  # no tokenizer on this path; row positions stay the artifact's
            f"actor_rollout_ref.rollout.n={N_ROLLOUTS}",
            "actor_rollout_ref.actor.ppo_mini_batch_size=4",
            f"trainer.default_local_dir={ckpt}",
            *extra,
        ],
        check=False,
    )
    return cfg


def make_trainer(cfg) -> ADSRayPPOTrainer:
    """What ADSTaskRunner.run does, minus tokenizer and workers: verl's dataset, our sampler, our trainer."""
    dataset = create_rl_dataset(
        cfg.data.train_files, cfg.data, None, None, is_train=True, max_samples=cfg.data.get("train_max_samples", -1)
    )
    sampler = ADSVerlSampler.from_dataset(dataset, vc.run_sampler(cfg))  # as ADSTaskRunner.run builds it
    trainer = ADSRayPPOTrainer(
        config=cfg,
        tokenizer=None,
        role_worker_mapping={Role.ActorRollout: object},
        resource_pool_manager=None,
        train_dataset=dataset,
        val_dataset=dataset,
        collate_fn=collate_fn,
        train_sampler=sampler,
    )
    trainer.actor_rollout_wg = FakeActorWorkerGroup()
    trainer.global_steps = 1
    return trainer


def rows_of(batch_dict: dict, sampler: ADSVerlSampler) -> list[int]:
    return [sampler.row_of(e) for e in batch_dict["extra_info"]]


def rollout_step(
    trainer: ADSRayPPOTrainer, batch_dict: dict, rng: np.random.Generator, p_correct: float = 0.5
) -> DataProto:
    """One step's batch as `fit` assembles it, up to `_update_actor`."""
    batch = DataProto.from_single_dict(batch_dict)
    batch.non_tensor_batch["uid"] = np.array([str(uuid.uuid4()) for _ in range(len(batch.batch))], dtype=object)
    gen_batch = trainer._get_gen_batch(batch)
    assert "cluster_id" in gen_batch.non_tensor_batch  # custom columns leave the training batch here
    m = len(batch) * N_ROLLOUTS
    prompts = torch.randint(1, 100, (m, PROMPT_LEN))
    responses = torch.randint(1, 100, (m, RESPONSE_LEN))
    attention = torch.ones(m, PROMPT_LEN + RESPONSE_LEN, dtype=torch.long)
    attention[:, PROMPT_LEN + 3 :] = torch.randint(0, 2, (m, 1)).expand(-1, RESPONSE_LEN - 3)
    gen_output = DataProto.from_dict(
        tensors={
            "prompts": prompts,
            "responses": responses,
            "input_ids": torch.cat([prompts, responses], 1),
            "attention_mask": attention,
            "position_ids": torch.cumsum(attention, 1) - 1,
            "response_mask": attention[:, PROMPT_LEN:],
        }
    )
    batch = batch.repeat(repeat_times=N_ROLLOUTS, interleave=True)
    batch = batch.union(gen_output)
    batch.reorder(torch.from_numpy(rng.permutation(len(batch))))  # _balance_batch may reorder rows
    truths = [rm["ground_truth"] for rm in batch.non_tensor_batch["reward_model"]]
    results = [
        compute_score(src, f"... so the answer is \\boxed{{{gt if rng.random() < p_correct else '-1'}}}", gt)
        for src, gt in zip(batch.non_tensor_batch["data_source"], truths, strict=True)
    ]
    scores = torch.zeros(m, RESPONSE_LEN)
    scores[:, -1] = torch.tensor([r["score"] for r in results])
    batch.batch["token_level_scores"] = scores
    batch.non_tensor_batch.update({k: np.array([r[k] for r in results]) for k in results[0]})
    return batch


def expected_feedback(batch: DataProto, sampler: ADSVerlSampler) -> tuple[np.ndarray, np.ndarray]:
    """Group by uid by hand: each prompt's row and the mean of its rollouts' acc."""
    groups: dict[str, list[float]] = {}
    row_of_uid: dict[str, int] = {}
    for uid, info, acc in zip(
        batch.non_tensor_batch["uid"], batch.non_tensor_batch["extra_info"], batch.non_tensor_batch["acc"], strict=True
    ):
        groups.setdefault(uid, []).append(float(acc))
        row_of_uid[uid] = sampler.row_of(info)
    uids = sorted(groups)
    return (np.array([row_of_uid[u] for u in uids]), np.array([np.mean(groups[u]) for u in uids]))


@pytest.fixture(scope="module", params=["reference", "frontier"])
def cfg(request: pytest.FixtureRequest, final_artifact: Path, policy_model: str, tmp_path_factory):
    """Every loop test runs with both ADS windows (the saved state differs: windows vs band centres)."""
    ads = {"active_clusters": 2, "mini_cluster_size": 4, "window": request.param}
    return make_config(final_artifact, policy_model, tmp_path_factory.mktemp("ckpt"), ads=ads)


def test_the_task_runners_sampler_is_the_run_files(final_artifact: Path, policy_model: str, tmp_path: Path):
    """The adapter ADSTaskRunner builds draws with the file's kind and knobs and takes its two options."""
    adapter = {"strict_ids": False, "cluster_metrics_interval": 3}
    cfg = make_config(
        final_artifact, policy_model, tmp_path / "ckpt", verl=adapter, kind="dots-lite", dots_lite={"target": 0.3}
    )
    sampler = make_trainer(cfg).ads_sampler
    assert (sampler.kind, sampler.batch_size, sampler.sampler.cfg.target) == ("dots-lite", 8, 0.3)
    assert (sampler.strict_ids, sampler.cluster_metrics_interval) == (False, 3)


def test_dataloader_is_built_as_verl_builds_it(cfg):
    trainer = make_trainer(cfg)
    loader, sampler = trainer.train_dataloader, trainer.ads_sampler
    assert isinstance(loader, StatefulDataLoader)
    assert loader.sampler is sampler and loader.batch_size == sampler.batch_size == 8
    assert loader.num_workers == 0 and loader.drop_last
    assert type(loader.batch_sampler).__module__.startswith("torchdata")
    assert len(loader) == sampler.steps_per_epoch == len(trainer.train_dataset) // 8
    assert trainer.total_training_steps == cfg.trainer.total_training_steps
    # the sampler reads the RLHFDataset's rows, in the dataset's order
    cols = dataset_columns(trainer.train_dataset)
    assert len(cols["cluster_id"]) == len(trainer.train_dataset) == 300


def test_steps_drive_the_sampler_through_the_update_hook(cfg):
    trainer = make_trainer(cfg)
    sampler = trainer.ads_sampler
    cols = dataset_columns(trainer.train_dataset)
    reference = ADSSampler(cols["cluster_id"], cols["rank_in_cluster"], vc.run_sampler(cfg).sampler.ads)
    rng = np.random.default_rng(0)
    loader_iter = iter(trainer.train_dataloader)
    for step in range(1, 6):
        batch_dict = next(loader_iter)
        # the batch is exactly the sampler's next draw, made after the previous step's update
        assert rows_of(batch_dict, sampler) == reference.next_batch().tolist()
        batch = rollout_step(trainer, batch_dict, rng)
        assert "cluster_id" not in batch.non_tensor_batch  # identity only survives in extra_info
        trainer.global_steps = step
        output = trainer._update_actor(batch)
        idx, success = expected_feedback(batch, sampler)
        reference.update(idx, success)
        metrics = output.meta_info["metrics"]
        assert metrics["ads/step"] == step and metrics["ads/groups"] == 8 and metrics["ads/unmatched_groups"] == 0
        assert metrics["actor/pg_loss"] == [0.1, 0.3]  # verl's own actor metrics are still there
        assert ("ads/p/0" in metrics) == (step == 1)  # per-cluster series only on snapshot steps
        assert metrics["ads/batch_success_mean"] == pytest.approx(success.mean())
        assert sampler.sampler.state_dict() == reference.state_dict()
    assert trainer.actor_rollout_wg.updates == 5


@pytest.mark.parametrize("kind", ["uniform", "dots-lite"])
def test_a_baseline_trains_through_the_same_hooks_and_resumes(
    kind: str, final_artifact: Path, policy_model: str, tmp_path: Path
):
    """Every kind without extra rollouts per step: the run's sampler file picks it, the adapter feeds it as it feeds
    ADS (the batches are its draws after each update), and a mid-epoch checkpoint resumes at the same batch."""
    ckpt = tmp_path / "ckpt"
    cfg = make_config(final_artifact, policy_model, ckpt, "trainer.resume_mode=auto", kind=kind)
    trainer = make_trainer(cfg)
    sampler = trainer.ads_sampler
    assert sampler.kind == kind and sampler.batch_size == 8
    cols = dataset_columns(trainer.train_dataset)
    section = vc.run_sampler(cfg).sampler
    reference = build_sampler(kind, cols["cluster_id"], cols["rank_in_cluster"], section, 8)
    rng, loader_iter = np.random.default_rng(3), iter(trainer.train_dataloader)
    for step in range(1, 4):
        batch_dict = next(loader_iter)
        assert rows_of(batch_dict, sampler) == reference.next_batch().tolist()
        batch = rollout_step(trainer, batch_dict, rng)
        trainer.global_steps = step
        metrics = trainer._update_actor(batch).meta_info["metrics"]
        reference.update(*expected_feedback(batch, sampler))
        assert any(k.startswith(f"{kind}/") for k in metrics) and metrics["ads/groups"] == 8
    assert sampler.sampler.state_dict() == reference.state_dict()
    trainer._save_checkpoint()
    expected = rows_of(next(loader_iter), sampler)
    resumed = make_trainer(cfg)
    resumed._load_checkpoint()
    assert resumed.global_steps == 3
    assert rows_of(next(iter(resumed.train_dataloader)), resumed.ads_sampler) == expected


def test_dataloader_state_round_trip_gives_the_same_next_batch(cfg, tmp_path: Path):
    trainer = make_trainer(cfg)
    rng = np.random.default_rng(1)
    loader_iter = iter(trainer.train_dataloader)
    for step in range(1, 4):
        trainer.global_steps = step
        trainer._update_actor(rollout_step(trainer, next(loader_iter), rng))
    state_file = tmp_path / "data.pt"
    torch.save(trainer.train_dataloader.state_dict(), state_file)  # what verl writes as data.pt
    expected = rows_of(next(loader_iter), trainer.ads_sampler)

    fresh = make_trainer(cfg)
    fresh.train_dataloader.load_state_dict(torch.load(state_file, weights_only=True))  # no pickle needed
    assert fresh.ads_sampler.sampler.steps == 0  # torchdata applies the state lazily, at iter()
    resumed_iter = iter(fresh.train_dataloader)
    assert rows_of(next(resumed_iter), fresh.ads_sampler) == expected
    assert fresh.ads_sampler.sampler.steps == 3
    # the position in the epoch came back too: the epoch ends after the same number of batches
    assert 1 + sum(1 for _ in resumed_iter) == len(fresh.train_dataloader) - 3


def test_checkpoint_resume_mid_epoch(cfg, tmp_path: Path):
    ckpt = tmp_path / "ckpt"
    cfg = OmegaConf.merge(cfg, {"trainer": {"default_local_dir": str(ckpt), "resume_mode": "auto"}})
    trainer = make_trainer(cfg)
    rng = np.random.default_rng(2)
    loader_iter = iter(trainer.train_dataloader)
    for step in range(1, 3):
        trainer.global_steps = step
        trainer._update_actor(rollout_step(trainer, next(loader_iter), rng))
    trainer._save_checkpoint()  # verl's save (data.pt, tracker file) plus ads_sampler.json
    assert (ckpt / "global_step_2" / "data.pt").exists() and (ckpt / "global_step_2" / ADS_STATE_FILE).exists()
    expected = rows_of(next(loader_iter), trainer.ads_sampler)

    resumed = make_trainer(cfg)
    resumed._load_checkpoint()
    assert resumed.global_steps == 2
    assert rows_of(next(iter(resumed.train_dataloader)), resumed.ads_sampler) == expected


def test_resume_at_an_epoch_boundary_keeps_the_schedule(cfg, tmp_path: Path, capsys: pytest.CaptureFixture):
    ckpt = tmp_path / "ckpt"
    # 24 rows / batch 8 = 3 steps per epoch, so step 3 is an epoch boundary, where verl skips data.pt
    cfg = OmegaConf.merge(
        cfg, {"data": {"train_max_samples": 24}, "trainer": {"default_local_dir": str(ckpt), "resume_mode": "auto"}}
    )
    trainer = make_trainer(cfg)
    assert len(trainer.train_dataloader) == 3
    rng = np.random.default_rng(3)
    for step, batch_dict in enumerate(trainer.train_dataloader, start=1):  # one whole epoch, as fit runs it
        trainer.global_steps = step
        trainer._update_actor(rollout_step(trainer, batch_dict, rng, p_correct=0.9))
        if step == 3:
            trainer._save_checkpoint()
            saved = trainer.ads_sampler.sampler.state_dict()
    expected = rows_of(next(iter(trainer.train_dataloader)), trainer.ads_sampler)  # epoch 2, batch 1

    resumed = make_trainer(cfg)
    resumed._load_checkpoint()
    out = capsys.readouterr().out
    assert "Skipping dataloader state restore" in out  # verl's epoch-boundary skip did happen...
    assert "restored the ADS schedule of step 3 (epoch boundary)" in out  # ...and we restored it anyway
    assert resumed.ads_sampler.sampler.state_dict() == saved
    assert rows_of(next(iter(resumed.train_dataloader)), resumed.ads_sampler) == expected
    assert len(list(iter(resumed.train_dataloader))) == 3  # a full new epoch


def test_epoch_boundary_without_our_restore_would_lose_the_schedule(cfg, tmp_path: Path, capsys: pytest.CaptureFixture):
    """Control for the test above: verl alone (data.pt skipped, no ads_sampler.json) restarts the schedule."""
    ckpt = tmp_path / "ckpt"
    cfg = OmegaConf.merge(
        cfg, {"data": {"train_max_samples": 24}, "trainer": {"default_local_dir": str(ckpt), "resume_mode": "auto"}}
    )
    trainer = make_trainer(cfg)
    rng = np.random.default_rng(3)
    for step, batch_dict in enumerate(trainer.train_dataloader, start=1):
        trainer.global_steps = step
        trainer._update_actor(rollout_step(trainer, batch_dict, rng, p_correct=0.9))
    trainer._save_checkpoint()
    (ckpt / "global_step_3" / ADS_STATE_FILE).unlink()
    (ckpt / "global_step_3" / "data.pt").rename(ckpt / "global_step_3" / "data.pt.bak")
    resumed = make_trainer(cfg)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        resumed._load_checkpoint()
    assert resumed.ads_sampler.sampler.steps == 0  # fresh schedule: this is what the override prevents
    (ckpt / "global_step_3" / "data.pt.bak").rename(ckpt / "global_step_3" / "data.pt")
    capsys.readouterr()
    again = make_trainer(cfg)
    again._load_checkpoint()  # no JSON: data.pt is not unpickled for the schedule, which starts fresh, loudly
    assert again.ads_sampler.sampler.steps == 0
    assert f"WARNING: no {ADS_STATE_FILE} in {ckpt / 'global_step_3'}; the ADS schedule starts fresh" in (
        capsys.readouterr().out
    )


class _WritesMarker:
    """Unpickling this calls open(marker, "w"): a stand-in for a data.pt that runs code."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def craft_data_pt(path: Path, marker: Path) -> None:
    torch.save({"_sampler_iter_state": {"sampler_state": _WritesMarker(marker)}}, path)


def test_a_crafted_data_pt_is_never_unpickled(cfg, tmp_path: Path, capsys: pytest.CaptureFixture):
    from verl.trainer.ppo import ray_trainer

    from ads_core.train.verl.trainer import CheckpointStateError, read_sampler_state

    ckpt = tmp_path / "ckpt"
    marker = tmp_path / "marker"
    # 24 rows / batch 8: step 2 is mid-epoch (verl reads data.pt), step 3 an epoch boundary (it skips it)
    cfg = OmegaConf.merge(
        cfg, {"data": {"train_max_samples": 24}, "trainer": {"default_local_dir": str(ckpt), "resume_mode": "auto"}}
    )
    trainer = make_trainer(cfg)
    rng = np.random.default_rng(6)
    for step, batch_dict in enumerate(trainer.train_dataloader, start=1):
        trainer.global_steps = step
        trainer._update_actor(rollout_step(trainer, batch_dict, rng))
        if step in (2, 3):
            trainer._save_checkpoint()
    boundary, mid = ckpt / "global_step_3", ckpt / "global_step_2"

    # the schedule reader looks at our JSON only
    (boundary / ADS_STATE_FILE).unlink()
    craft_data_pt(boundary / "data.pt", marker)
    assert read_sampler_state(str(boundary)) is None
    assert not marker.exists()
    # a resume at the epoch boundary without our JSON: a warning and a fresh schedule, no unpickling
    capsys.readouterr()
    resumed = make_trainer(cfg)
    resumed._load_checkpoint()
    assert "WARNING: no ads_sampler.json" in capsys.readouterr().out
    assert resumed.ads_sampler.sampler.steps == 0 and not marker.exists()

    # mid-epoch, verl itself loads data.pt: weights-only, so the crafted file is refused with a clear error
    (ckpt / "latest_checkpointed_iteration.txt").write_text("2")
    craft_data_pt(mid / "data.pt", marker)
    with pytest.raises(CheckpointStateError, match=r"data\.pt: holds global \S*open outside the weights-only"):
        make_trainer(cfg)._load_checkpoint()
    assert not marker.exists()
    assert ray_trainer.torch is torch  # verl's module sees the real torch again

    # control: the crafted file does run code when unpickled the old way
    torch.load(mid / "data.pt", weights_only=False)
    assert marker.exists()


def test_a_truncated_or_flipped_sampler_checkpoint_stops_the_resume_in_one_line(
    final_artifact: Path, policy_model: str, tmp_path: Path
):
    from ads_core.sampler.checkpoint import CheckpointStateError, read_checkpoint

    ckpt = tmp_path / "ckpt"
    cfg = make_config(final_artifact, policy_model, ckpt, "trainer.resume_mode=auto")
    trainer = make_trainer(cfg)
    rng, loader_iter = np.random.default_rng(7), iter(trainer.train_dataloader)
    for step in (1, 2):
        trainer.global_steps = step
        trainer._update_actor(rollout_step(trainer, next(loader_iter), rng))
    trainer._save_checkpoint()
    path = ckpt / "global_step_2" / ADS_STATE_FILE
    saved, _ = read_checkpoint(path.parent, 2)  # the one format: kind, step, state, nothing pending
    assert (saved.kind, saved.step, saved.pending) == ("ads", 2, [])
    assert saved.sampler == trainer.ads_sampler.sampler.state_dict()
    good = path.read_bytes()
    flipped = bytearray(good)
    flipped[len(good) // 2] ^= 0x04
    for bad in (good[: len(good) // 2], bytes(flipped)):
        path.write_bytes(bad)
        resumed = make_trainer(cfg)
        with pytest.raises(CheckpointStateError) as info:
            resumed._load_checkpoint()
        text = str(info.value)
        assert text.startswith(f"{path}: bad sampler checkpoint: ") and "\n" not in text, text
        assert "delete" in text and resumed.ads_sampler.sampler.steps == 0  # nothing restored


def test_feedback_falls_back_to_the_sign_of_the_score(cfg):
    trainer = make_trainer(cfg)
    sampler = trainer.ads_sampler
    batch = rollout_step(trainer, next(iter(trainer.train_dataloader)), np.random.default_rng(4))
    with_acc = sampler.feedback(batch)
    batch.non_tensor_batch.pop("acc")
    by_score = sampler.feedback(batch)
    batch.non_tensor_batch.pop("score")
    by_tensor = sampler.feedback(batch)
    assert (with_acc.source, by_score.source, by_tensor.source) == ("acc", "score", "token_level_scores")
    for fb in (by_score, by_tensor):
        np.testing.assert_array_equal(fb.rows, with_acc.rows)
        np.testing.assert_allclose(fb.success, with_acc.success)


def test_feedback_refuses_batches_it_cannot_map(cfg):
    trainer = make_trainer(cfg)
    sampler = trainer.ads_sampler
    batch = rollout_step(trainer, next(iter(trainer.train_dataloader)), np.random.default_rng(5))
    infos = batch.non_tensor_batch["extra_info"]
    wrong_cluster = [dict(e) for e in infos]
    wrong_cluster[0]["cluster_id"] = int(wrong_cluster[0]["cluster_id"]) + 1000
    batch.non_tensor_batch["extra_info"] = np.array(wrong_cluster, dtype=object)
    with pytest.raises(BatchIdentityError, match="cluster"):
        sampler.feedback(batch)
    unknown = [dict(e) for e in infos]
    first_uid = batch.non_tensor_batch["uid"][0]
    for e, uid in zip(unknown, batch.non_tensor_batch["uid"], strict=True):
        if uid == first_uid:
            e["sample_id"] = 12345
    batch.non_tensor_batch["extra_info"] = np.array(unknown, dtype=object)
    with pytest.raises(BatchIdentityError, match="no known row id"):
        sampler.feedback(batch)
    sampler.strict_ids = False
    fb = sampler.feedback(batch)
    assert fb.unmatched == 1 and len(fb.rows) == 7
