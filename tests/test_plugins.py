"""The plug-in claims, checked: a trainer with one option and a sampler kind with one knob, defined outside the
package and named only by class path, get their options into every interface (YAML keys, `--set` keys, flags and
`--help`, the flow's parameters), and every field of the config trees is reachable from the CLI, the YAML and the
flow. (The same plug-ins run through `ads train --dry-run` and the flow in tests/flows/test_ads_train.py.)"""

from __future__ import annotations

import inspect
import shutil
import typing
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

MODULE = Path(__file__).with_name("plugin_module.py")
PLUGINS = ["--trainer", "plugin_module:Tiny", "--sampler", "plugin_module:coin"]


@pytest.fixture
def plugin_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """plugin_module.py in a folder outside the repository, on sys.path (as PYTHONPATH would put it)."""
    folder = tmp_path / "site"
    folder.mkdir()
    shutil.copy(MODULE, folder / "plugin_module.py")
    monkeypatch.syspath_prepend(str(folder))
    return folder


def test_class_path_plugins_bring_their_sections_to_yaml_and_set(plugin_path: Path):
    from ads_core.train.options import TrainConfig, load_train_config

    yaml_data = {"trainer": "plugin_module:Tiny", "tiny": {"warmth": 0.5}, "sampler": {"kind": "plugin_module:coin"}}
    cfg = load_train_config(yaml_data, {"sampler.coin.knob": 7, "trl.learning_rate": 2e-6})
    assert (cfg.tiny.warmth, cfg.sampler.coin.knob, cfg.trl.learning_rate) == (0.5, 7, 2e-6)
    assert load_train_config({"trainer": "plugin_module:Tiny"}).tiny.warmth == 0.25  # its default
    assert "tiny" not in TrainConfig.model_fields  # the registered tree is unchanged
    with pytest.raises(ValueError, match="tiny.warmth"):
        load_train_config({"trainer": "plugin_module:Tiny"}, {"tiny.warmth": -1})
    with pytest.raises(ValueError, match="unknown option 'sampler.coin.knobb'"):
        load_train_config({"sampler": {"kind": "plugin_module:coin"}}, {"sampler.coin.knobb": 1})
    with pytest.raises(ValueError, match="options of trainer 'plugin_module:Tiny' are not in this config"):
        TrainConfig(trainer="plugin_module:Tiny")  # the registered tree can't hold them: load_train_config can


def test_help_with_a_class_path_trainer_lists_its_option(plugin_path: Path):
    from typer.testing import CliRunner

    from ads_cli.main import app

    chosen = CliRunner().invoke(app, ["train", *PLUGINS, "--help"], env={"COLUMNS": "200"})
    assert chosen.exit_code == 0, chosen.output
    assert "tiny options" in chosen.output and "--warmth" in chosen.output and "How warm the tiny" in chosen.output
    plain = CliRunner().invoke(app, ["train", "--help"], env={"COLUMNS": "200"})
    assert plain.exit_code == 0 and "--warmth" not in plain.output and "--learning-rate" in plain.output
    missing = CliRunner().invoke(app, ["train", "x.parquet", "--trainer", "no_such_module:T", "--dry-run"])
    assert missing.exit_code == 2 and "no_such_module" in missing.output and "Traceback" not in missing.output


def leaves(model: type[BaseModel], prefix: str = "") -> list[tuple[str, Any]]:
    """(dotted field, its default) of every field that is not itself a section, nested sections included."""
    out = []
    for name, field in model.model_fields.items():
        if _is_model(field.annotation):
            out += leaves(field.annotation, f"{prefix}{name}.")
        else:
            out.append((prefix + name, field.get_default(call_default_factory=True)))
    return out


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def nested(dotted: str, value: Any) -> dict[str, Any]:
    head, _, rest = dotted.partition(".")
    return {head: nested(rest, value) if rest else value}


def is_set(cfg: BaseModel, dotted: str) -> bool:
    *parents, last = dotted.split(".")
    for part in parents:
        if part not in cfg.model_fields_set:
            return False
        cfg = getattr(cfg, part)
    return last in cfg.model_fields_set


