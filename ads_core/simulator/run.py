"""`ads simulate`: train every sampler on a synthetic GRPO learner and time each to uniform's final accuracy.

The worlds and learners (a model, not evidence about real LLMs) are in ``ads_core.simulator.learners``; this
module runs them and reports the comparison, in optimizer steps and in rollouts (prompts rolled out, each
with ``n_rollouts`` completions): every step goes through ``fill_step``, so DAPO-style dynamic sampling pays
for the generation batches it drops. The plots are in ``ads_core.sampler.plots``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import get_args

import numpy as np

from ads_core.config.sampler import UniformSamplerConfig
from ads_core.config.simulate import SimulatedSampler, SimulationConfig
from ads_core.sampler.ads import ADSSampler
from ads_core.sampler.base import Sampler
from ads_core.sampler.dynamic import fill_step
from ads_core.sampler.kinds import build_sampler
from ads_core.sampler.plots import WindowTrace
from ads_core.simulator.learners import World, make_learner, make_world
from ads_core.train.options import TrainSamplerConfig


@dataclass
class SimulationResult:
    config: SimulationConfig
    eval_steps: np.ndarray  # (E,) steps at which accuracy was measured, starting at 0
    curves: dict[str, np.ndarray]  # sampler -> (n_seeds, E) held-out accuracy
    targets: np.ndarray  # (n_seeds,) the baseline's final accuracy per seed
    steps_to_target: dict[str, list[int | None]]  # None: never reached within the run
    seconds: dict[str, float]  # wall time per sampler over all seeds
    n_rows: list[int] = field(default_factory=list)  # training rows of each seed's world
    window_frac: dict[str, float] = field(default_factory=dict)  # ADS: mean window position at the end
    prompts: dict[str, np.ndarray] = field(default_factory=dict)  # sampler -> (n_seeds, E) prompts rolled out so far
    window_traces: dict[str, WindowTrace] = field(default_factory=dict)  # ADS, first seed: windows at each eval

    def ratio(self, name: str) -> tuple[float, int]:
        """Mean over seeds of steps(name) / steps(baseline); unreached seeds count as the full run.

        Returns (ratio, number of seeds that never reached the target): with any, the ratio is a lower bound.
        """
        return float(np.mean(self.seed_ratios(name))), self.missed(name)

    def rollout_ratio(self, name: str) -> tuple[float, int]:
        """Like ``ratio``, in prompts rolled out (each with n rollouts) until the target instead of steps."""
        return float(np.mean(self.seed_rollout_ratios(name))), self.missed(name)

    def missed(self, name: str) -> int:
        """Seeds on which ``name`` never reached the target."""
        return sum(m is None for m in self.steps_to_target[name])

    def seed_ratios(self, name: str) -> np.ndarray:
        """Per seed: steps(name) / steps(baseline) to the target; an unreached target counts as the full run."""
        full = self.config.steps
        pairs = zip(self.steps_to_target[name], self.steps_to_target[self.config.baseline], strict=True)
        return np.array([(m if m is not None else full) / max(b if b is not None else full, 1) for m, b in pairs])

    def seed_rollout_ratios(self, name: str) -> np.ndarray:
        """Per seed: prompts rolled out to the target by ``name`` over the baseline's (the whole run if unreached)."""
        base = self.config.baseline
        return np.array(
            [
                self.prompts_to_target(name, i) / max(self.prompts_to_target(base, i), 1)
                for i in range(len(self.targets))
            ]
        )

    def prompts_to_target(self, name: str, seed_index: int) -> int:
        """Prompts ``name`` rolled out on seed ``seed_index`` until it reached the target (all, if it never did)."""
        step, prompts = self.steps_to_target[name][seed_index], self.prompts[name][seed_index]
        return int(prompts[-1] if step is None else prompts[list(self.eval_steps).index(step)])

    def to_dict(self) -> dict[str, object]:
        """JSON-able summary: config, per-seed curves and targets, and the summary rows."""
        cfg = self.config.model_dump()
        return {
            "config": cfg,
            "eval_steps": self.eval_steps.tolist(),
            "curves": {name: curve.tolist() for name, curve in self.curves.items()},
            "targets": self.targets.tolist(),
            "steps_to_target": self.steps_to_target,
            "n_rows": self.n_rows,
            "window_frac": self.window_frac,
            "prompts": {name: p.tolist() for name, p in self.prompts.items()},
            "window_traces": {name: t.to_dict() for name, t in self.window_traces.items()},
            "summary": summary_rows(self),
        }


