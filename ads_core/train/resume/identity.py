"""Exact resume or a refusal: ``RUN_DIR/run.json`` records what fixes the run's trajectory, and a resume whose
options differ is refused in one line listing each difference, unless the user asks for the change
(``allow_change``: ``ads train --allow-change FIELD``, repeatable), which is then recorded in the run.

The trajectory: the policy (``model``) and a fingerprint of its weights, the artifact's content key, the trainer's
section (learning rate and schedule, generations, completion length, seed, loss knobs; not where checkpoints and
logs go), the schedule's horizon, and the sampler's kind and knobs. ``steps`` is never part of it (extending a run
is a resume). The sampler and the artifact can't be changed on a resume (the sampler's saved state depends on
them). ``run.json`` also holds the run's ``run_id``, which every checkpoint manifest repeats.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from pathlib import Path
from typing import Any

from ads_core import storage
from ads_core.train.errors import RunStateError, TrainOptionError

log = logging.getLogger("ads.train")
RUN_FILE = "run.json"
FIXED = ("sampler.", "artifact")  # prefixes no resume may change
NOT_TRAJECTORY = {  # trainer-section fields that change where things go, not the trajectory
    "save_steps",
    "keep_checkpoints",
    "log_completions",
    "report_to",
    "vllm_server_host",
    "vllm_server_port",
    "vllm_gpu_memory_utilization",
    "processes",
}


def _flat(prefix: str, value: Any, out: dict[str, Any]) -> None:
    if isinstance(value, dict):
        for key, inner in value.items():
            _flat(f"{prefix}.{key}", inner, out)
    else:
        out[prefix] = value


def trajectory(plan: Any, horizon: int | None) -> dict[str, Any]:
    """The dotted fields that fix PLAN's trajectory (see the module), JSON values."""
    from ads_core.models.fingerprint import model_fingerprint

    cfg = plan.config
    out: dict[str, Any] = {
        "model": plan.model,
        "model_weights": model_fingerprint(plan.model),
        "artifact": storage.content_hash(plan.train_uri),
    }
    from ads_core.sampler.kinds import kind_spec
    from ads_core.train.options import sampler_knobs, trainer_options
    from ads_core.train.trainers import section_of_trainer

    options, prefix = trainer_options(cfg, plan.trainer), section_of_trainer(plan.trainer)
    if options is not None:
        for name, value in options.model_dump(mode="json").items():
            if name not in NOT_TRAJECTORY:
                out[f"{prefix}.{name}"] = value
    if horizon is not None:
        out[f"{prefix}.schedule_steps"] = horizon
    knobs = sampler_knobs(plan.sampler)
    shown = knobs.model_dump(mode="json") if knobs is not None else {}
    _flat("sampler", {"kind": plan.sampler.kind, kind_spec(plan.sampler.kind).section: shown}, out)
    return out


def read_run(run_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """RUN_DIR/run.json, or None when there is none (a new run) or it is unreadable (then a warning)."""
    path = Path(run_dir) / RUN_FILE
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        log.warning("%s is unreadable (%s): the resume can't check its options against the run's", path, exc)
        return None
    return doc if isinstance(doc, dict) and isinstance(doc.get("trajectory"), dict) else None


def _write(run_dir: str | os.PathLike[str], doc: dict[str, Any]) -> None:
    if os.environ.get("RANK", "0") != "0":  # under torchrun rank 0 records the run (its manifests carry its id)
        return
    storage.write_json(str(Path(run_dir) / RUN_FILE), doc)  # atomic, fenced by the run's lock


def start_run(run_dir: str | os.PathLike[str], now: dict[str, Any], run_id: str | None = None) -> str:
    """A run that starts from step 0: record its trajectory under a new run_id (or RUN_ID); returns the id."""
    run_id = run_id or uuid.uuid4().hex
    _write(run_dir, {"run_id": run_id, "trajectory": now, "changes": []})
    return run_id


def _field_of(name: str, known: dict[str, Any]) -> str:
    """An allow_change entry as a trajectory field: ``learning_rate`` or ``trl.learning_rate``."""
    if name in known:
        return name
    matches = [k for k in known if k.rsplit(".", 1)[-1] == name and not k.startswith(FIXED)]
    if len(matches) == 1:
        return matches[0]
    choices = ", ".join(k for k in known if not k.startswith(FIXED) and k != "model_weights")
    raise TrainOptionError(
        f"allow_change {name!r} is not a field that fixes the run's trajectory; one of: {choices}",
        options=("allow_change",),
    )


def _show(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, str) else value
    return text if len(text) <= 60 else text[:57] + "..."


def check_resume(run_dir: str, doc: dict[str, Any], now: dict[str, Any], allow: list[str], step: int) -> list[str]:
    """Refuse (RunStateError, one line) a resume at STEP whose trajectory differs from the recorded one, except
    the fields ALLOW names; record those changes in run.json; returns the notes to show."""
    recorded: dict[str, Any] = doc["trajectory"]
    allowed = {_field_of(name, {**recorded, **now}) for name in allow}
    if "model" in allowed:
        allowed.add("model_weights")  # another policy has other weights
    differ = [k for k in sorted(set(recorded) | set(now)) if recorded.get(k) != now.get(k)]
    refused = [k for k in differ if k not in allowed or k.startswith(FIXED)]
    if refused:
        shown = "; ".join(f"{k}: run {_show(recorded.get(k))}, now {_show(now.get(k))}" for k in refused)
        fixable = [k for k in refused if not k.startswith(FIXED)]
        how = "resume with the run's options"
        if fixable:
            how += ", or change on purpose with " + " ".join(
                f"allow_change {'model' if k == 'model_weights' else k}" for k in fixable
            )
        if len(fixable) < len(refused):
            how += "; the sampler and the artifact can't change on a resume (train under a new name)"
        raise RunStateError(
            f"{run_dir} was trained with other options than this resume's: {shown}; {how}",
            options=("allow_change",),
        )
    changed = [k for k in differ if k in allowed]
    if not changed:
        return []
    when = time.time()
    doc["changes"] = list(doc.get("changes") or []) + [
        {"step": step, "field": k, "from": recorded.get(k), "to": now.get(k), "time": when} for k in changed
    ]
    doc["trajectory"] = now
    _write(run_dir, doc)
    return [
        f"changed on purpose at step {step}: "
        + "; ".join(f"{k} {_show(recorded.get(k))} -> {_show(now.get(k))}" for k in changed)
    ]
