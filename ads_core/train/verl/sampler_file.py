"""``RUN_DIR/sampler.json``: the run's resolved sampler, the one way it reaches verl's task.

`ads train` resolves the sampler once (``TrainConfig.sampler``, every kind's knobs, plus the two options of the
verl adapter, ``cluster_metrics_interval`` and ``strict_ids``). The launch writes it here atomically, the verl
config names it (``ads.sampler_file``), and the task runner in verl's process reads it back through the same
pydantic classes. No sampler option is a Hydra key, so a verl override can't set one a second way:
`second_setting` names the option to use instead. Importing this module does not import verl or OmegaConf.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from ads_core import storage
from ads_core.config.base import error_line
from ads_core.sampler.kinds import has_extra_rollouts, kind_spec
from ads_core.train.errors import TrainOptionError
from ads_core.train.verl.options import INTEGRATION_KEYS, VerlConfig

FILE = "sampler.json"
FORMAT = "ads-verl-sampler"
VERSION = 1
HYDRA_KEY = "ads.sampler_file"  # the verl config's pointer to the file (null: every default)
VERL_SECTION = "verl"  # the config tree's section of this trainer's options
# Hydra keys that once carried the sampler; a config or an override that has one sets the sampler a second way.
FORMER_KEYS = ("data.ads_sampler", "data.baseline_samplers", "data.sampler_kind")


class SamplerFileError(ValueError):
    """The sampler file is missing, unreadable or invalid (one line naming the file and the field)."""


@dataclass(frozen=True)
class RunSampler:
    """What verl's task draws with: the sampler section and the adapter's two options."""

    sampler: Any  # the run's TrainSamplerConfig (with the section of a kind named by class path)
    cluster_metrics_interval: int = VerlConfig.model_fields["cluster_metrics_interval"].default
    strict_ids: bool = VerlConfig.model_fields["strict_ids"].default

    @classmethod
    def of(cls, sampler: Any, verl: VerlConfig) -> RunSampler:
        """The plan's sampler (with the trainer's defaults applied) and its verl options."""
        return cls(sampler, **{key: getattr(verl, key) for key in INTEGRATION_KEYS})

    @property
    def batch_size(self) -> int:
        """Prompts per step: every kind draws the ADS batch."""
        return int(self.sampler.ads.batch_size)

    def document(self) -> dict[str, Any]:
        """The file's JSON body."""
        adapter = {key: getattr(self, key) for key in INTEGRATION_KEYS}
        return {
            "format": FORMAT,
            "version": VERSION,
            "sampler": self.sampler.model_dump(mode="json"),
            VERL_SECTION: adapter,
        }

    def to_json(self) -> str:
        return json.dumps(self.document(), indent=2) + "\n"


def default_run_sampler() -> RunSampler:
    """Every default (a verl config that names no sampler file: the entry point run by hand)."""
    from ads_core.train.options import TrainSamplerConfig

    return RunSampler(TrainSamplerConfig())


def write(path: str, run: RunSampler) -> None:
    """Write the file atomically (temp file, fsync, rename)."""
    storage.write_bytes(path, run.to_json().encode())


def read(path: str) -> RunSampler:
    """The file at PATH, checked whole; any problem is one SamplerFileError naming the file."""
    try:
        document = json.loads(storage.read_bytes(path))
    except (OSError, storage.StorageError) as exc:
        raise SamplerFileError(f"{path}: can't read the run's sampler file ({exc}); rerun `ads train`") from None
    except ValueError as exc:
        raise SamplerFileError(f"{path}: not JSON ({exc}); rerun `ads train` to write it again") from None
    return parse(document, path)


