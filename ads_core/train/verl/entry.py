"""verl as a registered trainer (``trainer: verl``): CUDA GPUs with Ray, launched as its own process (or a Ray
job), its output streamed line by line. `auto` prefers it wherever it can train. Importing this module does not
import verl."""

from __future__ import annotations

import collections
import re
from typing import Any, ClassVar

from ads_core.config.train import NeutralTrainConfig as TrainConfig
from ads_core.sampler.kinds import EXTRA_ROLLOUTS, REFERENCE_ROLLOUTS, has_extra_rollouts
from ads_core.train import choice
from ads_core.train.errors import LaunchError
from ads_core.train.trainers import OnLine, OnStep, Score, TrainResult, register_trainer
from ads_core.train.verl.options import INTEGRATION_KEYS, VerlConfig

STEP = re.compile(r"global_step_(\d+)")  # verl's checkpoint folders


@register_trainer("verl")
class VerlTrainer:
    priority: ClassVar[int] = 10  # `auto` asks verl first: where it can train, it trains at GPU scale
    streams_steps: ClassVar[bool] = False  # a subprocess: its progress is its output (on_line)
    ads_defaults: ClassVar[dict[str, Any]] = {}  # the reference's batch, 4 x 32
    options: ClassVar[type] = VerlConfig  # the `verl` section
    sampler_keys: ClassVar[tuple[str, ...]] = INTEGRATION_KEYS  # `-s KEY=...`; they travel in RUN_DIR/sampler.json
    extra_arguments: ClassVar[str] = "overrides"  # `ads train ART key=value ...`: Hydra overrides
    supports: ClassVar[frozenset[str]] = frozenset()
    unsupported_why: ClassVar[dict[str, str]] = {
        EXTRA_ROLLOUTS: "in verl that is algorithm.filter_groups, which only its v1 loop has, and the ADS "
        "integration drives the v0 loop: train it with trainer trl, or pick another kind",
        REFERENCE_ROLLOUTS: "the ADS integration of verl's loop has no hook that rolls out a reference set with "
        "the current policy: train it with trainer trl, or pick another kind (dots-lite needs none)",
    }

    def can_run_here(self, cfg: TrainConfig) -> tuple[bool, str]:
        """verl is GPU-only (no CPU training, verl issue #3266) and needs a rollout engine (vLLM or SGLang); a Ray
        address means a cluster that has both."""
        kind = cfg.sampler.kind
        if has_extra_rollouts(kind):
            return False, f"the {kind} sampler rolls out extra batches per step, which verl's v0 trainer can't"
        if cfg.verl.ray_address:
            return True, f"a Ray address ({cfg.verl.ray_address}) means verl on that cluster"
        gpus = choice.cuda_gpu_count()
        if gpus == 0:
            return False, "no CUDA GPU here (verl is GPU-only)"
        if not choice.installed("verl"):
            return False, f"{gpus} CUDA GPU(s) but verl is not installed"
        engines = [e for e in choice.ROLLOUT_ENGINES if choice.installed(e)]
        if not engines:
            return False, f"{gpus} CUDA GPU(s) and verl, but no rollout engine ({' or '.join(choice.ROLLOUT_ENGINES)})"
        return True, f"{gpus} CUDA GPU(s), verl and {engines[0]}"

    def check_machine(self, cfg: TrainConfig, dry_run: bool) -> None:
        if not dry_run:
            from ads_core.train.verl import launch

            launch.check_launch_environment(cfg.verl)  # no CUDA here -> fail now, not deep inside Ray

    def plan(self, plan: Any, materialize: bool) -> Any:
        from ads_core.train.verl.plan import plan_verl

        part = plan_verl(plan, materialize=materialize)
        plan.warnings += part.warnings
        return part

    def execute(self, plan: Any, on_step: OnStep | None, on_line: OnLine | None, score: Score | None) -> TrainResult:
        """Run the launch command (``on_line`` gets its output; without it the output is inherited)."""
        from ads_core.train.verl import launch
        from ads_core.train.verl.valmetrics import copy_validation

        part = plan.part
        console_steps: collections.deque[str] = collections.deque(maxlen=1)

        def each_line(line: str) -> None:
            if launch.parse_console_metrics(line) is not None:
                console_steps.append(line)
            assert on_line is not None
            on_line(line)

        copy_validation(plan)  # what a run resumed here validated before (verl truncates its metrics file)
        code = launch.launch(part, on_line=each_line if on_line is not None else None)
        copy_validation(plan)  # verl's validation metrics into RUN_DIR/eval.jsonl, as TRL writes them
        if code != 0:
            raise LaunchError(f"verl exited with status {code}; see its log above (run dir {plan.run_dir})")
        metrics = launch.final_metrics(part, list(console_steps))
        return TrainResult(
            trainer="verl",
            run_dir=plan.run_dir,
            steps_file=part.metrics_file,
            metrics=metrics,
            headline=launch.headline(metrics),
        )

    def read_checkpoint_state(self, run_dir: str) -> Any:
        """The sampler checkpoint of the newest ``global_step_N`` folder in RUN_DIR that has one, or None."""
        from pathlib import Path

        from ads_core.sampler.checkpoint import has_checkpoint, read_checkpoint

        root = Path(run_dir) / "checkpoints"
        steps = [
            (int(m.group(1)), p)
            for p in (root.iterdir() if root.is_dir() else ())
            if (m := STEP.fullmatch(p.name)) and has_checkpoint(p)
        ]
        return read_checkpoint(max(steps)[1], max(steps)[0])[0] if steps else None
