"""Library side of `ads train` and the `ads-train` flow: check an artifact, plan a verl run, launch it.

Nothing here imports Prefect; verl is imported only to compose and validate the config.

    plan = plan_training(TrainRequest(artifact_uri="ads-out/final/train.parquet"))
    print(plan.config_yaml, plan.command_line)      # what --dry-run shows
    check_launch_environment(plan)                  # fails at once without CUDA GPUs
    launch(plan, on_line=print)                     # subprocess, or `ray job submit`

A run directory (default ``./ads-runs/<experiment>``) holds checkpoints, the metrics JSONL and staged
copies of remote inputs. The experiment name is stable (dataset name), so running the same command again
resumes from the last checkpoint (verl's ``trainer.resume_mode=auto``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ads_core import eval_sets as ev
from ads_core import storage
from ads_core.sampler import ADSSampler, ADSSamplerConfig

ENTRY_MODULE = "ads_core.integrations.verl.main"
SAMPLER_KEYS = tuple(ADSSamplerConfig.__dataclass_fields__) + ("cluster_metrics_interval", "strict_ids")
DECONTAMINATE_MODES = ("off", "report", "drop")

# top-level column -> what it must be (checked on the parquet schema, before verl sees the file)
REQUIRED_COLUMNS: dict[str, str] = {
    "data_source": "string",
    "prompt": "list of {role, content} messages",
    "reward_model": "struct with ground_truth",
    "extra_info": "struct with sample_id (and index, cluster_id)",
    "sample_id": "int64 row id",
    "cluster_id": "integer cluster label",
    "rank_in_cluster": "easy-to-hard rank inside the cluster",
}
EXTRA_INFO_FIELDS = ("sample_id", "index", "cluster_id")


class ArtifactError(ValueError):
    """The training artifact can't be trained on (missing columns, bad values): fix the data."""


class LaunchError(RuntimeError):
    """This machine can't launch training (no CUDA GPUs, no rollout engine, verl failed)."""


# ---------------------------------------------------------------------------------------------
# the artifact


@dataclass
class ArtifactInfo:
    uri: str
    rows: int
    clusters: int
    cluster_size_min: int
    cluster_size_median: float
    cluster_size_max: int
    manifest: dict[str, Any] | None
    out_root: str | None  # OUT when the artifact is OUT/final/train.parquet

    @property
    def policy_model(self) -> str | None:
        return ((self.manifest or {}).get("extra") or {}).get("policy_model")

    @property
    def dataset(self) -> str | None:
        return ((self.manifest or {}).get("extra") or {}).get("dataset")


def _parent(uri: str) -> str:
    return uri.rstrip("/").rsplit("/", 1)[0] if "/" in uri.rstrip("/") else "."


def read_manifest(artifact_uri: str) -> dict[str, Any] | None:
    """The ``manifest.json`` next to the artifact (OUT/final/manifest.json), if any."""
    uri = storage.join(_parent(artifact_uri), "manifest.json")
    try:
        return storage.read_json(uri) if storage.exists(uri) else None
    except (OSError, ValueError):
        return None


def _struct_fields(typ: pa.DataType) -> set[str]:
    return {typ.field(i).name for i in range(typ.num_fields)} if pa.types.is_struct(typ) else set()


