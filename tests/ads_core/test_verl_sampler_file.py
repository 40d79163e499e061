"""RUN_DIR/sampler.json, the one way the sampler reaches verl's task (issue 52): the plan's sampler section (every
kind's knobs) and the adapter's two options round-trip through it unchanged, a bad file is one line naming the
file and the field, and a verl override that would set a sampler option a second way is refused, naming the option
that sets it in each interface's spelling. (The plan, the launch and the verl-side reader:
tests/integrations/test_train_config.py.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ads_core.train.errors import error_text
from ads_core.train.options import TrainConfig
from ads_core.train.verl import sampler_file as sf

CHOSEN = {
    "sampler": {
        "kind": "dots-lite",
        "ads": {"boundary_eps": 0.2, "window": "frontier", "mini_cluster_size": 8},
        "dots_lite": {"target": 0.3},
        "uniform": {"seed": 7},
    },
    "verl": {"strict_ids": False, "cluster_metrics_interval": 5},
}


def chosen() -> sf.RunSampler:
    cfg = TrainConfig(trainer="verl", **CHOSEN)
    return sf.RunSampler.of(cfg.sampler, cfg.verl)


def test_every_kinds_knobs_round_trip_through_the_file(tmp_path: Path):
    path = tmp_path / "run" / sf.FILE
    sf.write(str(path), chosen())
    assert sorted(p.name for p in path.parent.iterdir()) == ["sampler.json"]  # written whole, no temp left
    body = json.loads(path.read_text())
    assert (body["format"], body["version"], body["verl"]) == ("ads-verl-sampler", 1, CHOSEN["verl"])
    read = sf.read(str(path))
    assert read.document() == chosen().document()  # every value (the classes are the config tree's own)
    assert (read.sampler.kind, read.sampler.ads.boundary_eps, read.sampler.ads.window) == ("dots-lite", 0.2, "frontier")
    assert (read.sampler.dots_lite.target, read.sampler.uniform.seed, read.batch_size) == (0.3, 7, 32)
    assert (read.strict_ids, read.cluster_metrics_interval) == (False, 5)
    assert sf.read(str(path)).sampler.dots.mu == 2  # a kind not chosen keeps its knobs too: its pydantic default


def changed(edit: dict[str, Any]) -> dict[str, Any]:
    """The chosen file's body with EDIT's dotted keys set (None removes the key)."""
    body = chosen().document()
    for dotted, value in edit.items():
        *parents, last = dotted.split(".")
        node = body
        for key in parents:
            node = node[key]
        if value is None:
            del node[last]
        else:
            node[last] = value
    return body


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        ({"sampler.ads.alpha": 2.0}, "sampler.ads.alpha: Input should be less than or equal to 1, got 2.0"),
        ({"sampler.ads.alpah": 0.5}, "sampler.ads.alpah: Extra inputs are not permitted, got 0.5"),
        ({"sampler.ads.active_clusters": "4"}, "sampler.ads.active_clusters: Input should be a valid integer, got '4'"),
        (
            {"verl.cluster_metrics_interval": -1},
            "verl.cluster_metrics_interval: Input should be greater than or equal to 0, got -1",
        ),
        ({"verl.strict_ids": None}, "verl must hold exactly ['cluster_metrics_interval', 'strict_ids']"),
        ({"version": 2}, "format 'ads-verl-sampler' version 2, expected 'ads-verl-sampler' version 1"),
        ({"sampler.kind": "dynamic"}, "sampler kind dynamic: its steps roll out extra generation batches"),
    ],
)
def test_a_bad_file_is_one_line_naming_the_file_and_the_field(tmp_path: Path, edit: dict[str, Any], problem: str):
    path = tmp_path / sf.FILE
    path.write_text(json.dumps(changed(edit)))
    with pytest.raises(sf.SamplerFileError) as caught:
        sf.read(str(path))
    assert str(caught.value).startswith(f"{path}: {problem}"), str(caught.value)


def test_a_missing_or_torn_file_is_one_line(tmp_path: Path):
    path = tmp_path / sf.FILE
    with pytest.raises(sf.SamplerFileError, match=r"sampler\.json: can't read the run's sampler file"):
        sf.read(str(path))
    path.write_text(chosen().to_json()[:40])
    with pytest.raises(sf.SamplerFileError, match=r"sampler\.json: not JSON"):
        sf.read(str(path))


SECOND = "verl reads the sampler from the run's sampler.json, not from overrides, so this would be a second setting"


@pytest.mark.parametrize(
    ("override", "cli", "flow"),
    [
        (
            "data.ads_sampler.boundary_eps=0.3",
            "set it with -s boundary_eps (or --set sampler.ads.boundary_eps)",
            "set it with sampler.ads.boundary_eps",
        ),
        ("+data.ads_sampler.strict_ids=false", "set it with -s strict_ids (or --set verl.strict_ids)", None),
        ("data.sampler_kind=uniform", "set it with --sampler", "set it with sampler.kind"),
        ("data.baseline_samplers.dots_lite.target=0.3", "set it with --set sampler.dots_lite.target", None),
        ("~data.ads_sampler", "set them with -s KEY (or --set sampler.ads.KEY)", None),
    ],
)
def test_an_override_that_sets_the_sampler_a_second_way_names_the_option(override: str, cli: str, flow: str | None):
    from ads_cli.train_cmd import spell_flag

    key = override.split("=")[0].lstrip("+~")
    refusal = sf.second_setting(override)
    assert refusal is not None and error_text(refusal, spell_flag) == f"{key}: {cli}; {SECOND}"
    if flow is not None:
        pytest.importorskip("prefect")
        from ads_prefect.tasks.train import spell_param

        assert error_text(refusal, spell_param) == f"{key}: {flow}; {SECOND}"


def test_other_overrides_pass_and_the_file_pointer_is_ours():
    for override in ("trainer.save_freq=10", "data.train_batch_size=128", "data.ads_samplers=1", "ads.metrics_file=x"):
        assert sf.second_setting(override) is None, override
    refusal = sf.second_setting("ads.sampler_file=/elsewhere.json")
    assert refusal is not None and str(refusal).startswith("ads.sampler_file: ads train writes the run's sampler.json")
