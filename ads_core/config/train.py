"""The neutral part of the training options: what every trainer and every sampler kind shares (which trainer,
policy, steps, run folder, eval sets, validation, the sampler's kind).

A trainer's own options (`trl.*`, `verl.*`) and a sampler kind's knobs (`sampler.ads.*`, `sampler.uniform.*`)
are declared by the plug-in, in its own package, and registered with it; `ads_core.train.options` assembles the
full tree (`TrainConfig`) from the registries, so this package imports no plug-in. `ads train` flags, YAML keys,
`--set` keys and the `ads-train` flow's parameters are all generated from that tree.

The batch: one optimizer step trains on one sampler batch, `active_clusters x mini_cluster_size` prompts (the
baselines draw the same number), under every trainer. A trainer may size the ADS knobs it leaves unset
differently (its `ads_defaults`: TRL's CPU-sized `mini_cluster_size`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ads_core.config.base import Section, tuning

DecontaminateMode = Literal["off", "report", "drop"]
DropAllWrong = Literal["auto", "on", "off"]


class SamplerSection(Section):
    """Which rows each step trains on; the assembled tree adds one section of knobs per sampler kind."""

    kind: str = Field(
        "ads",
        min_length=1,
        description="A registered sampler kind (ads: the ADS sampler, sampler.ads.window picks reference or "
        "frontier; uniform: shuffled epochs; dots: DOTS, a trained difficulty predictor with reference rollouts every "
        "mu steps (sampler.dots.predictor from `ads dots-train`); dots-lite: DOTS's selection rule over a kernel of "
        "observed rows; dynamic: DAPO-style, drop all-0/all-1 groups and roll out more in the same step, TRL) or a "
        "class path (my_pkg.mod:my_kind).",
        json_schema_extra={"flag": "--sampler"},
    )


class ValidationConfig(Section):
    """Validation during training: the policy measured on the eval sets (`eval_sets`) as it trains, k samples per
    problem graded as `ads eval` grades them (TRL: `ads eval`'s code; verl: its validation with val_kwargs.n = k),
    one record per step and set in RUN_DIR/eval.jsonl. The defaults are sized for where it runs."""

    steps: int = Field(
        25,
        ge=0,
        description="Validate every N optimizer steps and after the last (0: only after the last); verl's "
        "trainer.test_freq.",
        json_schema_extra={"flag": "--eval-steps"},
    )
    limit: int | None = Field(
        None,
        ge=0,
        description="Problems per eval set (the first N; 0: all). Default 8 on a CPU, all on a GPU.",
        json_schema_extra={"flag": "--eval-limit"},
    )
    k: int | None = Field(
        None,
        ge=1,
        le=1024,
        description="Samples per problem (mean@k). Default 2 on a CPU, the paper's 16 on a GPU (verl's val_kwargs.n).",
        json_schema_extra={"flag": "--eval-k"},
    )
    before_train: bool = tuning(
        default=True, description="Validate the initial policy too, as step 0 (verl's trainer.val_before_train)."
    )


class NeutralTrainConfig(Section):
    """The options every trainer shares; `ads_core.train.options.TrainConfig` adds the plug-ins' sections."""

    trainer: str = Field(
        "auto",
        min_length=1,
        description="auto (the first registered trainer, by priority, that can run here: verl where CUDA GPUs, "
        "verl and its rollout engine are present or with a Ray address, TRL otherwise), a registered trainer "
        "(ads_core.train.trainers) or a class path (my_pkg.mod:MyTrainer).",
    )
    model: str | None = Field(
        None, description="Policy to train; default: the model the difficulties were scored with (the manifest)."
    )
    steps: int = Field(800, ge=1, description="Optimizer steps (the reference trains 800).")
    run_dir: str | None = Field(None, description="Checkpoints, metrics and staged inputs (default ./ads-runs/NAME).")
    name: str | None = Field(None, description="Experiment name (default DATASET-SAMPLER); the same name resumes.")
    eval_sets: list[str] | None = Field(
        None,
        description="Validation sets: names under OUT/eval, named sets (math500, aime24, aime25, amc23, minerva), "
        ".parquet paths, raw files or NAME=PATH (as ads eval --set); default every set in OUT/eval; [] for none "
        "(ads train --no-eval).",
        json_schema_extra={"cli": False},
    )
    allow_change: list[str] = Field(
        default_factory=list,
        description="Options a resume may change on purpose (a field that fixes the run's trajectory, e.g. "
        "learning_rate or trl.learning_rate; RUN_DIR/run.json records the change); any other difference from the "
        "run's options refuses the resume.",
        json_schema_extra={"cli": False},
    )
    decontaminate: DecontaminateMode = Field(
        "report", description="off, report, or drop training rows whose question is in an eval set."
    )
    drop_all_wrong: DropAllWrong = Field(
        "auto",
        description="Drop every group whose completions are all wrong from the gradient batch (the ADS reference "
        "trainer's filter; nothing is dropped when every group of the step is all wrong; the sampler still gets "
        "every group's success). auto: on for the sampler kinds published with it (ads), off for the others; on / "
        "off for any kind. TRL only: verl refuses on and trains auto without it, saying so.",
        json_schema_extra={"flag": "--drop-all-wrong"},
    )
    sampler: SamplerSection = Field(default_factory=SamplerSection)
    validation: ValidationConfig = Field(
        default_factory=ValidationConfig,
        description="Validation on the eval sets every `steps` steps and after the last, `k` samples per problem "
        "of the first `limit` problems (default: 8 problems and k 2 on a CPU, all and k 16 on a GPU), into "
        "RUN_DIR/eval.jsonl.",
    )

    @classmethod
    def sections(cls) -> tuple[str, ...]:
        """The names of the nested sections (the sampler and one per trainer), in declaration order."""
        return tuple(
            n
            for n, f in cls.model_fields.items()
            if isinstance(f.annotation, type) and issubclass(f.annotation, Section)
        )