SamplerFactory = Callable[[World, SimulationConfig, int], Sampler]


def _build(kind: str, world: World, cfg: SimulationConfig, seed: int, **ads: object) -> Sampler:
    """A sampler of KIND made as training makes it (`build_sampler`), every kind seeded with the run's seed and
    drawing the ADS batch; ``ads`` overrides ADS knobs (the ``ads-*`` variants)."""
    section = TrainSamplerConfig(
        kind="ads",
        ads=cfg.ads.replaced(seed=seed, **ads),
        uniform=UniformSamplerConfig(seed=seed),
        dots_lite=cfg.dots.replaced(seed=seed),
        dynamic=cfg.dynamic.replaced(seed=seed),
    )
    return build_sampler(kind, world.cluster_of, world.rank_in_cluster, section, cfg.ads.batch_size)


def _ads(world: World, cfg: SimulationConfig, seed: int, **overrides: object) -> Sampler:
    return _build("ads", world, cfg, seed, **overrides)


SAMPLER_FACTORIES: dict[str, SamplerFactory] = {
    "uniform": lambda w, c, s: _build("uniform", w, c, s),
    "dots": lambda w, c, s: _build("dots-lite", w, c, s),  # the rule alone: the simulator has no predictor
    "dynamic": lambda w, c, s: _build("dynamic", w, c, s),
    "easiest": lambda w, c, s: _build("easiest", w, c, s),
    "ads": lambda w, c, s: _ads(w, c, s),
    "ads-frontier": lambda w, c, s: _ads(w, c, s, window="frontier"),
    "ads-learnability": lambda w, c, s: _ads(w, c, s, inter_cluster_weighting="learnability"),
    "ads-inverse": lambda w, c, s: _ads(w, c, s, inter_cluster_weighting="inverse"),
    "ads-noreset": lambda w, c, s: _ads(w, c, s, reset_every=0),
    "ads-floor": lambda w, c, s: _ads(w, c, s, prob_floor=0.5 / w.n_clusters),
    "ads-skip": lambda w, c, s: _ads(w, c, s, skip=True),
    "ads-frontier-skip": lambda w, c, s: _ads(w, c, s, window="frontier", skip=True),
}
assert set(SAMPLER_FACTORIES) == set(get_args(SimulatedSampler)), "one factory per SimulatedSampler name"


@dataclass
class TrainingRun:
    accuracy: np.ndarray  # (E,) held-out accuracy at each eval step
    prompts: np.ndarray  # (E,) prompts rolled out up to each eval step
    trace: WindowTrace | None = None  # ADS samplers: window position and success at each eval step


def train(world: World, sampler: Sampler, cfg: SimulationConfig, seed: int) -> TrainingRun:
    """Run the learner for ``cfg.steps`` optimizer steps; measure at 0, eval_every, ..., steps."""
    learner = make_learner(world, cfg, seed)
    accuracy, prompts, spent = [learner.accuracy()], [0], 0
    trace = WindowTrace.start(sampler) if isinstance(sampler, ADSSampler) else None
    for step in range(1, cfg.steps + 1):
        batch = fill_step(sampler, learner.rollout)
        learner.learn(batch.rows, batch.success)
        spent += batch.prompts
        if step % cfg.eval_every == 0 or step == cfg.steps:
            accuracy.append(learner.accuracy())
            prompts.append(spent)
            if trace is not None:
                trace.record(step, sampler)
    return TrainingRun(np.asarray(accuracy), np.asarray(prompts), trace)


