"""`ads train` with verl: the artifact checks, the verl config (accepted by verl's own validation), the command,
the sampler file the verl task reads (the values the plan shows), and the fast failure without CUDA. Planned
through `TrainConfig(trainer="verl")`, as `--trainer verl` does."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

pytest.importorskip("verl")

from omegaconf import OmegaConf  # noqa: E402

from ads_cli.main import app  # noqa: E402
from ads_core.config.sampler import ADSSamplerConfig
from ads_core.train import artifact as ta
from ads_core.train import choice
from ads_core.train import plan as tr
from ads_core.train import run as trun
from ads_core.train.errors import LaunchError
from ads_core.train.options import TrainConfig
from ads_core.train.verl import config as vc
from ads_core.train.verl import launch as tl
from ads_core.train.verl import sampler_file as sf
from ads_core.train.verl.plan import plan_verl

VERL = ["--trainer", "verl"]


def verl_plan(uri: str, resolve_config: bool = True, materialize: bool = True, **options):
    """(neutral plan, verl part) for TrainConfig(trainer="verl", **options)."""
    plan = tr.plan_training(uri, TrainConfig(trainer="verl", **options), materialize=materialize)
    return plan, plan_verl(plan, materialize=materialize, resolve_config=resolve_config)


BASE = ["data.train_files=/data/train.parquet", "actor_rollout_ref.model.path=/models/m"]


def run_sampler(**sampler) -> sf.RunSampler:
    """The verl task's sampler for TrainConfig(sampler=SAMPLER) (what a plan writes to RUN_DIR/sampler.json)."""
    cfg = TrainConfig(trainer="verl", sampler=sampler)
    return sf.RunSampler.of(cfg.sampler, cfg.verl)


def written(folder: Path, run: sf.RunSampler) -> str:
    """The override that names RUN's sampler file, written into FOLDER."""
    sf.write(str(folder / sf.FILE), run)
    return f"{sf.HYDRA_KEY}={folder / sf.FILE}"


def shown_sampler(stdout: str) -> dict:
    """The sampler file's body as a dry run shows it (comment lines between the verl YAML and the command)."""
    lines = stdout.split("(the sampler the verl task reads;", 1)[1].split("\n", 1)[1].split("# command:", 1)[0]
    return json.loads("\n".join(line.removeprefix("# ") for line in lines.splitlines()))


def verl_validate(cfg) -> None:
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    validate_config(config=cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))


def test_the_verl_yaml_holds_no_sampler_option():
    """The sampler's defaults live once, in pydantic: verl's YAML names the run's sampler file and nothing else of
    the sampler (no key that once carried a knob)."""
    yaml_config = OmegaConf.load(vc.CONFIG_DIR / "ads_grpo.yaml")
    assert [key for key in yaml_config.data if sf.former_key(f"data.{key}")] == []
    assert yaml_config.ads.sampler_file is None  # null: every default, from the same classes


def test_defaults_set_the_batch_from_the_sampler():
    cfg = vc.resolve(BASE)
    batch = ADSSamplerConfig().active_clusters * ADSSamplerConfig().mini_cluster_size
    assert cfg.data.train_batch_size == batch and cfg.data.dataloader_num_workers == 0
    assert cfg.trainer.use_v1 is False and cfg.algorithm.adv_estimator == "grpo"
    run = run_sampler(ads={"active_clusters": 2, "mini_cluster_size": 16})
    cfg = vc.resolve([*BASE, "data.dataloader_num_workers=8"], run=run)  # a dry run: the file is not written
    assert cfg.data.train_batch_size == 32 and "ads_sampler" not in cfg.data
    assert cfg.data.dataloader_num_workers == 0  # forced


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("data.train_batch_size=256", "does not match the ADS sampler's batch"),
        ("data.gen_batch_size=64", "gen_batch_size"),
        ("trainer.use_v1=true", "use_v1"),
        ("trainer.critic_warmup=2", "critic_warmup"),
        ("actor_rollout_ref.actor.ppo_mini_batch_size=48", "must divide the ADS batch 128"),
    ],
)
def test_config_errors_are_clear(override: str, message: str):
    with pytest.raises(vc.ConfigError, match=re.escape(message)):
        vc.resolve([*BASE, override])


