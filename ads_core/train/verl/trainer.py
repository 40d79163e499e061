"""``ADSRayPPOTrainer``: verl's v0 ``RayPPOTrainer`` plus three small overrides, nothing copied from ``fit``.

* ``_update_actor(batch)``: ``fit`` calls it with the complete step batch (``uid``, ``extra_info``, the
  reward's ``acc``, ``token_level_scores``) *before* ``_save_checkpoint``; we update the sampler first, so
  the checkpoint holds the post-update schedule, and add ``ads/*`` to the metrics ``fit`` reduces and logs.
* ``_save_checkpoint()``: also writes ``global_step_N/ads_sampler.json`` (the sampler's state in the one sampler
  checkpoint format, ``ads_core.sampler.checkpoint``: readable JSON, checksummed, atomic and fsynced).
* ``_load_checkpoint()``: verl 0.9 skips ``data.pt`` when the step is at an epoch boundary; we then
  restore the schedule from ``ads_sampler.json``, so no resume loses it.

No pickle from checkpoints: we read the schedule only from our JSON, and while verl's own
``_load_checkpoint`` runs, its ``torch.load(data.pt, weights_only=False)`` is made weights-only (plain
containers, numbers, strings and tensors, plus the empty allow-list ``DATA_PT_SAFE_GLOBALS``), so a crafted
``data.pt`` can't run code. A checkpoint without ``ads_sampler.json`` resumes with a warning.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import re
import types
import warnings
from collections.abc import Iterator
from typing import Any

from ads_core.sampler.checkpoint import (
    FILE,
    CheckpointStateError,
    SamplerCheckpoint,
    has_checkpoint,
    read_checkpoint,
    write_checkpoint,
)
from ads_core.sampler.state import SamplerStateError
from ads_core.train.verl.sampler import ADSVerlSampler, loaded_copy

with warnings.catch_warnings():
    warnings.simplefilter("ignore", FutureWarning)
    from verl.trainer.ppo import ray_trainer
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

log = logging.getLogger("ads.verl")

ADS_STATE_FILE = FILE  # the one sampler checkpoint file (ads_core.sampler.checkpoint)
# Classes data.pt may hold beyond torch's weights-only set. torchdata's loader state and our sampler's
# state_dict are plain containers, so none is needed; add one here only if a verl release requires it.
DATA_PT_SAFE_GLOBALS: tuple[Any, ...] = ()


class ADSRayPPOTrainer(RayPPOTrainer):
    """``RayPPOTrainer`` whose train sampler is an ``ADSVerlSampler`` fed back every step."""

    def __init__(self, *args: Any, train_sampler: ADSVerlSampler | None = None, **kwargs: Any) -> None:
        if not isinstance(train_sampler, ADSVerlSampler):
            raise TypeError(f"ADSRayPPOTrainer needs train_sampler=ADSVerlSampler, got {type(train_sampler)}")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # the v0 trainer's deprecation notice
            super().__init__(*args, train_sampler=train_sampler, **kwargs)
        self.ads_sampler = train_sampler
        train_sampler.follow_steps(lambda: int(getattr(self, "global_steps", 0) or 0))  # `fit` draws step N at N
        loader = self.train_dataloader
        if loader.sampler is not train_sampler or loader.batch_size != train_sampler.batch_size:
            raise RuntimeError(
                f"verl built the train dataloader with batch_size={loader.batch_size} and sampler "
                f"{type(loader.sampler).__name__}; the ADS sampler needs batch_size={train_sampler.batch_size}"
            )
        if loader.num_workers != 0:
            raise RuntimeError("data.dataloader_num_workers must be 0 with the ADS sampler")

    # -- the update hook -------------------------------------------------------------------------

    def ads_update(self, batch: Any) -> dict[str, float]:
        """Feed this step's rollouts back to the sampler; returns the ``ads/*`` metrics."""
        return self.ads_sampler.update_from_batch(batch, step=getattr(self, "global_steps", None))

    def _update_actor(self, batch: Any) -> Any:
        metrics = self.ads_update(batch)
        output = super()._update_actor(batch)
        output.meta_info.setdefault("metrics", {}).update(metrics)
        return output

    # -- checkpoints -----------------------------------------------------------------------------

    def _step_folder(self, step: int) -> str:
        return os.path.join(self.config.trainer.default_local_dir, f"global_step_{step}")

    def _save_checkpoint(self) -> None:
        adapter = self.ads_sampler  # verl draws lazily after each update: nothing is drawn but unrewarded
        checkpoint = SamplerCheckpoint(adapter.kind, int(self.global_steps), adapter.sampler.state_dict(), [], {})
        write_checkpoint(self._step_folder(self.global_steps), checkpoint)  # atomic, fsynced
        super()._save_checkpoint()

    def _resumed_folder(self) -> str:
        trainer = self.config.trainer
        if trainer.resume_mode == "resume_path" and trainer.resume_from_path:
            folder = str(trainer.resume_from_path)
        else:
            folder = self._step_folder(self.global_steps)
        return folder if os.path.isabs(folder) else os.path.join(os.getcwd(), folder)

    def _load_checkpoint(self) -> Any:
        with weights_only_data_pt():
            result = super()._load_checkpoint()
        step = int(getattr(self, "global_steps", 0) or 0)
        if step <= 0:
            return result
        folder = self._resumed_folder()
        checkpoint = read_sampler_state(folder, self.ads_sampler)
        steps_per_epoch = len(self.train_dataloader)
        at_boundary = steps_per_epoch > 0 and step % steps_per_epoch == 0
        if checkpoint is None:
            if at_boundary or not os.path.exists(os.path.join(folder, "data.pt")):
                why = "the ADS schedule starts fresh"
            else:
                why = "the ADS schedule comes only from verl's data.pt (read weights-only)"
            log.warning("no %s in %s: %s", ADS_STATE_FILE, folder, why)
            print(f"[ads] WARNING: no {ADS_STATE_FILE} in {folder}; {why}")
            return result
        if at_boundary:
            # verl skipped data.pt ("epoch boundary"): the schedule would silently restart without this
            self.ads_sampler.restore_schedule(checkpoint.sampler)
            print(f"[ads] restored the ADS schedule of step {step} (epoch boundary) from {folder}")
        else:
            # verl queued data.pt (same state, plus the position in the epoch); apply the schedule now too
            self.ads_sampler.load_schedule(checkpoint.sampler)
            print(f"[ads] restored the ADS schedule of step {step} from {folder}")
        return result