def parse(document: Any, where: str) -> RunSampler:
    """Validate a sampler file's body with the config tree's own classes (the same ones the plan used)."""
    from ads_core.train.options import config_model

    if not isinstance(document, Mapping):
        raise SamplerFileError(f"{where}: expected a JSON object, got {type(document).__name__}")
    keys = {"format", "version", "sampler", VERL_SECTION}
    if set(document) != keys:
        raise SamplerFileError(f"{where}: expected the keys {sorted(keys)}, got {sorted(document)}")
    if (document["format"], document["version"]) != (FORMAT, VERSION):
        found = f"{document['format']!r} version {document['version']!r}"
        raise SamplerFileError(f"{where}: format {found}, expected {FORMAT!r} version {VERSION}")
    raw, adapter = document["sampler"], document[VERL_SECTION]
    if not isinstance(adapter, Mapping) or set(adapter) != set(INTEGRATION_KEYS):
        raise SamplerFileError(f"{where}: {VERL_SECTION} must hold exactly {list(INTEGRATION_KEYS)}")
    kind = raw.get("kind") if isinstance(raw, Mapping) else None
    try:  # the tree with the section of a kind named by class path, as the plan had it
        model = config_model(None, kind if isinstance(kind, str) else None).model_fields["sampler"].annotation
    except ValueError as exc:  # such a kind that does not load here
        raise SamplerFileError(f"{where}: sampler.kind: {exc}") from None
    try:
        sampler = model.model_validate(raw)  # type: ignore[union-attr]
    except ValidationError as exc:
        raise SamplerFileError(f"{where}: {error_line(exc, 'sampler.')}") from None
    try:
        verl = VerlConfig.model_validate(dict(adapter))
    except ValidationError as exc:
        raise SamplerFileError(f"{where}: {error_line(exc, VERL_SECTION + '.')}") from None
    refusal = undrawable(sampler.kind)
    if refusal:
        raise SamplerFileError(f"{where}: {refusal}")
    return RunSampler.of(sampler, verl)


def undrawable(kind: str) -> str | None:
    """Why the ADS integration of verl can't draw with sampler KIND, or None."""
    if has_extra_rollouts(kind):
        return (
            f"sampler kind {kind}: its steps roll out extra generation batches (DAPO-style dynamic sampling), "
            "which in verl is algorithm.filter_groups of the v1 trainer only; the ADS integration drives the v0 "
            "trainer, so train this kind with trainer trl"
        )
    needs = kind_spec(kind).needs  # a trainer extension the ADS integration of verl does not have
    return f"sampler kind {kind} needs {', '.join(sorted(needs))}: train it with trl" if needs else None


def former_key(key: str) -> str | None:
    """Which of FORMER_KEYS the dotted Hydra KEY is or lies under, or None."""
    return next((f for f in FORMER_KEYS if key == f or key.startswith(f + ".")), None)


def second_setting(override: str) -> TrainOptionError | None:
    """The refusal of a verl override that would set the sampler a second way (it names the option that sets
    it once), or None for any other override."""
    key = override.split("=", 1)[0].strip().lstrip("+~")
    if key == HYDRA_KEY:
        return TrainOptionError(
            f"{key}: ads train writes the run's {FILE} from its sampler options and names it here; remove the "
            "override and set the options instead"
        )
    former = former_key(key)
    if former is None:
        return None
    rest = key[len(former) + 1 :].split(".") if key != former else []
    if former == "data.sampler_kind":
        option = "kind"
    elif former == "data.ads_sampler":
        knob = rest[0] if rest else "KEY"
        option = f"{VERL_SECTION}.{knob}" if knob in INTEGRATION_KEYS else f"sampler.ads.{knob}"
    else:
        option = "sampler." + ".".join((rest + ["SECTION", "KEY"][len(rest) :])[:2])
    single = former == "data.sampler_kind" or len(rest) >= (2 if former == "data.baseline_samplers" else 1)
    return TrainOptionError(
        f"{key}: set {'it' if single else 'them'} with {option}; verl reads the sampler from the run's {FILE}, "
        "not from overrides, so this would be a second setting",
        options=(option,),
    )
