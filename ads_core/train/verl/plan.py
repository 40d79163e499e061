"""verl's part of a plan: inputs verl can read, the Hydra overrides, the launch command, the resolved config.

`ads_core.train.run.prepare` calls `plan_verl` on a neutral `TrainPlan`; the result is what `ads train --dry-run`
prints and what `ads_core.train.verl.launch` runs. The sampler is no override: it is the plan's sampler section,
which the launch writes to RUN_DIR/sampler.json (`sampler_file`) and the verl task reads back; an override that
would set it a second way is refused, naming the option that sets it.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ads_core import storage
from ads_core.sampler.kinds import has_extra_rollouts
from ads_core.train.errors import TrainOptionError
from ads_core.train.groups import drops_all_wrong
from ads_core.train.plan import TrainPlan
from ads_core.train.verl import sampler_file as sf
from ads_core.train.verl.config import ENTRY_MODULE
from ads_core.train.verl.valmetrics import first_rows, validation_overrides

_PLAIN = re.compile(r"[A-Za-z0-9_./~@+-]+")
_NOT_A_STRING = re.compile(r"(?i)(true|false|null|none|nan|[-+]?inf|[-+]?[0-9._]+(e[-+]?[0-9]+)?)")


@dataclass
class VerlPlan:
    train_file: str
    val_files: list[str]
    metrics_file: str
    overrides: list[str]
    command: list[str]
    env: dict[str, str]
    mode: str  # local, cluster (driver here, joins a Ray cluster) or ray-job
    run_dir: str
    sampler: sf.RunSampler  # what the launch writes to sampler_file, for the verl task to read
    sampler_file: str
    config_yaml: str = ""
    warnings: list[str] = field(default_factory=list)

    @property
    def command_line(self) -> str:
        return shlex.join(self.command)

    def summary(self) -> dict[str, Any]:
        return {"mode": self.mode, "train_file": self.train_file, "val_files": self.val_files}

    def sampler_text(self) -> str:
        """The sampler file's content as YAML comment lines (the dry run shows it beside the verl config)."""
        lines = self.sampler.to_json().splitlines()
        batch = f"every kind draws the ADS batch, {self.sampler.batch_size} prompts per step, whatever its batch_size"
        head = f"# {self.sampler_file} (the sampler the verl task reads; {batch}):\n"
        return head + "".join(f"# {x}\n" for x in lines)

    def dry_run_text(self) -> str:
        return f"{self.config_yaml}\n{self.sampler_text()}# command:\n# {self.command_line}\n"

    def launch_line(self) -> str:
        return f"launching {self.command_line}"

    def outputs(self, dry_run: bool) -> dict[str, Any]:
        out: dict[str, Any] = {"mode": self.mode, "command": self.command, "sampler_file": self.sampler_file}
        return out | {"config_yaml": self.config_yaml, "sampler": self.sampler.document()} if dry_run else out

    def describe(self) -> str:
        command = f"## Command\n\n```bash\n{self.command_line}\n```\n\n"
        sampler = f"## Sampler (`{self.sampler_file}`, read by the verl task)\n\n"
        sampler += f"```json\n{self.sampler.to_json()}```\n\n"
        return command + sampler + f"## Resolved verl config\n\n```yaml\n{self.config_yaml}```\n"