def eval_steps(cfg: SimulationConfig) -> np.ndarray:
    steps = list(range(0, cfg.steps + 1, cfg.eval_every))
    if steps[-1] != cfg.steps:
        steps.append(cfg.steps)
    return np.asarray(steps)


def run_simulation(
    cfg: SimulationConfig | None = None, progress: Callable[[str, int], None] | None = None
) -> SimulationResult:
    """Train every sampler on every seed's world; time each to the baseline's final accuracy."""
    cfg = cfg if cfg is not None else SimulationConfig()
    names = list(dict.fromkeys((cfg.baseline, *cfg.samplers)))
    steps = eval_steps(cfg)
    curves = {name: np.zeros((len(cfg.seeds), len(steps))) for name in names}
    prompts = {name: np.zeros((len(cfg.seeds), len(steps)), dtype=np.int64) for name in names}
    traces: dict[str, WindowTrace] = {}
    seconds = dict.fromkeys(names, 0.0)
    window_frac: dict[str, list[float]] = {}
    n_rows = []
    for i, seed in enumerate(cfg.seeds):
        world = make_world(cfg, seed)
        n_rows.append(len(world.cluster_of))
        for name in names:
            start = time.perf_counter()
            sampler = SAMPLER_FACTORIES[name](world, cfg, seed)
            run = train(world, sampler, cfg, seed)
            curves[name][i], prompts[name][i] = run.accuracy, run.prompts
            seconds[name] += time.perf_counter() - start
            if run.trace is not None and i == 0:
                traces[name] = run.trace
            if isinstance(sampler, ADSSampler):
                window_frac.setdefault(name, []).append(sampler.metrics()["ads/window_frac_mean"])
            if progress is not None:
                progress(name, seed)
    targets = curves[cfg.baseline][:, -1].copy()
    to_target = {
        name: [_first_reach(steps, c, t) for c, t in zip(curves[name], targets, strict=True)] for name in names
    }
    return SimulationResult(
        config=cfg,
        eval_steps=steps,
        curves=curves,
        targets=targets,
        steps_to_target=to_target,
        seconds=seconds,
        n_rows=n_rows,
        window_frac={name: float(np.mean(v)) for name, v in window_frac.items()},
        prompts=prompts,
        window_traces=traces,
    )


def _first_reach(steps: np.ndarray, curve: np.ndarray, target: float) -> int | None:
    hit = np.flatnonzero(curve >= target)
    return int(steps[hit[0]]) if len(hit) else None


def summary_rows(result: SimulationResult) -> list[dict[str, object]]:
    """One row per sampler: final accuracy; steps and prompts rolled out to the baseline's final accuracy, as
    means, and as ratios to the baseline's with their spread over seeds (min and max)."""
    rows = []
    for name, curve in result.curves.items():
        reached = [s for s in result.steps_to_target[name] if s is not None]
        prompts = [
            result.prompts_to_target(name, i) for i, s in enumerate(result.steps_to_target[name]) if s is not None
        ]
        ratios, rollout_ratios = result.seed_ratios(name), result.seed_rollout_ratios(name)
        rows.append(
            {
                "sampler": name,
                "final_mean": float(curve[:, -1].mean()),
                "final_sd": float(curve[:, -1].std()),
                "steps_mean": float(np.mean(reached)) if reached else None,
                "prompts_mean": float(np.mean(prompts)) if prompts else None,
                "reached": len(reached),
                "seeds": len(curve),
                "ratio": float(ratios.mean()),
                "ratio_min": float(ratios.min()),
                "ratio_max": float(ratios.max()),
                "ratio_is_lower_bound": result.missed(name) > 0,
                "prompts_per_step": float(result.prompts[name][:, -1].mean() / result.config.steps),
                "rollout_ratio": float(rollout_ratios.mean()),
                "rollout_ratio_min": float(rollout_ratios.min()),
                "rollout_ratio_max": float(rollout_ratios.max()),
                "seconds": result.seconds[name],
            }
        )
    return rows


