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


def trajectory(plan: Any, horizon: int | None, load_free: bool = False) -> dict[str, Any]:
    """The dotted fields that fix PLAN's trajectory (see the module), JSON values; LOAD_FREE: without the
    weights' fingerprint and the artifact's content key (what a check before loading can't know yet)."""
    cfg = plan.config
    out: dict[str, Any] = {"model": plan.model}
    if not load_free:
        from ads_core.models.tiny import model_fingerprint

        out["model_weights"] = model_fingerprint(plan.model)
        out["artifact"] = storage.content_hash(plan.train_uri)
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


def defaults(plan: Any) -> dict[str, Any]:
    """The defaults of PLAN's trainer options and sampler knobs, as dotted trajectory fields (what a run recorded
    before an option existed trained with); {} for options that can't be made with their defaults alone."""
    from ads_core.sampler.kinds import kind_spec
    from ads_core.train.options import sampler_knobs, trainer_options
    from ads_core.train.trainers import section_of_trainer

    out: dict[str, Any] = {}
    try:
        options = trainer_options(plan.config, plan.trainer)
        if options is not None:  # as `trajectory` records them: one field per option, a nested value whole
            prefix = section_of_trainer(plan.trainer)
            out.update({f"{prefix}.{k}": v for k, v in type(options)().model_dump(mode="json").items()})
        knobs = sampler_knobs(plan.sampler)
        if knobs is not None:
            _flat(f"sampler.{kind_spec(plan.sampler.kind).section}", type(knobs)().model_dump(mode="json"), out)
    except (TypeError, ValueError, AttributeError):
        return {}
    return out


def with_new_options(doc: dict[str, Any], now: dict[str, Any], plan: Any) -> dict[str, Any]:
    """DOC with the fields its run predates (options added to ads since it started) recorded at their defaults,
    where this command leaves them at their defaults too: an upgrade alone never refuses a resume, while a new
    option set to anything else still does."""
    recorded: dict[str, Any] = doc["trajectory"]
    missing = [k for k in now if k not in recorded]
    if not missing:
        return doc
    known = defaults(plan)
    added = {k: now[k] for k in missing if k in known and known[k] == now[k]}
    return {**doc, "trajectory": {**recorded, **added}} if added else doc


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


def about(plan: Any) -> dict[str, Any]:
    """What the run is, for people and tables (`ads compare`, the model card): sampler, trainer, model, seed, and
    the code version that trained it (git commit and dirty flag)."""
    from ads_core.common.version import code_version
    from ads_core.train.options import trainer_options

    section = trainer_options(plan.config, plan.trainer)
    return {
        "sampler": plan.sampler.kind,
        "trainer": plan.trainer,
        "model": absolute_or_id(plan.model),
        "seed": getattr(section, "seed", None),
        "drop_all_wrong": plan.config.drop_all_wrong,  # as set (auto/on/off); steps.jsonl's dropped_groups: what ran
        "code": code_version(),
    }


def absolute_or_id(model: str) -> str:
    """A hub id as it is, a local folder as its absolute path (``ads-out/demo/policy`` -> ``/home/.../policy``)."""
    local = os.path.expanduser(model.removeprefix("file://"))
    return os.path.abspath(local) if os.path.exists(local) else model


def start_run(
    run_dir: str | os.PathLike[str], now: dict[str, Any], run_id: str | None = None, facts: dict[str, Any] | None = None
) -> str:
    """A run that starts from step 0: record its trajectory under a new run_id (or RUN_ID) with FACTS (`about`);
    returns the id."""
    run_id = run_id or uuid.uuid4().hex
    _write(run_dir, {"run_id": run_id, "about": facts or {}, "trajectory": now, "changes": []})
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


SHOWN = 5  # differences a refusal names; the rest are counted and written to a file
LOAD_FREE = ("model_weights", "artifact", ".schedule_steps")  # fields a check before loading can't know yet


def _first(key: str) -> tuple[int, str]:
    """What a user changed first: the sampler's kind, the policy, the data, the learning rate; then the trainer's
    options; last the sampler's knobs (which follow from its kind)."""
    rank = {"sampler.kind": 0, "model": 1, "model_weights": 2, "artifact": 3}.get(key)
    if rank is None:
        rank = 4 if key.endswith(".learning_rate") else 6 if key.startswith("sampler.") else 5
    return rank, key


def new_name(run_dir: str) -> str:
    """A run folder's name with the first free ``-2``, ``-3``... suffix beside it: the name of a new run."""
    folder = Path(run_dir)
    n = 2
    while (folder.parent / f"{folder.name}-{n}").exists():
        n += 1
    return f"{folder.name}-{n}"