@pytest.mark.parametrize("tree", ["train", "build"])
def test_every_config_field_is_reachable_from_the_cli_the_yaml_and_the_flow(tree: str):
    """Each field: a YAML key (nested), a `--set` key (dotted) and part of one typed flow parameter; the CLI's
    generated flags are fields of the same tree."""
    pytest.importorskip("prefect")
    from ads_cli import build_cmd, train_cmd
    from ads_cli.options import cli_fields, resolve_config
    from ads_core.config.build import BuildConfig
    from ads_core.train.options import TrainConfig

    if tree == "train":
        from ads_prefect.flows.ads_train import ads_train as flow

        root, command = TrainConfig, train_cmd.train_cmd
    else:
        from ads_prefect.flows.ads_build import ads_build as flow

        root, command = BuildConfig, build_cmd.build_cmd
    params = inspect.signature(flow.fn).parameters
    hints = typing.get_type_hints(flow.fn)
    fields = leaves(root)
    assert len(fields) > 40
    for dotted, default in fields:
        from_yaml = root.model_validate(nested(dotted, default))
        from_set = resolve_config(root, {}, None, [f"{dotted}={_yaml(default)}"])
        assert is_set(from_yaml, dotted) and is_set(from_set, dotted), dotted
        top = dotted.split(".")[0]
        assert top in params and hints[top] == root.model_fields[top].annotation, dotted  # one typed parameter
    cli = {p.name for p in inspect.signature(command).parameters.values()}
    sections = ("", *(n for n, f in root.model_fields.items() if _is_model(f.annotation)))
    flagged = {f"{s}__{n}" if s else n for s, n, _ in cli_fields(root, sections)}
    assert flagged and flagged <= cli  # every generated flag is on the command


def _yaml(value: Any) -> str:
    import json

    return json.dumps(value)  # JSON is YAML: lists, null, numbers and strings as they are


def test_installed_packages_register_through_entry_points(plugin_path: Path, installed: Any):
    """`ads_pipeline.sampler_kinds` / `ads_pipeline.trainers` entry points register by name, options included."""
    from importlib.metadata import EntryPoint

    from ads_core.sampler import kinds
    from ads_core.train import options, trainers

    installed(
        [EntryPoint("coin-flip", "plugin_module:coin", kinds.ENTRY_POINT_GROUP)],
        [EntryPoint("tiny", "plugin_module:Tiny", trainers.ENTRY_POINT_GROUP)],
    )
    assert kinds.kind_names()[-1] == "coin-flip" and trainers.trainer_names()[-1] == "tiny"
    cfg = options.load_train_config({"trainer": "tiny", "sampler": {"kind": "coin-flip"}}, {"tiny.warmth": 1.5})
    assert (cfg.tiny.warmth, cfg.sampler.coin.knob) == (1.5, 3)  # the kind's section: its factory's


def test_a_kind_needing_what_a_trainer_lacks_is_refused_in_one_line(plugin_path: Path):
    from ads_core.train.errors import TrainOptionError
    from ads_core.train.options import TrainConfig, load_train_config
    from ads_core.train.trainers import choose_trainer, get_trainer, unmet_needs

    kind = "plugin_module:replayed"
    assert unmet_needs(get_trainer("trl"), kind) == (
        "the plugin_module:replayed sampler needs rollout_replay, which trainer trl does not support"
    )
    assert unmet_needs(get_trainer("trl"), "dynamic") is None  # TRL runs dynamic sampling's extra draws
    with pytest.raises(TrainOptionError, match="needs rollout_replay, which trainer trl does not support"):
        choose_trainer(load_train_config({"trainer": "trl", "sampler": {"kind": kind}}))
    with pytest.raises(TrainOptionError, match="no trainer can run here: .*which trainer trl does not support"):
        choose_trainer(load_train_config({"sampler": {"kind": kind}}))  # auto passes over every trainer
    with pytest.raises(TrainOptionError, match="algorithm.filter_groups, which only its v1 loop has"):
        choose_trainer(TrainConfig(trainer="verl", sampler={"kind": "dynamic"}))  # the trainer's own reason


