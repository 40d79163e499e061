"""Every named sampler variant of the lab, once: the benches (bench/grpo_curriculum.py, bench/study.py,
bench/experiment2.py), the studies and the simulator read their names here, so a name means one thing everywhere.

A preset is a `TrainConfig.sampler` section (its ``kind`` and that kind's knobs; the seed is set per run) with
optional extras beside it:

* ``train``: top-level `TrainConfig` options. Every preset states its all-wrong drop, so that a name does not hang
  on what ``drop_all_wrong auto`` means today (it gives the same: on for ADS, off for the others);
* ``trl``: `TrainConfig.trl` additions (DOTS+RR's replay);
* ``artifact``: the artifact the run trains on instead of the build's (Experiment 2: ``oracle``, ``nll_sum``);
* ``per_cluster``: knobs given per cluster, ``{section: {knob: value}}``, set to value / K where K is known.

``dots`` is DOTS proper: its trained predictor, which the study's flow and bench/grpo_curriculum.py train for
their artifact. ``dots-lite`` is DOTS's selection rule alone, the one the simulator runs (it has no predictor to
train). Results written before this table keep the names they were run under (docs/sampler.md says what each
meant).
"""

from __future__ import annotations

import copy
from typing import Any

from ads_core.sampler.kinds import kind_spec

TRAIN, TRAINER, ARTIFACT, PER_CLUSTER = "train", "trl", "artifact", "per_cluster"
EXTRAS = (TRAIN, TRAINER, ARTIFACT, PER_CLUSTER)  # what is not a TrainConfig.sampler key
DROP, NO_DROP = {"drop_all_wrong": "on"}, {"drop_all_wrong": "off"}


def _ads(train: dict[str, str] = DROP, **knobs: Any) -> dict[str, Any]:
    """An ADS preset: its knobs over the defaults (the reference window), with the all-wrong drop as published."""
    return {"kind": "ads", **({"ads": knobs} if knobs else {}), TRAIN: train}


PRESETS: dict[str, dict[str, Any]] = {
    "uniform": {"kind": "uniform", TRAIN: NO_DROP},  # plain GRPO
    "uniform+drop": {"kind": "uniform", TRAIN: DROP},
    "ads": _ads(),  # as published: the reference window and the all-wrong drop
    "ads-nodrop": _ads(NO_DROP),
    "ads-frontier": _ads(window="frontier"),
    "ads-learnability": _ads(inter_cluster_weighting="learnability"),
    "ads-inverse": _ads(inter_cluster_weighting="inverse"),
    "ads-noreset": _ads(reset_every=0),
    "ads-floor": {**_ads(), PER_CLUSTER: {"ads": {"prob_floor": 0.5}}},  # prob_floor = 0.5 / K
    "ads-skip": _ads(skip=True),
    "ads-frontier-skip": _ads(window="frontier", skip=True),
    "ads-oracle": {**_ads(), ARTIFACT: "oracle"},  # clusters = the true families, rank = the true level
    "ads-nllsum": {**_ads(), ARTIFACT: "nll_sum"},  # the build ranked by the summed NLL (the product's default)
    # Experiment 2's knob sweep: one knob at a time around ADS as published (window size x clusters per step
    # keeps the step's 8 prompts); ads-reset-never is ads-noreset under the sweep's name
    "ads-window1x8": _ads(mini_cluster_size=1, active_clusters=8),
    "ads-window4x2": _ads(mini_cluster_size=4, active_clusters=2),
    "ads-window8x1": _ads(mini_cluster_size=8, active_clusters=1),
    "ads-eps0.08": _ads(boundary_eps=0.08),
    "ads-eps0.30": _ads(boundary_eps=0.3),
    "ads-alpha0.1": _ads(alpha=0.1),
    "ads-alpha0.7": _ads(alpha=0.7),
    "ads-reset15": _ads(reset_every=15),
    "ads-reset60": _ads(reset_every=60),
    "ads-reset-never": _ads(reset_every=0),
    "easiest": {"kind": "easiest", "easiest": {"share": 0.25}, TRAIN: DROP},  # Experiment 2: its pilot sets share
    "dynamic": {"kind": "dynamic", TRAIN: NO_DROP},  # DAPO-style dynamic sampling
    "dots": {"kind": "dots", TRAIN: NO_DROP},  # DOTS with its trained predictor
    "dots+rr": {"kind": "dots", TRAINER: {"replay": True}, TRAIN: NO_DROP},  # and rollout replay
    "dots-lite": {"kind": "dots-lite", TRAIN: NO_DROP},  # DOTS's selection rule alone (no predictor)
}


def preset(name: str) -> dict[str, Any]:
    """A copy of the preset NAME (its sampler section and extras); an unknown name is refused naming the known."""
    if name not in PRESETS:
        raise ValueError(f"unknown sampler preset {name!r}; choose one of {', '.join(PRESETS)}")
    return copy.deepcopy(PRESETS[name])


def sampler_section(name: str, seed: int | None = None, num_clusters: int | None = None) -> dict[str, Any]:
    """`TrainConfig.sampler` for the preset NAME (see `resolve`)."""
    return resolve(preset(name), seed, num_clusters)


def resolve(found: dict[str, Any], seed: int | None = None, num_clusters: int | None = None) -> dict[str, Any]:
    """`TrainConfig.sampler` of FOUND (a preset, perhaps with its predictor set): its kind and knobs without the
    extras, the kind's seed set to SEED (when given) and its per-cluster knobs divided by NUM_CLUSTERS (needed
    only by a preset that has some)."""
    section = {key: copy.deepcopy(value) for key, value in found.items() if key not in EXTRAS}
    for part, knobs in found.get(PER_CLUSTER, {}).items():
        if num_clusters is None:
            raise ValueError(f"a sampler preset sets {', '.join(knobs)} per cluster: give the number of clusters")
        section.setdefault(part, {}).update({knob: value / num_clusters for knob, value in knobs.items()})
    if seed is not None:
        section.setdefault(kind_spec(section.get("kind", "ads")).section, {})["seed"] = seed
    return section


def simulable(name: str) -> bool:
    """Whether the simulator can run NAME: no trained predictor, no trainer additions, the build's artifact (its
    `train` options are the trainer's, which the simulator does not model)."""
    found = preset(name)
    return found["kind"] != "dots" and TRAINER not in found and ARTIFACT not in found