def test_the_verl_config_reads_the_sampler_only_from_its_file(tmp_path: Path):
    """The verl-side reader (`run_sampler`, as ADSTaskRunner and the entry point call it): the file the config
    names, checked through the same classes; a key that once carried the sampler is a second setting."""
    run = run_sampler(kind="uniform", ads={"mini_cluster_size": 4}, uniform={"seed": 7})
    config = OmegaConf.create({"data": {}, "ads": {"sampler_file": str(tmp_path / sf.FILE)}})
    sf.write(str(tmp_path / sf.FILE), run)
    assert vc.run_sampler(config).document() == run.document() and vc.run_sampler(config).sampler.uniform.seed == 7
    assert vc.run_sampler(OmegaConf.create({"data": {}, "ads": {"sampler_file": None}})).sampler.ads.alpha == 0.3
    (tmp_path / sf.FILE).write_text((tmp_path / sf.FILE).read_text().replace('"alpha": 0.3', '"alpha": 2.0'))
    with pytest.raises(vc.ConfigError, match=re.escape(f"{tmp_path / sf.FILE}: sampler.ads.alpha: Input should be")):
        vc.resolve([*BASE, f"{sf.HYDRA_KEY}={tmp_path / sf.FILE}"])
    with pytest.raises(vc.ConfigError, match=r"^data\.ads_sampler: the verl task reads the sampler only from ads"):
        vc.resolve([*BASE, "+data.ads_sampler.alpha=0.5"])  # the entry point run by hand
    with pytest.raises(Exception, match="ads_sampler"):
        vc.resolve([*BASE, "data.ads_sampler.alpha=0.5"])  # without `+`, Hydra finds no such key


def test_verl_validation_really_runs():
    with pytest.raises(AssertionError, match="real_train_batch_size"):
        vc.resolve([*BASE, "trainer.n_gpus_per_node=3"])  # 128 x 8 rollouts is not divisible by 3 GPUs


def test_dry_run_prints_a_config_verl_accepts(final_artifact: Path, tmp_path: Path):
    result = CliRunner().invoke(
        app,
        [
            "train",
            str(final_artifact),
            *VERL,
            "--dry-run",
            "--run-dir",
            str(tmp_path / "run"),
            "--gpus",
            "8",
            "-s",
            "mini_cluster_size=16",
            "trainer.save_freq=10",
        ],
    )
    assert result.exit_code == 0, result.output
    yaml_text, _, command = result.stdout.partition("\n# command:\n# ")
    cfg = OmegaConf.create(yaml_text)
    verl_validate(cfg)  # verl's own validation accepts what we print
    assert cfg.data.train_files == str(final_artifact.resolve())
    assert cfg.data.train_batch_size == 64 and cfg.ads.sampler_file == str(tmp_path / "run" / sf.FILE)
    assert shown_sampler(result.stdout)["sampler"]["ads"]["mini_cluster_size"] == 16 and "ads_sampler" not in yaml_text
    assert "every kind draws the ADS batch, 64 prompts per step, whatever its batch_size" in result.stdout
    assert cfg.trainer.n_gpus_per_node == 8 and cfg.trainer.save_freq == 10
    assert cfg.trainer.use_v1 is False and cfg.data.dataloader_num_workers == 0
    # --model defaults to the policy the difficulties were scored with
    manifest = ta.read_manifest(str(final_artifact))
    assert cfg.actor_rollout_ref.model.path == manifest["extra"]["policy_model"]
    assert "-m ads_core.train.verl.main" in command and f"{sf.HYDRA_KEY}={tmp_path / 'run' / sf.FILE}" in command
    assert not (tmp_path / "run").exists()  # a dry run writes nothing


def test_a_sampler_option_set_a_second_way_is_refused_in_one_line(final_artifact: Path, tmp_path: Path):
    """A verl override that would set a sampler knob beside `-s` (the lower layer used to win silently) is refused
    before anything runs, naming the flag that sets it."""
    args = ["train", str(final_artifact), *VERL, "--dry-run", "--no-eval", "--run-dir", str(tmp_path / "run")]
    result = CliRunner().invoke(app, [*args, "-s", "boundary_eps=0.2", "data.ads_sampler.boundary_eps=0.3"])
    assert result.exit_code == 2
    assert result.output == (
        "error: data.ads_sampler.boundary_eps: set it with -s boundary_eps (or --set sampler.ads.boundary_eps); "
        "verl reads the sampler from the run's sampler.json, not from overrides, so this would be a second setting\n"
    )
    assert not (tmp_path / "run").exists()


READER = """
import json, sys
from ads_core.train.verl import config as vc
config = vc.compose(sys.argv[1:])  # what `python -m ads_core.train.verl.main OVERRIDES` receives
run = vc.run_sampler(config)  # what ADSTaskRunner.run reads and draws with
print(json.dumps({"sampler": run.sampler.model_dump(mode="json"), "strict_ids": run.strict_ids,
                  "cluster_metrics_interval": run.cluster_metrics_interval}))
"""