def hydra_quote(value: Any) -> str:
    """A Hydra override value: numbers and booleans as they are, strings quoted unless plainly safe."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ",".join(hydra_quote(v) for v in value) + "]"
    text = str(value)
    if _PLAIN.fullmatch(text) and not _NOT_A_STRING.fullmatch(text):
        return text
    text = text.replace("\\", "\\\\").replace("'", "\\'")
    return f"'{text}'"


def launch_mode(address: str | None) -> str:
    """local (Ray starts here), ray-job (`ray job submit` to an http:// address) or cluster (join one)."""
    if not address:
        return "local"
    return "ray-job" if address.startswith(("http://", "https://")) else "cluster"


def refuse_second_settings(overrides: Sequence[str]) -> None:
    """Refuse the first override that would set the sampler beside its options (``data.ads_sampler.*``, ...)."""
    for item in overrides:
        refusal = sf.second_setting(item)
        if refusal is not None:
            raise refusal


def _stage(uri: str, dest: Path) -> str:
    """A local copy of a remote file (verl's dataset loader reads local paths and hdfs:// only)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    fs, path = storage.get_fs(uri)
    tmp = dest.with_suffix(dest.suffix + ".part")
    fs.get(path, str(tmp))
    os.replace(tmp, dest)
    return str(dest)


VERL_NO_DROP = (
    "under verl the ADS integration drives verl's v0 loop, whose actor update shards a batch evenly over its "
    "workers, so a batch that shrinks by whole groups is not supported there"
)


def plan_verl(plan: TrainPlan, materialize: bool = True, resolve_config: bool = True) -> VerlPlan:
    """Stage inputs verl can read, build the overrides and the launch command (no GPU needed)."""
    cfg, verl = plan.config, plan.config.verl
    if has_extra_rollouts(plan.sampler.kind):
        raise TrainOptionError(
            f"the {plan.sampler.kind} sampler rolls out extra generation batches per step (DAPO-style dynamic "
            "sampling); in verl that is algorithm.filter_groups, which only its v1 loop has, and the ADS "
            "integration drives the v0 loop: train it with trainer trl, or pick another kind",
            options=("trainer", "kind"),
        )
    refuse_second_settings(verl.overrides)
    mode = launch_mode(verl.ray_address)
    run_dir = Path(plan.run_dir)
    warnings: list[str] = []
    sampler = sf.RunSampler.of(plan.sampler, verl)
    sampler_path = str(run_dir / sf.FILE)
    if mode == "ray-job":
        warnings.append(f"{sampler_path} must be readable at the same path on the cluster's nodes")
    if drops_all_wrong(cfg):
        if cfg.drop_all_wrong == "on":
            raise TrainOptionError(
                f"drop_all_wrong on: {VERL_NO_DROP}; train with trainer trl, or set drop_all_wrong off",
                options=("drop_all_wrong", "trainer"),
            )
        warnings.append(
            f"the {plan.sampler.kind} sampler as published drops all-wrong groups from the gradient batch, but "
            f"{VERL_NO_DROP}: this run trains without that drop (trainer trl has it)"
        )

    # inputs verl can read: local files as they are, remote ones staged (unless a Ray job reads them itself)
    def local(uri: str, name: str) -> str:
        if storage.is_local(uri):
            path = str(storage.local_path(uri).resolve())
            if mode == "ray-job":
                warnings.append(f"{path} must be readable at the same path on the cluster's nodes")
            return path
        if mode == "ray-job":
            warnings.append(f"{uri} is passed to the cluster as is (needs s3fs and credentials on the nodes)")
            return uri
        if not materialize:
            return str(run_dir / "data" / name)
        return _stage(uri, run_dir / "data" / name)

    train_file = local(plan.artifact_uri, "train.parquet")
    if plan.train_uri != plan.artifact_uri:
        train_file = plan.train_uri  # the decontaminated copy in the run folder
    first = cfg.validation.limit  # validation.limit: the first N problems of each set (verl: a copy of them)
    val_files = [
        first_rows(local(uri, f"{name}.parquet"), first, run_dir / "data", materialize)
        for name, uri in plan.eval_uris.items()
    ]
    if not val_files:
        warnings.append("no eval sets: validation is off (write them with `ads eval-sets --out OUT`)")

    metrics_file = str(run_dir / "metrics.jsonl")
    overrides = [
        f"data.train_files={hydra_quote(train_file)}",
        f"actor_rollout_ref.model.path={hydra_quote(plan.model)}",
        f"trainer.n_gpus_per_node={int(verl.n_gpus_per_node)}",
        f"trainer.nnodes={int(verl.nnodes)}",
        f"trainer.experiment_name={hydra_quote(plan.experiment)}",
        f"trainer.default_local_dir={hydra_quote(str(run_dir / 'checkpoints'))}",
        "trainer.logger=[console,file]",
        f"ads.metrics_file={hydra_quote(metrics_file)}",
        f"{sf.HYDRA_KEY}={hydra_quote(sampler_path)}",
        f"hydra.run.dir={hydra_quote(str(run_dir / 'hydra'))}",
    ]
    if val_files:
        overrides.append(f"data.val_files={hydra_quote(val_files)}")
        overrides += validation_overrides(cfg)  # k, sampling, test_freq, val_before_train
    else:
        overrides += ["trainer.val_before_train=false", "trainer.test_freq=-1"]
    overrides.append(f"trainer.total_training_steps={int(cfg.steps)}")
    if mode == "cluster":
        overrides.append(f"ray_kwargs.ray_init.address={hydra_quote(verl.ray_address)}")
    overrides += list(verl.overrides)

    env = {"VERL_FILE_LOGGER_PATH": metrics_file, "PYTHONUNBUFFERED": "1"}
    entry = ["-m", ENTRY_MODULE, *overrides]
    if mode == "ray-job":
        ray_bin = shutil.which("ray") or str(Path(sys.executable).with_name("ray"))
        runtime_env = json.dumps({"env_vars": env})
        submit = [ray_bin, "job", "submit", "--address", str(verl.ray_address), "--runtime-env-json", runtime_env]
        command = [*submit, "--", "python", *entry]
    else:
        command = [sys.executable, *entry]
    part = VerlPlan(
        train_file=train_file,
        val_files=val_files,
        metrics_file=metrics_file,
        overrides=overrides,
        command=command,
        env=env,
        mode=mode,
        run_dir=str(run_dir),
        sampler=sampler,
        sampler_file=sampler_path,
        warnings=warnings,
    )
    if resolve_config:
        part.config_yaml = resolve_config_yaml(overrides, sampler)
    return part


def resolve_config_yaml(overrides: Sequence[str], sampler: sf.RunSampler) -> str:
    """Compose the entry point's config with these overrides, apply the ADS rules (with the run's SAMPLER, which
    the launch writes to the file the config names) and verl's validation."""
    import contextlib
    import io
    import warnings as _warnings

    from ads_core.train.verl import config as vc

    try:
        with _warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            _warnings.simplefilter("ignore")
            cfg = vc.resolve(overrides, run=sampler)
    except vc.ConfigError:
        raise
    except AssertionError as exc:  # verl's validate_config reports with asserts
        raise vc.ConfigError(f"verl rejected the config: {exc}") from None
    return vc.to_yaml(cfg)