def spread(row: dict[str, object], key: str) -> str:
    """``0.39 (0.33-0.45)``: a summary row's mean ratio and its min and max over seeds, ≥ for a lower bound."""
    bound = "≥" if row["ratio_is_lower_bound"] else ""
    return f"{bound}{row[key]:.2f} ({row[key + '_min']:.2f}-{row[key + '_max']:.2f})"


def format_report(result: SimulationResult, columns: int = 9) -> str:
    """Plain-text report: mean accuracy curves, then steps to the baseline's final accuracy."""
    return format_curves(result, columns) + "\n\n" + format_summary(result)


def format_curves(result: SimulationResult, columns: int = 9) -> str:
    """The run's setting and the mean held-out accuracy of each sampler at ``columns`` steps."""
    cfg = result.config
    lines = [
        f"Synthetic GRPO learner '{cfg.learner}' (a model, not evidence about LLMs): {len(cfg.seeds)} seeds, "
        f"{cfg.steps} steps, "
        f"batch {cfg.ads.batch_size}, {cfg.n_clusters} clusters, |D| ~ {int(np.mean(result.n_rows))}, "
        f"n={cfg.n_rollouts}, transfer={cfg.transfer}, rank noise sd={cfg.rank_noise_sd}",
        "",
        "Held-out accuracy (mean over seeds) by step:",
    ]
    pick = np.unique(np.linspace(0, len(result.eval_steps) - 1, columns).round().astype(int))
    width = max(len(n) for n in result.curves) + 2
    lines.append("step".ljust(width) + "".join(f"{result.eval_steps[j]:>8d}" for j in pick))
    for name, curve in result.curves.items():
        mean = curve.mean(axis=0)
        lines.append(name.ljust(width) + "".join(f"{mean[j]:8.3f}" for j in pick))
    return "\n".join(lines)


def format_summary(result: SimulationResult) -> str:
    """Final accuracy, steps to the baseline's final accuracy and their ratio, one line per sampler."""
    cfg = result.config
    width = max(len(n) for n in result.curves) + 2
    lines = [
        f"Steps and prompts rolled out to reach {cfg.baseline}'s final accuracy (per-seed target, mean "
        f"{result.targets.mean():.3f}):",
        "sampler".ljust(width)
        + f"{'final acc':>16}{'steps':>7}{'reached':>9}{'steps ratio (min-max)':>24}{'prompts':>9}"
        + f"{'rollout ratio (min-max)':>26}{'prompts/step':>14}{'time s':>8}",
    ]
    for row in summary_rows(result):
        steps = f"{row['steps_mean']:.0f}" if row["steps_mean"] is not None else "-"
        prompts = f"{row['prompts_mean']:.0f}" if row["prompts_mean"] is not None else "-"
        lines.append(
            str(row["sampler"]).ljust(width)
            + f"{row['final_mean']:>9.3f} ± {row['final_sd']:.3f}"
            + f"{steps:>7}{row['reached']:>6}/{row['seeds']:<2}{spread(row, 'ratio'):>24}{prompts:>9}"
            + f"{spread(row, 'rollout_ratio'):>26}{row['prompts_per_step']:>14.1f}{row['seconds']:>8.1f}"
        )
    lines.append(
        "steps, prompts: means over the seeds that reached it; ratio = mean over seeds of steps(sampler) / "
        "steps(baseline), (min-max) over seeds; ≥: some seeds never reached it (counted as the full run)."
    )
    lines.append("rollout ratio = the same in prompts rolled out (dynamic sampling also pays for dropped groups).")
    if result.window_frac:
        fracs = ", ".join(f"{k} {v:.3f}" for k, v in result.window_frac.items())
        lines.append(f"ADS mean window position at the end (0 = easiest, 1 = hardest): {fracs}")
    return "\n".join(lines)
