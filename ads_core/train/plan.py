"""The trainer-neutral half of a training run: check the artifact, pick the trainer, name the run, find the eval
sets, check for contamination. `ads_core.train.run.prepare` adds the chosen trainer's part (verl's overrides and
command, TRL's batch layout; `ads_core.train.trainers`) and `ads_core.train.run.train` runs it.

    plan = plan_training("ads-out/gsm8k_sample/final/train.parquet", TrainConfig(steps=4))
    plan.trainer, plan.run_dir, plan.prompts_per_step

A run folder (default ``./ads-runs/<experiment>``) holds checkpoints, the per-step log and staged copies of
remote inputs. The default experiment name says what the run is (DATASET-SAMPLER, and -TRAINER for a GPU trainer)
and is stable, so the same command again resumes.
Nothing here imports Prefect or a trainer's library.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ads_core import models, storage
from ads_core.common.errors import render_options
from ads_core.evaluation.sets import catalog as ev
from ads_core.evaluation.sets import decontam
from ads_core.evaluation.sets.writer import write_eval_sets
from ads_core.train.artifact import ArtifactError, ArtifactInfo, validate_artifact
from ads_core.train.artifact import parent as _parent
from ads_core.train.options import TrainConfig, TrainSamplerConfig
from ads_core.train.trainers import TrainerPart, choose_trainer, sampler_config

WARNING_OPTIONS = ("decontaminate", "eval_sets")  # options plan warnings may name (see TrainPlan.warnings_for)


@dataclass
class TrainPlan:
    artifact_uri: str
    config: TrainConfig
    trainer: str  # a registered trainer's name (auto resolved)
    trainer_reason: str
    artifact: ArtifactInfo
    sampler: TrainSamplerConfig  # with the ADS knobs this trainer uses (its ads_defaults)
    model: str
    experiment: str
    run_dir: str
    train_uri: str  # the artifact, or its decontaminated copy in the run folder
    eval_uris: dict[str, str]
    warnings: list[str] = field(default_factory=list)
    decontamination: dict[str, Any] | None = None
    part: TrainerPart | None = None
    notes: list[str] = field(default_factory=list)  # what the user should know (the training set is an eval set)

    @property
    def prompts_per_step(self) -> int:
        return self.sampler.ads.batch_size

    def warnings_for(self, spell: Callable[[str], str]) -> list[str]:
        """The warnings with the options they name spelled for one interface (``--decontaminate``)."""
        return [render_options(w, WARNING_OPTIONS, spell) for w in self.warnings]

    def summary(self) -> dict[str, Any]:
        a = self.artifact
        out = {
            "artifact": a.uri,
            "trainer": f"{self.trainer} ({self.trainer_reason})",
            "sampler": self.sampler.kind,
            "rows": a.rows,
            "clusters": a.clusters,
            "cluster_sizes": f"{a.cluster_size_min} / {a.cluster_size_median:g} / {a.cluster_size_max}",
            "model": self.model,
            "experiment": self.experiment,
            "steps": self.config.steps,
            "prompts_per_step": self.prompts_per_step,
            "steps_per_epoch": max(1, a.rows // self.prompts_per_step),
            "run_dir": self.run_dir,
        }
        if self.part is not None:
            out.update(self.part.summary())
        out["warnings"] = self.warnings
        return out


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "run"


def packaged_eval_set(name: str, info: ArtifactInfo, folder: str | None) -> str:
    """FOLDER/eval/NAME.parquet: a packaged set (math500, aime24, amc23) written with the training set's template,
    once per run folder; a dry run (FOLDER None) writes it to a temporary folder removed at exit."""
    if folder is None:
        import atexit
        import shutil
        import tempfile

        folder = tempfile.mkdtemp(prefix="ads-eval-sets-")
        atexit.register(shutil.rmtree, folder, True)
    uri = ev.eval_uri(folder, name)
    if not storage.exists(uri):
        template = ev.training_template(info.out_root) if info.out_root else None
        write_eval_sets(folder, names=[name], template=template)
    return uri


def _raw_eval_file(item: str) -> tuple[str, str] | None:
    """(name, path) of an eval set given as a raw file (JSONL, CSV, ...) or NAME=PATH; None for anything else."""
    from ads_core.evaluation.sets.problems import set_name

    path = item.split("=", 1)[1] if "=" in item and not os.path.exists(item) else item
    if path.endswith(".parquet") and "=" not in item:
        return None
    if "=" not in item and not os.path.isfile(path):
        return None
    if not storage.exists(path):
        raise ArtifactError(f"eval set {item}: no such file {path}", options=("eval_sets",))
    return set_name(item), path


def raw_eval_set(name: str, path: str, info: ArtifactInfo, folder: str | None) -> str:
    """FOLDER/eval/NAME.parquet: a raw eval file formatted with the training set's template (as `ads eval` does)."""
    if path.endswith(".parquet") and storage.exists(path):
        return path
    if folder is None:
        import atexit
        import shutil
        import tempfile

        folder = tempfile.mkdtemp(prefix="ads-eval-sets-")
        atexit.register(shutil.rmtree, folder, True)
    template = ev.training_template(info.out_root) if info.out_root else None
    return write_eval_sets(folder, sources={name: path}, names=[], template=template)[name].uri


