"""The one table of sampler presets (ads_lab.presets): a name means one thing in the benches, the studies and the
simulator; `dots` is DOTS with its trained predictor everywhere, the simulator's rule alone is `dots-lite`."""

from __future__ import annotations

import pytest

from ads_lab import presets
from ads_lab.config import experiment2 as e2
from ads_lab.config.simulate import DEFAULT_SAMPLERS, SimulationConfig
from ads_lab.config.study import STUDY_SAMPLERS


def test_a_preset_resolves_to_its_sampler_section_with_the_seed_and_the_per_cluster_knobs():
    assert presets.sampler_section("ads-frontier", seed=7) == {"kind": "ads", "ads": {"window": "frontier", "seed": 7}}
    assert presets.sampler_section("dots-lite", seed=2) == {"kind": "dots-lite", "dots_lite": {"seed": 2}}
    assert presets.sampler_section("ads-floor", seed=1, num_clusters=64) == {
        "kind": "ads",
        "ads": {"prob_floor": 0.0078125, "seed": 1},
    }
    with pytest.raises(ValueError, match="per cluster: give the number of clusters"):
        presets.sampler_section("ads-floor")
    with pytest.raises(ValueError, match="unknown sampler preset 'nope'; choose one of uniform, "):
        presets.preset("nope")
    found = presets.preset("dots+rr")
    found["trl"]["replay"] = False  # a copy: the table is not changed
    assert presets.PRESETS["dots+rr"] == {"kind": "dots", "trl": {"replay": True}, "train": {"drop_all_wrong": "off"}}


def test_every_name_the_studies_and_the_simulator_run_is_one_preset():
    assert set(STUDY_SAMPLERS) | set(e2.ARMS) | set(e2.SWEEP) | set(DEFAULT_SAMPLERS) <= set(presets.PRESETS)
    assert e2.ARMS["ads"] == presets.PRESETS["ads"] == {"kind": "ads", "train": {"drop_all_wrong": "on"}}
    assert e2.SWEEP["ads-eps0.30"] == {"kind": "ads", "ads": {"boundary_eps": 0.3}, "train": {"drop_all_wrong": "on"}}
    assert presets.PRESETS["dots"]["kind"] == "dots" and presets.PRESETS["dots-lite"]["kind"] == "dots-lite"
    assert not presets.simulable("dots") and not presets.simulable("dots+rr") and presets.simulable("dots-lite")
    assert not presets.simulable("ads-oracle") and presets.simulable("ads-floor")


def test_the_simulator_refuses_dots_naming_dots_lite_and_its_old_knob_section():
    with pytest.raises(ValueError, match="run 'dots-lite'"):
        SimulationConfig(samplers=("uniform", "dots"))
    with pytest.raises(ValueError, match="'dots' was renamed: write dots_lite"):
        SimulationConfig.model_validate({"dots": {"memory_size": 256}})
    with pytest.raises(ValueError, match="'dots' was renamed: write dots_lite"):
        SimulationConfig().with_overrides({"dots.memory_size": 256})
    assert SimulationConfig().with_overrides({"dots_lite.memory_size": 256}).dots_lite.memory_size == 256