def test_the_verl_task_reads_the_sampler_the_plan_shows(final_artifact: Path, tmp_path: Path):
    """The plan's sampler section reaches verl's process unchanged: the launch writes RUN_DIR/sampler.json, and a
    process given the plan's own overrides reads it back as the task runner does."""
    plan, part = verl_plan(
        str(final_artifact),
        resolve_config=False,
        run_dir=str(tmp_path / "run"),
        eval_sets=[],
        sampler={"kind": "dots-lite", "ads": {"boundary_eps": 0.2, "window": "frontier"}, "dots_lite": {"target": 0.3}},
        verl={"strict_ids": False, "cluster_metrics_interval": 5},
    )
    assert plan.sampler.ads.boundary_eps == 0.2 and part.sampler.sampler == plan.sampler
    part.command = [sys.executable, "-c", READER, *part.overrides]
    lines: list[str] = []
    assert tl.launch(part, on_line=lines.append) == 0, "\n".join(lines)
    read = json.loads(lines[-1])
    assert read == {"sampler": plan.sampler.model_dump(mode="json"), "strict_ids": False, "cluster_metrics_interval": 5}
    ads, target = read["sampler"]["ads"], read["sampler"]["dots_lite"]["target"]
    assert (read["sampler"]["kind"], ads["boundary_eps"], ads["window"], target) == ("dots-lite", 0.2, "frontier", 0.3)


@pytest.mark.parametrize("kind", ["uniform", "dots-lite"])
def test_verl_trains_the_baselines_too(kind: str, final_artifact: Path, tmp_path: Path):
    """Every sampler kind without extra rollouts per step resolves a verl config; its knobs travel with it."""
    args = ["train", str(final_artifact), *VERL, "--dry-run", "--sampler", kind, "--run-dir", str(tmp_path / "r")]
    section = kind.replace("-", "_")  # kind dots-lite: sampler.dots_lite
    result = CliRunner().invoke(app, [*args, "--set", f"sampler.{section}.seed=7"])
    assert result.exit_code == 0, result.output
    yaml_text, _, command = result.stdout.partition("\n# command:\n# ")
    cfg = OmegaConf.create(yaml_text)
    verl_validate(cfg)
    assert cfg.data.train_batch_size == 128  # the ADS batch, whatever the kind
    shown = sf.parse(shown_sampler(result.stdout), "the dry run")  # what the launch would write
    assert shown.sampler.kind == kind and getattr(shown.sampler, section).seed == 7
    assert "sampler_kind" not in command and "baseline_samplers" not in command


def test_the_artifact_check_makes_the_runs_sampler_by_kind(final_artifact: Path, monkeypatch: pytest.MonkeyPatch):
    from ads_core.sampler import kinds

    made: list[str] = []

    def counting(kind: str, *args, **kwargs):
        made.append(kind)
        return kinds.build_sampler(kind, *args, **kwargs)

    monkeypatch.setattr(ta, "build_sampler", counting)
    info = ta.validate_artifact(str(final_artifact), TrainConfig(sampler={"kind": "dots-lite"}).sampler)
    assert made == ["dots-lite"] and info.rows == 300 and info.cluster_size_min <= info.cluster_size_max


def test_rollout_replay_under_verl_is_refused_in_one_line(final_artifact: Path):
    result = CliRunner().invoke(app, ["train", str(final_artifact), *VERL, "--dry-run", "--replay"])
    assert result.exit_code == 2
    line = result.output.strip()
    assert "\n" not in line and "replay" in line and "--trainer trl" in line, line


def test_dynamic_sampling_under_verl_is_refused_in_one_line(final_artifact: Path, tmp_path: Path):
    result = CliRunner().invoke(app, ["train", str(final_artifact), *VERL, "--dry-run", "--sampler", "dynamic"])
    assert result.exit_code == 2
    line = result.output.strip()
    assert "\n" not in line and "algorithm.filter_groups" in line and "--trainer trl" in line
    dynamic = written(tmp_path, run_sampler(kind="dynamic"))
    with pytest.raises(vc.ConfigError, match="filter_groups"):  # a hand-written sampler file too
        vc.resolve([*BASE, dynamic], check=False)