def resolve_eval_sets(
    eval_sets: list[str] | None, info: ArtifactInfo, packaged_to: str | None = None
) -> dict[str, str]:
    """name -> URI of the validation sets: every set in OUT/eval by default, or the names / .parquet paths given;
    a packaged set's name that OUT/eval lacks is written to PACKAGED_TO/eval (the run folder's data)."""
    if eval_sets is None:
        return ev.existing_eval_sets(info.out_root) if info.out_root else {}
    out: dict[str, str] = {}
    for item in eval_sets:
        raw = _raw_eval_file(item)
        if raw is not None:  # what `ads eval --set` takes: a raw file, or NAME=PATH
            out[raw[0]] = raw_eval_set(raw[0], raw[1], info, packaged_to)
            continue
        if item.endswith(".parquet"):
            if not storage.exists(item):
                raise ArtifactError(f"eval set {item}: no such file", options=("eval_sets",))
            out[_slug(item.rstrip("/").rsplit("/", 1)[-1][: -len(".parquet")])] = item
            continue
        uri = ev.eval_uri(info.out_root, item) if info.out_root else None
        if (uri is None or not storage.exists(uri)) and ev.is_named(item):
            uri = packaged_eval_set(item, info, packaged_to)
        if uri is None or not storage.exists(uri):
            raise ArtifactError(
                f"eval set {item!r} not found{f' at {uri}' if uri else ''}; write it with "
                f"`ads eval-sets --out OUT` or pass a .parquet path",
                options=("eval_sets",),
            )
        out[item] = uri
    return out


def _looks_like_path(model: str) -> bool:
    """A local path rather than a hub id (``org/name``)."""
    return model.startswith(("/", "./", "../", "~", "file://"))


def resolve_model(requested: str | None, info: ArtifactInfo, artifact_uri: str) -> str:
    """The policy to train: the one given, else the one the difficulties were scored with (the manifest)."""
    if requested and models.preset_of(requested) is not None:  # a built-in name: its cached folder (built once)
        return models.resolve_model(requested)
    model = requested or info.policy_model
    if not model:
        raise ArtifactError(
            f"no policy to train: {_parent(artifact_uri)}/manifest.json records no "
            f"extra.policy_model; pass model (a local directory or a hub id)",
            options=("model",),
        )
    if _looks_like_path(model) and not os.path.exists(os.path.expanduser(model.removeprefix("file://"))):
        raise ArtifactError(
            f"the policy {model!r} does not exist on this machine; pass model (a local directory or a hub id)",
            options=("model",),
        )
    return model


def size_warnings(info: ArtifactInfo, sampler: TrainSamplerConfig) -> list[str]:
    ads, warnings = sampler.ads, []
    if sampler.kind == "ads" and info.clusters < ads.active_clusters:
        warnings.append(
            f"{info.clusters} clusters < active_clusters={ads.active_clusters}: some clusters are drawn twice per batch"
        )
    if sampler.kind == "ads" and info.cluster_size_min < ads.mini_cluster_size:
        warnings.append(
            f"smallest cluster has {info.cluster_size_min} rows < mini_cluster_size="
            f"{ads.mini_cluster_size}: its rows repeat within a batch"
        )
    if info.rows < ads.batch_size:
        warnings.append(f"{info.rows} rows < batch size {ads.batch_size}: rows repeat within a batch")
    return warnings