def refusal(run_dir: str, recorded: dict[str, Any], now: dict[str, Any], refused: list[str]) -> RunStateError:
    """One short line: the first SHOWN differences (the sampler kind, model, learning rate first), how many more
    and the file that lists them all, and the two ways on: the run's options, or a new run under another name."""
    ordered = sorted(refused, key=_first)
    shown = "; ".join(f"{k}: run {_show(recorded.get(k))}, now {_show(now.get(k))}" for k in ordered[:SHOWN])
    if len(ordered) > SHOWN:
        import tempfile

        listing = Path(tempfile.gettempdir()) / f"ads-refused-resume-{Path(run_dir).name}.txt"
        listing.write_text(
            "".join(f"{k}: run {json.dumps(recorded.get(k))}, now {json.dumps(now.get(k))}\n" for k in ordered),
            encoding="utf-8",
        )
        shown += f"; and {len(ordered) - SHOWN} more (all listed in {listing})"
    fixable = [k for k in ordered if not k.startswith(FIXED)][:SHOWN]
    how = f"start a new run instead with name {new_name(run_dir)}, or resume with the run's options"
    if fixable and len(fixable) == len([k for k in ordered if not k.startswith(FIXED)]):
        how += ", or change on purpose with " + " ".join(
            f"allow_change {'model' if k == 'model_weights' else k}" for k in dict.fromkeys(fixable)
        )
    if any(k.startswith(FIXED) for k in ordered):
        how += " (the sampler and the artifact can't change on a resume)"
    return RunStateError(f"{run_dir} was trained with other options: {shown}; {how}", options=("allow_change", "name"))


def differences(doc: dict[str, Any], now: dict[str, Any], allow: list[str], load_free: bool = False) -> list[str]:
    """The trajectory fields that differ from the run's and are not allowed to (LOAD_FREE: leave out the ones
    only known once the model and data are read)."""
    recorded: dict[str, Any] = doc["trajectory"]
    allowed = {_field_of(name, {**recorded, **now}) for name in allow}
    if "model" in allowed:
        allowed.add("model_weights")  # another policy has other weights
    keys = sorted(set(recorded) | set(now))
    if load_free:
        keys = [k for k in keys if not k.endswith(LOAD_FREE)]
    differ = [k for k in keys if recorded.get(k) != now.get(k)]
    return [k for k in differ if k not in allowed or k.startswith(FIXED)]


def check_before_loading(plan: Any) -> None:
    """The resume check with what needs no model or data (the sampler, the policy's name, the trainer's options):
    a resume that will be refused is refused now, in one line, before anything heavy is imported or loaded."""
    doc = read_run(plan.run_dir)
    if doc is None:
        return
    now = trajectory(plan, None, load_free=True)
    doc = with_new_options(doc, now, plan)
    refused = differences(doc, now, list(plan.config.allow_change), load_free=True)
    if refused:
        raise refusal(plan.run_dir, doc["trajectory"], now, refused)


def check_resume(run_dir: str, doc: dict[str, Any], now: dict[str, Any], allow: list[str], step: int) -> list[str]:
    """Refuse (RunStateError, one line) a resume at STEP whose trajectory differs from the recorded one, except
    the fields ALLOW names; record those changes in run.json; returns the notes to show."""
    recorded: dict[str, Any] = doc["trajectory"]
    refused = differences(doc, now, allow)
    if refused:
        raise refusal(run_dir, recorded, now, refused)
    allowed = {_field_of(name, {**recorded, **now}) for name in allow}
    if "model" in allowed:
        allowed.add("model_weights")
    differ = [k for k in sorted(set(recorded) | set(now)) if recorded.get(k) != now.get(k)]
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


def trained_facts(model_dir: str) -> dict[str, Any]:
    """What trained the policy in MODEL_DIR, for an evaluation's summary.json: a run's ``final/`` (its
    ``ads_run.json``) or one of its checkpoints (the run's ``run.json`` and the checkpoint's step); {} otherwise."""
    folder = Path(os.path.expanduser(model_dir))
    try:
        final = json.loads((folder / "ads_run.json").read_text(encoding="utf-8"))
        keys = ("sampler", "trainer", "base_model", "seed", "step", "experiment")
        return {key: final.get(key) for key in keys} if isinstance(final, dict) else {}
    except (OSError, ValueError):
        pass
    if not folder.name.startswith("checkpoint-") or not folder.name.removeprefix("checkpoint-").isdigit():
        return {}
    doc = read_run(folder.parent.parent)
    about = (doc or {}).get("about")
    if not isinstance(about, dict):
        return {}
    return {
        "sampler": about.get("sampler"),
        "trainer": about.get("trainer"),
        "base_model": about.get("model"),
        "seed": about.get("seed"),
        "step": int(folder.name.removeprefix("checkpoint-")),
        "experiment": folder.parent.parent.name,
    }