def test_dots_under_verl_is_refused_in_one_line(final_artifact: Path, tmp_path: Path):
    """verl cannot roll out DOTS's reference sets: the kind is refused, not trained on fed-back rows instead."""
    result = CliRunner().invoke(app, ["train", str(final_artifact), *VERL, "--dry-run", "--sampler", "dots"])
    assert result.exit_code == 2
    line = result.output.strip()
    assert "\n" not in line and "needs reference_rollouts, which --trainer verl does not support" in line, line
    assert "--trainer trl" in line and "--sampler" in line, line
    dots = written(tmp_path, run_sampler(kind="dots"))
    with pytest.raises(vc.ConfigError, match="needs reference_rollouts: train it with trl"):  # a hand-written file
        vc.resolve([*BASE, dots], check=False)


def test_without_cuda_train_fails_at_once(final_artifact: Path, monkeypatch: pytest.MonkeyPatch):
    def no_planning(*args, **kwargs):
        raise AssertionError("planned although the machine cannot train")

    monkeypatch.setattr(choice, "cuda_gpu_count", lambda: 0)
    monkeypatch.setattr(tr, "plan_training", no_planning)  # the check comes before any config work
    result = CliRunner().invoke(app, ["train", str(final_artifact), *VERL])
    assert result.exit_code == 2
    assert "needs CUDA GPUs" in result.output
    assert "--dry-run" in result.output and "--ray-address" in result.output  # the CLI's flags
    assert "dry_run" not in result.output and "ray_address" not in result.output
    assert "Traceback" not in result.output


