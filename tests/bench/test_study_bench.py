"""`bench/study.py`'s options without running anything: the sizes, the sampler names from the one table of presets
(ads_lab.presets, DOTS+RR's replay as its trl addition) that bench/grpo_curriculum.py reads too, unknown names
skipped with a line. The smoke run itself is tests/flows/test_study.py."""

from __future__ import annotations

from pathlib import Path

from ads_lab.presets import PRESETS


def test_sizes_and_sampler_names(bench_module):
    study = bench_module("study")
    cfg, notes = study.parse_args(["--smoke", "--samplers", "ads-frontier,dynamic", "--jobs", "3"])
    assert cfg.samplers == ("uniform", "ads-frontier", "dynamic") and cfg.jobs == 3
    assert (cfg.steps, cfg.seeds, notes) == (2, (1000, 1001), [])
    assert cfg.out == str(Path("bench-out/study-smoke").resolve())  # absolute: manifests never name a relative path
    pilot, _ = study.parse_args(["--pilot"])
    assert pilot.seeds == (900, 901, 902, 903) and pilot.out == str(Path("bench-out/study-pilot").resolve())
    declared, _ = study.parse_args([])
    assert declared.seeds == tuple(range(1000, 1016)) and declared.steps == 80 and declared.dask is None
    changed, notes = study.parse_args(["--seeds", "1,2", "--steps", "5", "--dask", "local"])
    assert changed.seeds == (1, 2) and changed.dask == "local"
    assert notes[:2] == ["seeds changed: not the declared study", "steps changed: not the declared study"]
    powered, notes = study.parse_args(["--seeds", "1000-1026"])  # N from the pilot's power rule: still declared
    assert powered.seeds == tuple(range(1000, 1027)) and notes == []
    assert study.parse_args(["--seeds", "1000-1010"])[1] == ["seeds changed: not the declared study"]  # N < 16
    named, bench = study.named_samplers(), bench_module("grpo_curriculum")
    # the replay rides with the sampler, and every preset says whether all-wrong groups leave the gradient batch
    assert named["dots+rr"] == {"kind": "dots", "trl": {"replay": True}, "train": {"drop_all_wrong": "off"}}
    assert named["ads"] == {"kind": "ads", "train": {"drop_all_wrong": "on"}}
    assert named == PRESETS and set(bench.SAMPLERS) <= set(bench.RUNNABLE) <= set(PRESETS)  # one table


def test_unknown_names_are_skipped_with_a_line_and_dots_runs(bench_module):
    study = bench_module("study")
    names, notes = study.available(("uniform", "ads", "dots", "dots+rr", "nope"), study.named_samplers())
    assert names == ("uniform", "ads", "dots", "dots+rr")
    assert len(notes) == 1 and notes[0].startswith("nope: not a sampler name")