def read_sampler_state(folder: str, sampler: ADSVerlSampler | None = None) -> SamplerCheckpoint | None:
    """The sampler checkpoint in a checkpoint folder's ``ads_sampler.json``; None when there is none.

    Never unpickles anything: ``data.pt`` is not read here. The file is untrusted input, read by the one reader
    (``ads_core.sampler.checkpoint``): a bad one is a ``CheckpointStateError`` naming it (and the field). Given
    the ``sampler`` (the adapter) it will be loaded into, the state is checked in full against it (kind,
    artifact, config, every field), without changing it.
    """
    if not has_checkpoint(folder):
        return None
    named = re.fullmatch(r"global_step_(\d+)", os.path.basename(os.path.normpath(folder)))

    def fits(checkpoint: SamplerCheckpoint) -> None:
        assert sampler is not None
        if checkpoint.kind != sampler.kind:
            raise SamplerStateError(
                "['kind']", f"the run was checkpointed with sampler {checkpoint.kind!r}, this one is {sampler.kind!r}"
            )
        if checkpoint.pending:
            raise SamplerStateError("['pending']", "expected none (verl draws each batch after the last update)")
        loaded_copy(sampler.sampler, checkpoint.sampler, "['sampler']")

    fix = f"delete {os.path.join(folder, FILE)} to resume with a fresh sampler state"
    step = int(named.group(1)) if named else None
    return read_checkpoint(folder, step, check=fits if sampler is not None else None, fix=fix)[0]


class _WeightsOnlyTorch(types.ModuleType):
    """``torch`` as verl's trainer module sees it while a checkpoint loads: ``load`` is weights-only."""

    def __init__(self, real: types.ModuleType) -> None:
        super().__init__(real.__name__)
        self._real = real

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def load(self, f: Any, *args: Any, **kwargs: Any) -> Any:
        kwargs["weights_only"] = True
        try:
            with self._real.serialization.safe_globals(list(DATA_PT_SAFE_GLOBALS)):
                return self._real.load(f, *args, **kwargs)
        except pickle.UnpicklingError as exc:
            found = re.search(r"Unsupported global: GLOBAL (\S+)", str(exc))
            what = f"global {found.group(1)}" if found else "an object"
            raise CheckpointStateError(
                f"{f}: holds {what} outside the weights-only allow-list, so it is not unpickled. "
                f"Delete it to resume without the dataloader position (the ADS schedule comes from "
                f"{ADS_STATE_FILE})."
            ) from None


@contextlib.contextmanager
def weights_only_data_pt() -> Iterator[None]:
    """While verl's ``_load_checkpoint`` runs, its ``torch.load`` of ``data.pt`` is weights-only.

    Only the name ``torch`` inside ``verl.trainer.ppo.ray_trainer`` is swapped (the workers load their own
    shards in other processes); it is restored afterwards, also on error.
    """
    real = ray_trainer.torch
    ray_trainer.torch = _WeightsOnlyTorch(real)
    try:
        yield
    finally:
        ray_trainer.torch = real