def eval_set_notes(info: ArtifactInfo, decon: dict[str, Any] | None) -> list[str]:
    """A note for each eval set the training set is: from this run's decontamination against its eval sets, and
    from the build's own check (OUT/report/decontamination.json), which sees the packaged sets even when OUT/eval
    has none (a MATH-500 build: MATH-500 is the packaged math500 set)."""
    found = decontam.same_as_eval(decon) if decon else []
    if info.out_root:
        report = storage.join(info.out_root, "report", "decontamination.json")
        try:
            found += decontam.same_as_eval(storage.read_json(report)) if storage.exists(report) else []
        except (OSError, ValueError):  # an unreadable report: the build's own summary said it already
            pass
    return [
        f"{sentence} (the build's and this run's decontamination checks): validation on it measures recall of "
        "the training problems, not learning; validate on another set (eval_sets)"
        for sentence in dict.fromkeys(found)
    ]


def default_name(dataset: str | None, sampler_kind: str, trainer: Any) -> str:
    """DATASET-SAMPLER, plus -TRAINER unless it is the fallback trainer (priority 0, TRL): a uniform baseline and
    an ADS run of one dataset get two run folders, so neither resumes the other."""
    name = f"{dataset or 'dataset'}-{sampler_kind}"
    return name if int(getattr(trainer, "priority", 0)) <= 0 else f"{name}-{trainer.name}"


def plan_training(artifact_uri: str, cfg: TrainConfig, materialize: bool = True) -> TrainPlan:
    """Validate the artifact and the options, pick the trainer, name the run, check for contamination.

    ``materialize=False`` (dry runs) writes nothing: a ``drop`` decontamination only reports, and the plan
    shows the paths a real run would use.
    """
    trainer, reason = choose_trainer(cfg)
    sampler = sampler_config(cfg, trainer)
    info = validate_artifact(artifact_uri, sampler)
    model = resolve_model(cfg.model, info, artifact_uri)
    experiment = _slug(cfg.name or default_name(info.dataset, sampler.kind, trainer))
    run_dir = Path(cfg.run_dir or os.path.join("ads-runs", experiment)).expanduser().resolve()
    blocker = next((p for p in (run_dir, *run_dir.parents) if p.exists()), None)
    if blocker is not None and not blocker.is_dir():
        raise ArtifactError(
            f"run folder {run_dir}: {blocker} is a file, not a folder; pass run_dir (a folder) or another name",
            options=("run_dir", "name"),
        )
    warnings = size_warnings(info, sampler)
    evals = resolve_eval_sets(cfg.eval_sets, info, str(run_dir / "data") if materialize else None)
    train_uri, decon = artifact_uri, None
    if evals and cfg.decontaminate != "off":
        drop_to = str(run_dir / "data" / "train.decontaminated.parquet") if cfg.decontaminate == "drop" else None
        report = decontam.decontaminate(artifact_uri, evals, drop_to=drop_to if materialize else None)
        decon = report.to_dict()
        if report.contaminated:
            verb = "dropped" if drop_to else "kept (set decontaminate to drop to remove them)"
            warnings.append(f"{report.contaminated} training rows match eval questions {report.matches}: {verb}")
        if drop_to:
            train_uri = drop_to
    if materialize:  # the prompt is part of the measurement: `ads eval RUN` evaluates with the run's template
        from ads_core.evaluation.sets.templates import record_run_template

        run_dir.mkdir(parents=True, exist_ok=True)
        record_run_template(str(run_dir), artifact_uri)
    return TrainPlan(
        artifact_uri=artifact_uri,
        config=cfg,
        trainer=trainer.name,
        trainer_reason=reason,
        artifact=info,
        sampler=sampler,
        model=model,
        experiment=experiment,
        run_dir=str(run_dir),
        train_uri=train_uri,
        eval_uris=evals,
        warnings=warnings,
        decontamination=decon,
        notes=eval_set_notes(info, decon),
    )