def test_too_few_gpus_names_the_gpus_flag(final_artifact: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(choice, "cuda_gpu_count", lambda: 1)
    result = CliRunner().invoke(app, ["train", str(final_artifact), *VERL, "--gpus", "4"])
    assert result.exit_code == 2
    assert "only 1 CUDA GPU(s)" in result.output and "lower --gpus" in result.output
    assert "n_gpus_per_node" not in result.output


def test_a_missing_policy_names_the_model_flag(final_artifact: Path, tmp_path: Path):
    missing = tmp_path / "model" / "nope"  # "model" inside a path must stay as it is
    result = CliRunner().invoke(
        app, ["train", str(final_artifact), *VERL, "--dry-run", "--no-eval", "--model", str(missing)]
    )
    assert result.exit_code == 2
    assert "does not exist on this machine" in result.output and "pass --model (" in result.output
    assert f"{tmp_path.name}/model/nope" in " ".join(result.output.split()).replace(" ", "")


@pytest.mark.parametrize(
    ("uri", "manifest", "expected"),
    [
        ("ads-out/gsm8k/final/train.parquet", None, "gsm8k"),
        ("s3://bucket/builds/math/final/train.parquet", None, "math"),
        ("/data/mine/train.parquet", None, "mine"),
        ("train.parquet", None, "dataset"),
        ("ads-out/x/final/train.parquet", {"extra": {"dataset": "from-manifest"}}, "from-manifest"),
    ],
)
def test_the_dataset_of_an_artifact(uri: str, manifest, expected: str):
    assert ta.dataset_of(uri, manifest) == expected


def test_the_sort_stage_writes_the_contract_training_checks(final_artifact: Path):
    """The writer (sort) and the reader (validate_artifact) share one contract; a real artifact satisfies it."""
    from ads_core.common import contract

    schema = pq.read_schema(final_artifact)
    assert schema.names[-len(contract.SAMPLER_COLUMNS) - 1 : -1] == list(contract.SAMPLER_COLUMNS)
    extra = schema.field("extra_info").type
    inner = {extra.field(i).name for i in range(extra.num_fields)}
    assert set(contract.EXTRA_INFO_WRITTEN) <= inner and set(contract.EXTRA_INFO_FIELDS) <= inner
    table = pq.read_table(final_artifact)
    info = ta.validate_artifact(str(final_artifact))
    assert info.rows == table.num_rows
    assert info.clusters == len(set(table.column("cluster_id").to_pylist()))
    assert info.out_root == str(final_artifact.parent.parent)
    assert table.column("extra_info").combine_chunks().field("index").to_pylist() == list(range(table.num_rows))


def test_plan_with_eval_sets_decontamination_and_remote_staging(
    final_artifact: Path, tmp_path: Path, shared_data: Path
):
    import fsspec

    from ads_core.evaluation.sets.writer import write_eval_sets

    # an eval set that shares two questions with the training set
    train = pq.read_table(final_artifact)
    ev_dir = tmp_path / "evals"
    ev_dir.mkdir()
    pq.write_table(train.slice(0, 2), ev_dir / "leak.parquet")
    # the artifact on a remote filesystem (fsspec memory://), with its manifest
    fs = fsspec.filesystem("memory")
    fs.pipe("/bucket/out/final/train.parquet", final_artifact.read_bytes())
    fs.pipe("/bucket/out/final/manifest.json", (final_artifact.parent / "manifest.json").read_bytes())
    write_eval_sets(str(tmp_path / "out"), names=["aime24"], data_dir=shared_data)  # not into the shared OUT
    plan, part = verl_plan(
        "memory://bucket/out/final/train.parquet",
        run_dir=str(tmp_path / "run"),
        eval_sets=[str(ev_dir / "leak.parquet"), str(tmp_path / "out" / "eval" / "aime24.parquet")],
        decontaminate="drop",
        sampler={"ads": {"active_clusters": 2, "mini_cluster_size": 8}},
    )
    assert plan.decontamination["contaminated"] == 2 and plan.decontamination["matches"]["leak"] == 2
    assert part.train_file == str(tmp_path / "run" / "data" / "train.decontaminated.parquet")
    assert pq.read_metadata(part.train_file).num_rows == train.num_rows - 2
    assert (tmp_path / "run" / "data" / "train.parquet").exists()  # staged from memory://
    assert any("match eval questions" in w for w in plan.warnings)
    cfg = OmegaConf.create(part.config_yaml)
    assert list(cfg.data.val_files) == part.val_files and len(part.val_files) == 2
    assert cfg.data.train_batch_size == 16 and cfg.trainer.test_freq == 25
    assert plan.model == ta.read_manifest(str(final_artifact))["extra"]["policy_model"]


def test_ray_job_submission_command(final_artifact: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    verl = {"nnodes": 2, "n_gpus_per_node": 8, "ray_address": "http://head:8265"}
    _, plan = verl_plan(
        str(final_artifact),
        resolve_config=False,
        eval_sets=[],
        run_dir=str(tmp_path),
        verl=verl,
        model="Qwen/Qwen2.5-Math-1.5B",
    )
    assert plan.mode == "ray-job"
    assert plan.command[1:5] == ["job", "submit", "--address", "http://head:8265"]
    assert plan.command[plan.command.index("--") + 1 :][:3] == ["python", "-m", vc.ENTRY_MODULE]
    assert "trainer.nnodes=2" in plan.command and "trainer.val_before_train=false" in plan.command
    monkeypatch.setattr(choice, "cuda_gpu_count", lambda: 0)
    assert tl.check_launch_environment(TrainConfig(verl=verl).verl) is None  # no local CUDA to submit to a cluster
    with pytest.raises(LaunchError, match="needs CUDA GPUs"):  # ...while a local run needs it
        tl.check_launch_environment(TrainConfig().verl)
    _, cluster = verl_plan(
        str(final_artifact), resolve_config=False, eval_sets=[], run_dir=str(tmp_path), verl={"ray_address": "auto"}
    )
    assert cluster.mode == "cluster" and "ray_kwargs.ray_init.address=auto" in cluster.overrides


def test_broken_artifacts_are_refused_with_the_reason(final_artifact: Path, tmp_path: Path):
    table = pq.read_table(final_artifact)
    no_cluster = tmp_path / "no_cluster" / "train.parquet"
    no_cluster.parent.mkdir()
    pq.write_table(table.drop(["cluster_id", "rank_in_cluster"]), no_cluster)
    with pytest.raises(ta.ArtifactError, match=r"missing column 'cluster_id'[\s\S]*missing column 'rank_in_cluster'"):
        ta.validate_artifact(str(no_cluster))
    info = table.column("extra_info").combine_chunks()
    keep = [info.type.field(i).name for i in range(info.type.num_fields) if info.type.field(i).name != "sample_id"]
    stripped = pa.StructArray.from_arrays([info.field(k) for k in keep], names=keep)
    no_inner = tmp_path / "no_inner.parquet"
    pq.write_table(table.set_column(table.schema.get_field_index("extra_info"), "extra_info", stripped), no_inner)
    with pytest.raises(ta.ArtifactError, match=r"extra_info lacks \['sample_id'\]"):
        ta.validate_artifact(str(no_inner))
    dup = tmp_path / "dup.parquet"
    pq.write_table(pa.concat_tables([table, table.slice(0, 1)]), dup)
    with pytest.raises(ta.ArtifactError, match="sample_id is not unique"):
        ta.validate_artifact(str(dup))
    nulls = tmp_path / "nulls.parquet"
    cid = table.column("cluster_id")
    masked = pc.if_else(pa.array([i == 3 for i in range(table.num_rows)]), pa.scalar(None, cid.type), cid)
    pq.write_table(table.set_column(table.schema.get_field_index("cluster_id"), "cluster_id", masked), nulls)
    with pytest.raises(ta.ArtifactError, match="'cluster_id' has 1 null"):
        ta.validate_artifact(str(nulls))
    result = CliRunner().invoke(app, ["train", str(no_cluster), *VERL, "--dry-run"])
    assert result.exit_code == 2 and "missing column 'cluster_id'" in result.output
    with pytest.raises(ta.ArtifactError, match="no such file"):
        ta.validate_artifact(str(tmp_path / "nope.parquet"))


def run_entry_point(*overrides: str, cwd: Path, timeout: int) -> tuple[int, str]:
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", vc.ENTRY_MODULE, *overrides, f"hydra.run.dir={cwd / 'hydra'}"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        start_new_session=True,
    )
    return proc.returncode, proc.stdout + proc.stderr


def test_entry_point_rejects_a_mismatched_batch_before_starting_ray(tmp_path: Path):
    code, output = run_entry_point(*BASE, "data.train_batch_size=7", cwd=tmp_path, timeout=120)
    assert code == 2 and "does not match the ADS sampler's batch" in output
    assert "ray init" not in output


@pytest.mark.slow
def test_entry_point_runs_our_task_runner_in_ray_up_to_the_gpu_workers(
    final_artifact: Path, policy_model: str, tmp_path: Path
):
    """The real launch path on CPU: Ray starts, ADSTaskRunner builds the tokenizer, verl's RLHFDataset (with
    overlong-prompt filtering), our sampler and our trainer; only the GPU worker pool is then missing."""
    code, output = run_entry_point(
        f"data.train_files={final_artifact}",
        f"actor_rollout_ref.model.path={policy_model}",
        written(tmp_path, run_sampler(ads={"active_clusters": 2, "mini_cluster_size": 4})),
        "actor_rollout_ref.actor.ppo_mini_batch_size=4",
        "trainer.val_before_train=false",
        "trainer.test_freq=-1",
        "ray_kwargs.ray_init.num_cpus=1",
        "+ray_kwargs.ray_init.include_dashboard=false",  # not under test; its processes cost seconds of CPU
        f"trainer.default_local_dir={tmp_path / 'ckpt'}",
        cwd=tmp_path,
        timeout=400,
    )
    assert code != 0
    assert re.search(r"\[ads\] sampler ads: 300 rows, batch 8, 37 steps per epoch", output)
    assert "Size of train dataloader: 37" in output  # printed by verl inside ADSRayPPOTrainer.__init__
    assert "Total available GPUs 0 is less than total desired GPUs 1" in output


def test_a_dry_run_plan_writes_nothing_and_missing_models_are_caught(
    final_artifact: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    import fsspec

    fs = fsspec.filesystem("memory")
    fs.pipe("/dry/out/final/train.parquet", final_artifact.read_bytes())
    fs.pipe("/dry/out/final/manifest.json", (final_artifact.parent / "manifest.json").read_bytes())
    leak = tmp_path / "leak.parquet"
    pq.write_table(pq.read_table(final_artifact).slice(0, 1), leak)
    plan, part = verl_plan(
        "memory://dry/out/final/train.parquet",
        resolve_config=False,
        materialize=False,
        run_dir=str(tmp_path / "run"),
        eval_sets=[str(leak)],
        decontaminate="drop",
    )
    assert plan.decontamination["contaminated"] == 1
    assert part.train_file == str(tmp_path / "run" / "data" / "train.decontaminated.parquet")
    assert not (tmp_path / "run").exists()
    with pytest.raises(ta.ArtifactError, match="does not exist on this machine"):
        verl_plan(str(final_artifact), resolve_config=False, model=str(tmp_path / "no-model"), eval_sets=[])
    # joining a cluster needs no local GPU or rollout engine (a local run on this machine would)
    monkeypatch.setattr(choice, "cuda_gpu_count", lambda: 0)
    assert tl.check_launch_environment(TrainConfig(verl={"ray_address": "auto"}).verl) is None
    with pytest.raises(LaunchError):
        tl.check_launch_environment(TrainConfig().verl)
    with pytest.raises(LaunchError):  # trun.prepare checks the machine before planning a real verl run
        trun.prepare(str(final_artifact), TrainConfig(trainer="verl", eval_sets=[]))