def test_reference_rollouts_are_a_need_of_dots_that_trl_meets_and_verl_refuses_in_one_line():
    from ads_core.sampler.kinds import REFERENCE_ROLLOUTS, kind_spec
    from ads_core.train.errors import TrainOptionError
    from ads_core.train.options import TrainConfig
    from ads_core.train.trainers import choose_trainer, get_trainer, unmet_needs

    assert kind_spec("dots").needs == {REFERENCE_ROLLOUTS} and kind_spec("dots-lite").needs == frozenset()
    assert unmet_needs(get_trainer("trl"), "dots") is None  # TRL rolls the reference sets out
    with pytest.raises(TrainOptionError) as refused:  # not a silent fall-back to fed-back rows
        choose_trainer(TrainConfig(trainer="verl", sampler={"kind": "dots"}))
    line = str(refused.value)
    assert "\n" not in line and line.startswith(
        "the dots sampler needs reference_rollouts, which trainer verl does not support: the ADS integration of "
        "verl's loop has no hook that rolls out a reference set with the current policy"
    ), line
    assert refused.value.options == ("trainer", "kind")


def test_what_a_trainer_provides_for_a_need_reaches_the_kinds_factory_and_only_a_kind_that_declares_it(
    plugin_path: Path,
):
    import numpy as np

    from ads_core.sampler.kinds import REFERENCE_ROLLOUTS, build_sampler
    from ads_core.train.options import load_train_config

    cid, rank = np.repeat(np.arange(4), 10), np.tile(np.arange(10), 4)

    def rollout(rows: Any, seed: int) -> Any:
        return np.full(len(rows), 0.5)

    provided = {REFERENCE_ROLLOUTS: rollout, "rollout_replay": "not declared by either kind"}
    section = load_train_config({"sampler": {"kind": "plugin_module:referenced"}}).sampler
    made = build_sampler("plugin_module:referenced", cid, rank, section, 8, provided)
    assert made.reference_rollouts is rollout  # type: ignore[attr-defined]
    unprovided = build_sampler("plugin_module:referenced", cid, rank, section, 8)
    assert unprovided.reference_rollouts is None  # type: ignore[attr-defined]
    coin = load_train_config({"sampler": {"kind": "plugin_module:coin"}}).sampler
    assert build_sampler("plugin_module:coin", cid, rank, coin, 8, provided).batch_size == 8  # four arguments


def test_a_class_path_kinds_knobs_reach_verls_task_in_the_sampler_file(plugin_path: Path, tmp_path: Path):
    """verl's task reads a kind named by class path with its own section, as the plan resolved it; a kind whose
    needs verl lacks is refused when the file is read (a file written by hand)."""
    from ads_core.train.options import load_train_config
    from ads_core.train.verl import sampler_file as sf

    path = str(tmp_path / sf.FILE)
    cfg = load_train_config({"trainer": "verl", "sampler": {"kind": "plugin_module:coin"}}, {"sampler.coin.knob": 7})
    sf.write(path, sf.RunSampler.of(cfg.sampler, cfg.verl))
    read = sf.read(path)
    assert (read.sampler.kind, read.sampler.coin.knob, read.sampler.ads.alpha) == ("plugin_module:coin", 7, 0.3)
    cfg = load_train_config({"sampler": {"kind": "plugin_module:replayed"}})
    sf.write(path, sf.RunSampler.of(cfg.sampler, cfg.verl))
    with pytest.raises(sf.SamplerFileError) as caught:
        sf.read(path)
    assert str(caught.value) == f"{path}: sampler kind plugin_module:replayed needs rollout_replay: train it with trl"


def test_no_code_outside_a_trainers_package_names_it():
    """`"trl"` / `"verl"` as a string appear only in the trainers' own packages, the list of third-party private
    APIs (there they are the pip packages) and the build's input layouts (a file in verl's schema is a data format,
    not the trainer). The lab (ads_lab: the demo and the studies, which choose TRL) is not the product."""
    import re

    repo = Path(__file__).resolve().parents[1]
    allowed = {"ads_core/common/private_apis.py", "ads_core/ingest/detect.py", "ads_core/ingest/rows.py"}
    found = sorted(
        str(path.relative_to(repo))
        for package in ("ads_core", "ads_prefect", "ads_cli")
        for path in (repo / package).rglob("*.py")
        if not str(path.relative_to(repo)).startswith(("ads_core/train/trl/", "ads_core/train/verl/"))
        and re.search(r"\"(trl|verl)\"", path.read_text())
    )
    assert set(found) <= allowed, found