def check_schema(schema: pa.Schema, uri: str) -> None:
    """Raise ArtifactError naming every column that is missing or has the wrong shape."""
    problems = []
    names = set(schema.names)
    for col, what in REQUIRED_COLUMNS.items():
        if col not in names:
            problems.append(f"missing column {col!r} ({what})")
    if "prompt" in names:
        typ = schema.field("prompt").type
        ok = (pa.types.is_list(typ) or pa.types.is_large_list(typ)) and {"role", "content"} <= _struct_fields(
            typ.value_type)
        if not ok:
            problems.append(f"column 'prompt' must be a list of {{role, content}} messages, got {typ}")
    if "reward_model" in names and "ground_truth" not in _struct_fields(schema.field("reward_model").type):
        problems.append("column 'reward_model' must be a struct with a 'ground_truth' field")
    if "extra_info" in names:
        fields = _struct_fields(schema.field("extra_info").type)
        missing = [f for f in EXTRA_INFO_FIELDS if f not in fields]
        if missing:
            problems.append(f"extra_info lacks {missing}: the row identity reaches verl's batch only through "
                            f"extra_info (rebuild with `ads build`)")
    for col in ("sample_id", "cluster_id"):
        if col in names and not pa.types.is_integer(schema.field(col).type):
            problems.append(f"column {col!r} must be an integer, got {schema.field(col).type}")
    if "rank_in_cluster" in names:
        typ = schema.field("rank_in_cluster").type
        if not (pa.types.is_integer(typ) or pa.types.is_floating(typ)):
            problems.append(f"column 'rank_in_cluster' must be numeric, got {typ}")
    if problems:
        raise ArtifactError(f"{uri} is not an ADS training artifact (verl GRPO schema + sampler columns):\n  - "
                            + "\n  - ".join(problems))


def validate_artifact(uri: str, sampler_cfg: ADSSamplerConfig | None = None) -> ArtifactInfo:
    """Check the schema, the sampler columns and the row ids; build the sampler once as the final check."""
    import pyarrow.parquet as pq

    if not uri.endswith(".parquet"):
        raise ArtifactError(f"{uri}: verl reads the training set from a .parquet file (OUT/final/train.parquet)")
    if not storage.exists(uri):
        raise ArtifactError(f"{uri}: no such file (build one with `ads build --out OUT`)")
    fs, path = storage.get_fs(uri)
    with fs.open(path, "rb") as f:
        pf = pq.ParquetFile(f)
        check_schema(pf.schema_arrow, uri)
        cols = pf.read(columns=["sample_id", "cluster_id", "rank_in_cluster", "extra_info"])
    rows = cols.num_rows
    if rows == 0:
        raise ArtifactError(f"{uri}: the artifact has no rows")
    for col in ("sample_id", "cluster_id", "rank_in_cluster"):
        nulls = cols.column(col).null_count
        if nulls:
            raise ArtifactError(f"{uri}: column {col!r} has {nulls} null values")
    sid = cols.column("sample_id").to_numpy()
    uniq, counts = np.unique(sid, return_counts=True)
    if (counts > 1).any():
        raise ArtifactError(f"{uri}: sample_id is not unique ({int((counts > 1).sum())} repeated ids, e.g. "
                            f"{int(uniq[counts > 1][0])}); the sampler maps rollouts to rows by it")
    info = cols.column("extra_info").combine_chunks()
    inner = info.field("sample_id").to_numpy(zero_copy_only=False)
    if not np.array_equal(inner, sid):
        raise ArtifactError(f"{uri}: extra_info.sample_id differs from sample_id")
    inner_cid = info.field("cluster_id").to_numpy(zero_copy_only=False)
    cid = cols.column("cluster_id").to_numpy()
    if not np.array_equal(inner_cid.astype(np.int64), cid.astype(np.int64)):
        raise ArtifactError(f"{uri}: extra_info.cluster_id differs from cluster_id")
    try:
        sampler = ADSSampler(cid, cols.column("rank_in_cluster").to_numpy(), sampler_cfg or ADSSamplerConfig())
    except ValueError as exc:
        raise ArtifactError(f"{uri}: the ADS sampler rejects the cluster columns: {exc}") from None
    sizes = sampler.sizes
    out_root = _parent(_parent(uri)) if _parent(uri).rstrip("/").endswith("/final") else None
    return ArtifactInfo(uri=uri, rows=rows, clusters=int(sampler.n_clusters), cluster_size_min=int(sizes.min()),
                        cluster_size_median=float(np.median(sizes)), cluster_size_max=int(sizes.max()),
                        manifest=read_manifest(uri), out_root=out_root)


