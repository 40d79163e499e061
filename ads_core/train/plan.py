"""Library side of `ads train` and the `ads-train` flow: plan a verl run on a checked artifact.

Nothing here imports Prefect; verl is imported only to compose and validate the config. The artifact
contract lives in `ads_core.artifact`, launching in `ads_core.train_launch`; both are re-exported here.

    req = TrainRequest(artifact_uri="ads-out/final/train.parquet")
    check_launch_environment(req)                   # fails at once without CUDA GPUs
    plan = plan_training(req)
    print(plan.config_yaml, plan.command_line)      # what --dry-run shows
    launch(plan, on_line=print)                     # subprocess, or `ray job submit`

A run directory (default ``./ads-runs/<experiment>``) holds checkpoints, the metrics JSONL and staged
copies of remote inputs. The experiment name is stable (dataset name), so running the same command again
resumes from the last checkpoint (verl's ``trainer.resume_mode=auto``).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ads_core import storage
from ads_core.config.sampler import ADSSamplerConfig
from ads_core.core.errors import OptionError, render_options
from ads_core.evals import decontam
from ads_core.evals import sets as ev
from ads_core.train.artifact import (
    ArtifactError,
    ArtifactInfo,
    validate_artifact,
)
from ads_core.train.artifact import parent as _parent
from ads_core.train.launch import (
    launch_mode,
)

ENTRY_MODULE = "ads_core.train.verl.main"
SAMPLER_KEYS = tuple(ADSSamplerConfig.model_fields) + ("cluster_metrics_interval", "strict_ids")
DECONTAMINATE_MODES = ("off", "report", "drop")
WARNING_OPTIONS = ("decontaminate",)  # options plan warnings may name (see TrainPlan.warnings_for)


class TrainOptionError(OptionError, ValueError):
    """A training option is out of range or unknown; the message names it by its request field."""


@dataclass
class TrainRequest:
    artifact_uri: str
    model: str | None = None  # default: the policy the difficulties were scored with (manifest)
    n_gpus_per_node: int = 1
    nnodes: int = 1
    ray_address: str | None = None  # http://head:8265 -> `ray job submit`; auto / ray://... -> join a cluster
    sampler: Mapping[str, Any] = field(default_factory=dict)  # data.ads_sampler.* values
    eval_sets: Sequence[str] | None = None  # names under OUT/eval or parquet paths; None = all in OUT/eval
    overrides: Sequence[str] = ()  # extra Hydra overrides for verl, applied last
    run_dir: str | None = None  # default ./ads-runs/<experiment>
    experiment_name: str | None = None  # default <dataset>-ads
    total_training_steps: int | None = None
    decontaminate: str = "report"  # off, report (log matches) or drop (train without them)


@dataclass
class TrainPlan:
    request: TrainRequest
    artifact: ArtifactInfo
    sampler_config: ADSSamplerConfig
    model: str
    experiment: str
    train_file: str
    val_files: list[str]
    run_dir: str
    metrics_file: str
    overrides: list[str]
    command: list[str]
    env: dict[str, str]
    mode: str  # local, cluster (driver here, joins a Ray cluster) or ray-job
    config_yaml: str = ""
    warnings: list[str] = field(default_factory=list)
    decontamination: dict[str, Any] | None = None

    @property
    def command_line(self) -> str:
        return shlex.join(self.command)

    def warnings_for(self, spell: Callable[[str], str]) -> list[str]:
        """The warnings with the options they name spelled for one interface (``--decontaminate``)."""
        return [render_options(w, WARNING_OPTIONS, spell) for w in self.warnings]

    def summary(self) -> dict[str, Any]:
        a = self.artifact
        return {
            "artifact": a.uri,
            "rows": a.rows,
            "clusters": a.clusters,
            "cluster_sizes": f"{a.cluster_size_min} / {a.cluster_size_median:g} / {a.cluster_size_max}",
            "model": self.model,
            "experiment": self.experiment,
            "batch_size": self.sampler_config.batch_size,
            "steps_per_epoch": max(1, a.rows // self.sampler_config.batch_size),
            "train_file": self.train_file,
            "val_files": self.val_files,
            "run_dir": self.run_dir,
            "mode": self.mode,
            "warnings": self.warnings,
        }


_PLAIN = re.compile(r"[A-Za-z0-9_./~@+-]+")
_NOT_A_STRING = re.compile(r"(?i)(true|false|null|none|nan|[-+]?inf|[-+]?[0-9._]+(e[-+]?[0-9]+)?)")


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


def sampler_config_from(values: Mapping[str, Any]) -> ADSSamplerConfig:
    unknown = sorted(set(values) - set(SAMPLER_KEYS))
    if unknown:
        raise TrainOptionError(
            f"unknown sampler settings {unknown}; known: {', '.join(SAMPLER_KEYS)}", options=("sampler",)
        )
    known = {k: v for k, v in values.items() if k in ADSSamplerConfig.model_fields}
    return ADSSamplerConfig(**known)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "run"


def _stage(uri: str, dest: Path) -> str:
    """A local copy of a remote file (verl's dataset loader reads local paths and hdfs:// only)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    fs, path = storage.get_fs(uri)
    tmp = dest.with_suffix(dest.suffix + ".part")
    fs.get(path, str(tmp))
    os.replace(tmp, dest)
    return str(dest)


def _resolve_eval(req: TrainRequest, info: ArtifactInfo) -> dict[str, str]:
    """name -> URI of the validation sets."""
    if req.eval_sets is None:
        return ev.existing_eval_sets(info.out_root) if info.out_root else {}
    out: dict[str, str] = {}
    for item in req.eval_sets:
        if item.endswith(".parquet"):
            if not storage.exists(item):
                raise ArtifactError(f"eval set {item}: no such file")
            out[_slug(item.rstrip("/").rsplit("/", 1)[-1][: -len(".parquet")])] = item
            continue
        uri = ev.eval_uri(info.out_root, item) if info.out_root else None
        if uri is None or not storage.exists(uri):
            raise ArtifactError(
                f"eval set {item!r} not found{f' at {uri}' if uri else ''}; write it with "
                f"`ads eval-sets --out OUT` or pass a .parquet path"
            )
        out[item] = uri
    return out


def _looks_like_path(model: str) -> bool:
    """A local path rather than a hub id (``org/name``)."""
    return model.startswith(("/", "./", "../", "~", "file://"))


def plan_training(req: TrainRequest, resolve_config: bool = True, materialize: bool = True) -> TrainPlan:
    """Validate everything and build the verl overrides and launch command (no GPU needed).

    ``materialize=False`` (dry runs) writes nothing: remote inputs are not staged and a ``drop``
    decontamination only reports; the plan shows the paths a real run would use.
    """
    if req.decontaminate not in DECONTAMINATE_MODES:
        raise TrainOptionError(
            f"decontaminate must be one of {DECONTAMINATE_MODES}, got {req.decontaminate!r}", options=("decontaminate",)
        )
    for name in ("n_gpus_per_node", "nnodes"):
        if int(getattr(req, name)) < 1:
            raise TrainOptionError(f"{name} must be >= 1, got {getattr(req, name)}", options=(name,))
    cfg = sampler_config_from(req.sampler)
    info = validate_artifact(req.artifact_uri, cfg)
    model = req.model or info.policy_model
    if not model:
        raise ArtifactError(
            f"no policy to train: {_parent(req.artifact_uri)}/manifest.json records no "
            f"extra.policy_model; pass model (a local directory or a hub id)",
            options=("model",),
        )
    if _looks_like_path(model) and not os.path.exists(os.path.expanduser(model.removeprefix("file://"))):
        raise ArtifactError(
            f"the policy {model!r} does not exist on this machine; pass model (a local directory or a hub id)",
            options=("model",),
        )
    mode = launch_mode(req.ray_address)
    experiment = _slug(req.experiment_name or f"{info.dataset or 'dataset'}-ads")
    run_dir = Path(req.run_dir or os.path.join("ads-runs", experiment)).expanduser().resolve()
    warnings: list[str] = []
    if info.clusters < cfg.active_clusters:
        warnings.append(
            f"{info.clusters} clusters < active_clusters={cfg.active_clusters}: some clusters are drawn twice per batch"
        )
    if info.cluster_size_min < cfg.mini_cluster_size:
        warnings.append(
            f"smallest cluster has {info.cluster_size_min} rows < mini_cluster_size="
            f"{cfg.mini_cluster_size}: its rows repeat within a batch"
        )
    if info.rows < cfg.batch_size:
        warnings.append(f"{info.rows} rows < batch size {cfg.batch_size}: rows repeat within a batch")

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

    evals = _resolve_eval(req, info)
    train_file = local(req.artifact_uri, "train.parquet")
    val_files = [local(uri, f"{name}.parquet") for name, uri in evals.items()]
    decon = None
    if evals and req.decontaminate != "off":
        drop = req.decontaminate == "drop"
        drop_to = str(run_dir / "data" / "train.decontaminated.parquet") if drop else None
        report = decontam.decontaminate(req.artifact_uri, evals, drop_to=drop_to if materialize else None)
        decon = report.to_dict()
        if report.contaminated:
            verb = "dropped" if drop else "kept (set decontaminate to drop to remove them)"
            warnings.append(f"{report.contaminated} training rows match eval questions {report.matches}: {verb}")
        if drop_to:
            train_file = drop_to
    if not evals:
        warnings.append("no eval sets: validation is off (write them with `ads eval-sets --out OUT`)")

    metrics_file = str(run_dir / "metrics.jsonl")
    overrides = [
        f"data.train_files={hydra_quote(train_file)}",
        f"actor_rollout_ref.model.path={hydra_quote(model)}",
        f"trainer.n_gpus_per_node={int(req.n_gpus_per_node)}",
        f"trainer.nnodes={int(req.nnodes)}",
        f"trainer.experiment_name={hydra_quote(experiment)}",
        f"trainer.default_local_dir={hydra_quote(str(run_dir / 'checkpoints'))}",
        "trainer.logger=[console,file]",
        f"ads.metrics_file={hydra_quote(metrics_file)}",
        f"hydra.run.dir={hydra_quote(str(run_dir / 'hydra'))}",
    ]
    if val_files:
        overrides.append(f"data.val_files={hydra_quote(val_files)}")
    else:
        overrides += ["trainer.val_before_train=false", "trainer.test_freq=-1"]
    for key, value in req.sampler.items():
        overrides.append(f"data.ads_sampler.{key}={hydra_quote(value)}")
    if req.total_training_steps is not None:
        overrides.append(f"trainer.total_training_steps={int(req.total_training_steps)}")
    if mode == "cluster":
        overrides.append(f"ray_kwargs.ray_init.address={hydra_quote(req.ray_address)}")
    overrides += list(req.overrides)

    env = {"VERL_FILE_LOGGER_PATH": metrics_file, "PYTHONUNBUFFERED": "1"}
    entry = ["-m", ENTRY_MODULE, *overrides]
    if mode == "ray-job":
        ray_bin = shutil.which("ray") or str(Path(sys.executable).with_name("ray"))
        runtime_env = json.dumps({"env_vars": env})
        command = [
            ray_bin,
            "job",
            "submit",
            "--address",
            str(req.ray_address),
            "--runtime-env-json",
            runtime_env,
            "--",
            "python",
            *entry,
        ]
    else:
        command = [sys.executable, *entry]
    plan = TrainPlan(
        request=req,
        artifact=info,
        sampler_config=cfg,
        model=model,
        experiment=experiment,
        train_file=train_file,
        val_files=val_files,
        run_dir=str(run_dir),
        metrics_file=metrics_file,
        overrides=overrides,
        command=command,
        env=env,
        mode=mode,
        warnings=warnings,
        decontamination=decon,
    )
    if resolve_config:
        plan.config_yaml = resolve_config_yaml(overrides)
    return plan


def resolve_config_yaml(overrides: Sequence[str]) -> str:
    """Compose the entry point's config with these overrides, apply the ADS rules and verl's validation."""
    import contextlib
    import io
    import warnings as _warnings

    from ads_core.train.verl import config as vc

    try:
        with _warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            _warnings.simplefilter("ignore")
            cfg = vc.resolve(overrides)
    except vc.ConfigError:
        raise
    except AssertionError as exc:  # verl's validate_config reports with asserts
        raise vc.ConfigError(f"verl rejected the config: {exc}") from None
    return vc.to_yaml(cfg)
