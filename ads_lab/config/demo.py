"""`ads demo`'s settings: the synthetic task, the warmed-up policy, and the two GRPO runs per seed (ADS, uniform).

The defaults are sized for about 6 minutes on 2 CPU cores (docs/benchmarks.md); `smoke` shrinks everything so that
the whole chain runs in seconds (tests). The task is the study's (docs/study.md) in small: the same five families
(range and product added; product is beyond the tiny policy), a warm-up boxed 30% of the time and rollouts at
temperature 1.0, the settings the study's pilot 3 found GRPO learning at (amendments 2 and 3), with 12 training
and 15 held-out problems per (family, level). `bench/grpo_curriculum.py` uses the same task and policy sections at
larger sizes (three families).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ads_core.config.base import FrozenSection, tuning
from ads_lab.config.renamed import RenamedKeys

Family = Literal["max", "min", "sum", "range", "product", "sub", "digitsum", "lastdigit", "bigproduct"]
STUDY_FAMILIES: tuple[Family, ...] = ("max", "min", "sum", "range", "product")


class DemoTaskConfig(FrozenSection):
    """The synthetic arithmetic task: families (the semantic groups) x levels (L + 1 one-digit operands, L = 1..4).

    The held-out set is drawn first, then the train set, then the warm-up set, with no question in two of them.
    Level 1 has 100 distinct questions per family (64 for product, whose operands are 2..9), so
    train_per_cell + test_per_cell stays below that. The study's task (docs/study.md) adds range and product."""

    seed: int = Field(0, ge=0, description="Seed of the problem generator.", json_schema_extra={"flag": "--task-seed"})
    families: tuple[Family, ...] = tuning(default=("max", "min", "sum"), min_length=1, description="Problem families.")
    train_per_cell: int = Field(
        60, ge=1, le=90, description="Training problems per (family, level): what the artifact is built from."
    )
    test_per_cell: int = Field(25, ge=1, le=50, description="Held-out problems per (family, level): the eval set.")
    warmup_per_cell: int = Field(
        300, ge=1, description="Warm-up problems drawn per (family, level) (those in another set are dropped)."
    )
    solutions: Literal["answer", "worked"] = tuning(
        default="answer",
        description="Reference solutions: the bare \\boxed{N} (answer) or one worked step per operand, then the box "
        "(worked: Experiment 2, so that the difficulty is an NLL over reasoning).",
    )


class DemoPolicyConfig(FrozenSection):
    """The policy: the default tiny model's architecture (0.75M parameters), built locally, then a short supervised
    warm-up so that GRPO's rewards are not all zero. Replies are ``\\boxed{N}`` boxed_share of the time and
    ``N`` / ``The answer is N.`` otherwise (a policy that knows some answers, mostly not in the rewarded form);
    scoring_share of the examples use the build's scoring text, so the score stage measures this policy."""

    hidden_size: int = tuning(default=128, ge=16, description="Hidden size of the tiny Qwen2 policy.")
    num_hidden_layers: int = tuning(default=2, ge=1, description="Layers of the tiny Qwen2 policy.")
    warmup_steps: int = Field(300, ge=1, description="Supervised warm-up steps.")
    warmup_batch: int = tuning(default=32, ge=1, description="Warm-up batch size.")
    warmup_lr: float = tuning(default=2e-3, gt=0, description="Warm-up peak learning rate.")
    scoring_share: float = tuning(default=0.25, ge=0, le=1, description="Warm-up share in the scoring format.")
    boxed_share: float = tuning(default=0.3, ge=0, le=1, description="Warm-up replies written as \\boxed{N}.")
    seed: int = tuning(default=0, ge=0, description="Seed of the policy's init and warm-up.")


class DemoConfig(RenamedKeys):
    """`ads demo`: build the synthetic task with the real pipeline, then train GRPO (TRL) with ADS and with uniform
    sampling from the same warmed-up policy, same seeds and steps, validated on the held-out set as they train,
    and compare them with `ads compare`'s code."""

    renamed = {"clusters": "num_clusters"}  # K is named as the build names it (cluster.num_clusters, --clusters)

    out: str = Field("ads-out", description="Output root; the demo writes OUT/demo/.")
    seeds: int = Field(6, ge=1, le=16, description="Seeds 0..N-1; each seed trains one ADS and one uniform run.")
    steps: int = Field(30, ge=1, description="GRPO optimizer steps per run.")
    eval_every: int = Field(3, ge=1, description="Validate on the held-out set every N steps (and at step 0).")
    eval_k: int = tuning(default=2, ge=1, description="Completions per held-out problem (mean@k).")
    jobs: int = Field(2, ge=1, le=64, description="Runs trained at a time, each in its own one-thread process.")
    num_clusters: int = Field(
        8, ge=2, description="K-Means clusters (K) of the build.", json_schema_extra={"flag": "--clusters"}
    )
    num_generations: int = tuning(default=4, ge=2, description="Completions per prompt (GRPO group size).")
    max_completion_length: int = tuning(default=12, ge=1, description="Tokens per completion.")
    learning_rate: float = tuning(default=3e-4, gt=0, description="GRPO learning rate.")
    window: Literal["reference", "frontier"] = tuning(
        default="reference", description="The ADS run's window (sampler.ads.window)."
    )
    smoke: bool = Field(
        False, description="Tiny sizes, 1 seed, 4 steps: checks that everything runs, measures nothing."
    )
    temperature: float = tuning(default=1.0, gt=0, description="Rollout temperature (the study's, amendment 2).")
    task: DemoTaskConfig = DemoTaskConfig(families=STUDY_FAMILIES, train_per_cell=12, test_per_cell=15)
    policy: DemoPolicyConfig = DemoPolicyConfig()

    def effective(self) -> DemoConfig:
        """The settings that run: with `smoke`, tiny sizes everywhere (the rest unchanged)."""
        if not self.smoke:
            return self
        return self.replaced(
            seeds=1,
            steps=4,
            eval_every=2,
            num_clusters=4,
            jobs=1,  # one worker process trains both runs: a second would cost its start-up, not save time
            task=self.task.replaced(train_per_cell=4, test_per_cell=4, warmup_per_cell=40),
            # enough warm-up that held-out accuracy is not 0 at step 0, so the smoke run's numbers are real
            policy=self.policy.replaced(warmup_steps=100, warmup_batch=16),
        )