# ---------------------------------------------------------------------------------------------
# the plan


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

    def summary(self) -> dict[str, Any]:
        a = self.artifact
        return {
            "artifact": a.uri, "rows": a.rows, "clusters": a.clusters,
            "cluster_sizes": f"{a.cluster_size_min} / {a.cluster_size_median:g} / {a.cluster_size_max}",
            "model": self.model, "experiment": self.experiment, "batch_size": self.sampler_config.batch_size,
            "steps_per_epoch": max(1, a.rows // self.sampler_config.batch_size),
            "train_file": self.train_file, "val_files": self.val_files, "run_dir": self.run_dir,
            "mode": self.mode, "warnings": self.warnings,
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
        raise ValueError(f"unknown sampler settings {unknown}; known: {', '.join(SAMPLER_KEYS)}")
    known = {k: v for k, v in values.items() if k in ADSSamplerConfig.__dataclass_fields__}
    return ADSSamplerConfig(**known)


def _launch_mode(address: str | None) -> str:
    if not address:
        return "local"
    return "ray-job" if address.startswith(("http://", "https://")) else "cluster"


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
            raise ArtifactError(f"eval set {item!r} not found{f' at {uri}' if uri else ''}; write it with "
                                f"`ads eval-sets --out OUT` or pass a .parquet path")
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
        raise ValueError(f"decontaminate must be one of {DECONTAMINATE_MODES}, got {req.decontaminate!r}")
    for name in ("n_gpus_per_node", "nnodes"):
        if int(getattr(req, name)) < 1:
            raise ValueError(f"{name} must be >= 1")
    cfg = sampler_config_from(req.sampler)
    info = validate_artifact(req.artifact_uri, cfg)
    model = req.model or info.policy_model
    if not model:
        raise ArtifactError(f"no model given and {_parent(req.artifact_uri)}/manifest.json records no "
                            f"extra.policy_model; pass --model")
    if _looks_like_path(model) and not os.path.exists(os.path.expanduser(model.removeprefix("file://"))):
        raise ArtifactError(f"model {model!r} does not exist on this machine; pass --model (a local directory "
                            f"or a hub id)")
    mode = _launch_mode(req.ray_address)
    experiment = _slug(req.experiment_name or f"{info.dataset or 'dataset'}-ads")
    run_dir = Path(req.run_dir or os.path.join("ads-runs", experiment)).expanduser().resolve()
    warnings: list[str] = []
    if info.clusters < cfg.active_clusters:
        warnings.append(f"{info.clusters} clusters < active_clusters={cfg.active_clusters}: some clusters are "
                        f"drawn twice per batch")
    if info.cluster_size_min < cfg.mini_cluster_size:
        warnings.append(f"smallest cluster has {info.cluster_size_min} rows < mini_cluster_size="
                        f"{cfg.mini_cluster_size}: its rows repeat within a batch")
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
        report = ev.decontaminate(req.artifact_uri, evals, drop_to=drop_to if materialize else None)
        decon = report.to_dict()
        if report.contaminated:
            verb = "dropped" if drop else "kept (pass decontaminate=drop to remove them)"
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
        command = [ray_bin, "job", "submit", "--address", str(req.ray_address), "--runtime-env-json", runtime_env,
                   "--", "python", *entry]
    else:
        command = [sys.executable, *entry]
    plan = TrainPlan(request=req, artifact=info, sampler_config=cfg, model=model, experiment=experiment,
                     train_file=train_file,
                     val_files=val_files, run_dir=str(run_dir), metrics_file=metrics_file, overrides=overrides,
                     command=command, env=env, mode=mode, warnings=warnings, decontamination=decon)
    if resolve_config:
        plan.config_yaml = resolve_config_yaml(overrides)
    return plan


def resolve_config_yaml(overrides: Sequence[str]) -> str:
    """Compose the entry point's config with these overrides, apply the ADS rules and verl's validation."""
    import contextlib
    import io
    import warnings as _warnings

    from ads_core.integrations.verl import config as vc

    try:
        with _warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            _warnings.simplefilter("ignore")
            cfg = vc.resolve(overrides)
    except vc.ConfigError:
        raise
    except AssertionError as exc:  # verl's validate_config reports with asserts
        raise vc.ConfigError(f"verl rejected the config: {exc}") from None
    return vc.to_yaml(cfg)


# ---------------------------------------------------------------------------------------------
# launching


def cuda_gpu_count() -> int:
    try:
        import torch
    except ImportError:
        return 0
    try:
        return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0
    except Exception:  # noqa: BLE001 - a broken driver counts as no GPU
        return 0


def check_cuda(n_gpus_per_node: int) -> int:
    """Raise LaunchError unless this machine has at least ``n_gpus_per_node`` CUDA GPUs."""
    found = cuda_gpu_count()
    if found == 0:
        import torch

        build = f"torch {torch.__version__}" + ("" if torch.version.cuda else " (a CPU-only build)")
        raise LaunchError(
            f"training needs CUDA GPUs, and this machine has none visible to {build}. "
            "Use --dry-run (dry_run=True) to check the artifact and the verl config here, run on a GPU machine, "
            "or pass a Ray address (http://head:8265) to submit the job to a GPU cluster.")
    if found < n_gpus_per_node:
        raise LaunchError(f"n_gpus_per_node={n_gpus_per_node} but only {found} CUDA GPU(s) are visible here; "
                          f"lower --gpus or check CUDA_VISIBLE_DEVICES")
    return found


def check_launch_environment(req: TrainRequest) -> None:
    """Fail fast, before any config work or Ray start, when this machine can't run the training."""
    if _launch_mode(req.ray_address) == "ray-job":
        if not (shutil.which("ray") or Path(sys.executable).with_name("ray").exists()):
            raise LaunchError("`ray` CLI not found: install ray to submit jobs")
        return
    if _launch_mode(req.ray_address) != "local":
        return  # the driver joins a cluster: GPUs and the rollout engine are the cluster's
    check_cuda(int(req.n_gpus_per_node))
    engine = "vllm"
    for item in req.overrides:
        if item.lstrip("+").startswith("actor_rollout_ref.rollout.name="):
            engine = item.split("=", 1)[1].strip("'\"")
    if engine in ("vllm", "sglang") and importlib.util.find_spec(engine) is None:
        raise LaunchError(f"the rollout engine {engine!r} is not installed in this environment "
                          f"(install the `gpu` extra, or set actor_rollout_ref.rollout.name)")


def launch(plan: TrainPlan, on_line: Callable[[str], None] | None = None) -> int:
    """Run the plan's command, passing each output line to ``on_line`` (default: inherit stdout)."""
    Path(plan.run_dir).mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **plan.env}
    if on_line is None:
        return subprocess.run(plan.command, env=env, check=False).returncode
    proc = subprocess.Popen(plan.command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            bufsize=1, errors="replace")
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            on_line(line.rstrip("\n"))
    finally:
        proc.stdout.close()
    return proc.wait()


_CONSOLE_STEP = re.compile(r"^step:(\d+) - ")


def parse_console_metrics(line: str) -> dict[str, float] | None:
    """verl's console logger line ``step:N - key:value - ...`` as a dict, else None."""
    m = _CONSOLE_STEP.match(line.strip())
    if not m:
        return None
    out: dict[str, float] = {"step": float(m.group(1))}
    for part in line.strip().split(" - ")[1:]:
        key, _, value = part.rpartition(":")
        try:
            out[key] = float(value)
        except ValueError:
            continue
    return out


def final_metrics(plan: TrainPlan, console_lines: Sequence[str] = ()) -> dict[str, float]:
    """The last training step's metrics: from the metrics JSONL, else from console lines."""
    path = Path(plan.metrics_file)
    last: dict[str, float] | None = None
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            data = {k: float(v) for k, v in rec.get("data", {}).items() if isinstance(v, int | float)}
            last = {"step": float(rec.get("step", 0)), **data}
    if last is None:
        for line in console_lines:
            parsed = parse_console_metrics(line)
            if parsed is not None:
                last = parsed
    return last or {}


HEADLINE_PREFIXES = ("ads/", "val-core/", "critic/score/mean", "critic/rewards/mean", "response_length/mean",
                     "actor/entropy", "actor/pg_loss", "timing_s/step", "training/global_step", "step")


def headline(metrics: Mapping[str, float]) -> dict[str, float]:
    """The metrics worth a table: summaries, not per-cluster series."""
    return {k: v for k, v in metrics.items()
            if k.startswith(HEADLINE_PREFIXES) and not (k.startswith("ads/") and k.count("/") > 1)}
