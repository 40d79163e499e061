"""``ADSRayPPOTrainer``: verl's v0 ``RayPPOTrainer`` plus three small overrides, nothing copied from ``fit``.

* ``_update_actor(batch)``: ``fit`` calls it with the complete step batch (``uid``, ``extra_info``, the
  reward's ``acc``, ``token_level_scores``) *before* ``_save_checkpoint``; we update the sampler first, so
  the checkpoint holds the post-update schedule, and add ``ads/*`` to the metrics ``fit`` reduces and logs.
* ``_save_checkpoint()``: also writes ``global_step_N/ads_sampler.json`` (the schedule, readable JSON).
* ``_load_checkpoint()``: verl 0.9 skips ``data.pt`` when the step is at an epoch boundary; we then
  restore the schedule from ``ads_sampler.json`` (or from ``data.pt`` itself), so no resume loses it.
"""

from __future__ import annotations

import json
import logging
import os
import warnings
from typing import Any

from ads_core.integrations.verl.sampler import ADSVerlSampler

with warnings.catch_warnings():
    warnings.simplefilter("ignore", FutureWarning)
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

log = logging.getLogger("ads.verl")

ADS_STATE_FILE = "ads_sampler.json"


class ADSRayPPOTrainer(RayPPOTrainer):
    """``RayPPOTrainer`` whose train sampler is an ``ADSVerlSampler`` fed back every step."""

    def __init__(self, *args: Any, train_sampler: ADSVerlSampler | None = None, **kwargs: Any) -> None:
        if not isinstance(train_sampler, ADSVerlSampler):
            raise TypeError(f"ADSRayPPOTrainer needs train_sampler=ADSVerlSampler, got {type(train_sampler)}")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # the v0 trainer's deprecation notice
            super().__init__(*args, train_sampler=train_sampler, **kwargs)
        self.ads_sampler = train_sampler
        loader = self.train_dataloader
        if loader.sampler is not train_sampler or loader.batch_size != train_sampler.batch_size:
            raise RuntimeError(
                f"verl built the train dataloader with batch_size={loader.batch_size} and sampler "
                f"{type(loader.sampler).__name__}; the ADS sampler needs batch_size={train_sampler.batch_size}")
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
        folder = self._step_folder(self.global_steps)
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, ADS_STATE_FILE)
        state = {"global_step": int(self.global_steps), "sampler": self.ads_sampler.ads.state_dict()}
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(state, f)
        os.replace(tmp, path)
        super()._save_checkpoint()

    def _resumed_folder(self) -> str:
        trainer = self.config.trainer
        if trainer.resume_mode == "resume_path" and trainer.resume_from_path:
            folder = str(trainer.resume_from_path)
        else:
            folder = self._step_folder(self.global_steps)
        return folder if os.path.isabs(folder) else os.path.join(os.getcwd(), folder)

    def _load_checkpoint(self) -> Any:
        result = super()._load_checkpoint()
        step = int(getattr(self, "global_steps", 0) or 0)
        if step <= 0:
            return result
        folder = self._resumed_folder()
        state = read_sampler_state(folder)
        if state is None:
            log.warning("no ADS sampler state in %s: the schedule starts fresh", folder)
            print(f"[ads] WARNING: no ADS sampler state in {folder}; the schedule starts fresh")
            return result
        steps_per_epoch = len(self.train_dataloader)
        if steps_per_epoch > 0 and step % steps_per_epoch == 0:
            # verl skipped data.pt ("epoch boundary"): the schedule would silently restart without this
            self.ads_sampler.restore_schedule(state)
            print(f"[ads] restored the ADS schedule of step {step} (epoch boundary) from {folder}")
        else:
            # verl queued data.pt (same state, plus the position in the epoch); apply the schedule now too
            self.ads_sampler.ads.load_state_dict(state)
            print(f"[ads] restored the ADS schedule of step {step} from {folder}")
        return result


def read_sampler_state(folder: str) -> dict[str, Any] | None:
    """The ADS schedule saved in a checkpoint folder: ``ads_sampler.json``, else the sampler part of ``data.pt``."""
    path = os.path.join(folder, ADS_STATE_FILE)
    if os.path.exists(path):
        with open(path) as f:
            return json.load(f)["sampler"]
    data_pt = os.path.join(folder, "data.pt")
    if os.path.exists(data_pt):
        import torch

        try:
            state = torch.load(data_pt, weights_only=False)
            return _find_ads_state(state)
        except Exception as exc:  # noqa: BLE001 - best effort fallback
            log.warning("could not read the ADS state from %s: %s", data_pt, exc)
    return None


def _find_ads_state(obj: Any, depth: int = 0) -> dict[str, Any] | None:
    """Search a torchdata loader state for our sampler's ``state_dict`` (layout differs across versions)."""
    if depth > 6:
        return None
    if isinstance(obj, dict):
        if obj.get("kind") == "ADSVerlSampler" and "ads" in obj:
            return obj["ads"]
        for value in obj.values():
            found = _find_ads_state(value, depth + 1)
            if found is not None:
                return found
    return None
