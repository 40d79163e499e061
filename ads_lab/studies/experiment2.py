"""Experiment 2 (docs/study.md): the oracle artifact, the gates measured before any GRPO run, and the pilot's
declared rules (the number of seeds, the static arm's share, the accuracy target).

* `write_oracle_artifact`: the build's artifact with clusters = the true families and rank = the true level (ties
  in the task's order), the ADS rule with perfect inputs: the positive control;
* `gates`: the regime's properties, each with its rule and measured value, from the start regime (step 0: the
  warmed-up policy's G samples per training problem) and the built artifact; a failed gate voids the experiment;
* `pilot_rules`: what the pilot sets, by rules fixed in the design.

The analysis and the decision rule are in ``ads_lab.studies.experiment2_analysis``.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ads_core import storage
from ads_lab.config import experiment2 as e2
from ads_lab.config.study import StudyConfig

ORACLE_FILE = "oracle/train.parquet"
ORACLE_MARKER = "oracle/source.json"
FORMAT_GATE = 0.80  # share of step-0 completions in the rewarded \boxed{} form, every learnable family
LEVEL_GATE = 0.10  # level-1 minus level-4 step-0 success, every learnable family (and a negative Spearman rho)
REACH_GATE = 0.005  # step-0 success of an out-of-reach family at most this
BUDGET_CPU_SECONDS = 2 * 90 * 60  # the whole experiment: 90 minutes of 2 cores
SD_MARGIN = 1.3  # a 5-seed sd is a poor estimate: scaled up before sizing
TARGET_HALF_WIDTH = 0.03
Z_PRIMARY = 2.241403  # 97.5% two-sided


def row_labels(table: pa.Table) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Each artifact row's family, level and training-set position (``extra_info.source_meta``/``source_row``)."""
    extra = table.column("extra_info").combine_chunks()
    meta = [json.loads(m) for m in extra.field("source_meta").to_pylist()]
    families = [str(m["family"]) for m in meta]
    levels = np.array([int(m["level"]) for m in meta], dtype=np.int64)
    return families, levels, np.asarray(extra.field("source_row").to_numpy(zero_copy_only=False), dtype=np.int64)


def oracle_columns(families: list[str], levels: np.ndarray, order: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(cluster id = the family's index in sorted order, rank = position by (level, ORDER) inside the family)."""
    names = sorted(set(families))
    cluster = np.array([names.index(f) for f in families], dtype=np.int64)
    rank = np.empty(len(families), dtype=np.int64)
    for c in range(len(names)):
        rows = np.flatnonzero(cluster == c)
        ranked = rows[np.lexsort((order[rows], levels[rows]))]
        rank[ranked] = np.arange(len(ranked))
    return cluster, rank


def write_oracle_artifact(final_uri: str, out: str) -> str:
    """OUT/oracle/train.parquet: FINAL_URI's rows with `cluster_id`, `rank_in_cluster`, `cluster_size` (and their
    copies in `extra_info`) from the true family and level; rewritten only when FINAL_URI's bytes changed."""
    target, marker = Path(out) / ORACLE_FILE, Path(out) / ORACLE_MARKER
    digest = hashlib.sha256(Path(final_uri).read_bytes()).hexdigest()
    try:
        if target.is_file() and json.loads(marker.read_text())["source_sha256"] == digest:
            return str(target)
    except (OSError, ValueError, KeyError):
        pass
    table = storage.read_parquet(final_uri)
    families, levels, source_row = row_labels(table)
    cluster, rank = oracle_columns(families, levels, source_row)
    sizes = np.bincount(cluster)[cluster]
    extra = table.column("extra_info").combine_chunks()
    fields = {f.name: extra.field(f.name) for f in extra.type}
    fields["cluster_id"] = pa.array(cluster, pa.int64())
    fields["rank_in_cluster"] = pa.array(rank, pa.int64())
    replaced = {
        "cluster_id": pa.array(cluster, table.schema.field("cluster_id").type),
        "rank_in_cluster": pa.array(rank, pa.int64()),
        "cluster_size": pa.array(sizes, pa.int64()),
        "extra_info": pa.StructArray.from_arrays(list(fields.values()), names=list(fields)),
    }
    for name, column in replaced.items():
        table = table.set_column(table.schema.get_field_index(name), name, column)
    target.parent.mkdir(parents=True, exist_ok=True)
    storage.write_parquet(str(target), table)
    storage.write_json(str(marker), {"source": str(Path(final_uri).resolve()), "source_sha256": digest})
    return str(target)


def spearman(x: Any, y: Any) -> float | None:
    """Spearman's rho (average ranks for ties); None when either side is constant."""
    from scipy.stats import spearmanr

    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if len(a) < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return None
    return float(spearmanr(a, b).statistic)


def gates(cfg: StudyConfig, start: dict[str, Any], artifact_uri: str, problems: list[Any]) -> dict[str, Any]:
    """Every gate of the design, with its rule, what was measured and whether it passed; and the difficulty's
    validity per family (Spearman against level and against step-0 success), published whatever it is."""
    per = start["per_problem"]
    g = start["samples"]
    solved = np.asarray(per["solved"], dtype=np.float64) / g
    boxed = np.asarray(per["boxed"], dtype=np.float64) / g
    family = np.array([p.family for p in problems])
    level = np.array([p.level for p in problems])
    learnable = [f for f in cfg.task.families if f not in cfg.unreachable]
    out: list[dict[str, Any]] = []

    def gate(name: str, rule: str, value: Any, passed: bool) -> None:
        out.append({"gate": name, "rule": rule, "measured": value, "passed": bool(passed)})

    shares = {f: float(boxed[family == f].mean()) for f in learnable}
    gate(
        "format",
        f"step-0 share of \\boxed{{}} answers >= {FORMAT_GATE} in every learnable family",
        shares,
        all(v >= FORMAT_GATE for v in shares.values()),
    )
    falls = {}
    for f in learnable:
        mine = family == f
        rho = spearman(level[mine], solved[mine])
        drop = float(solved[mine & (level == 1)].mean() - solved[mine & (level == 4)].mean())
        falls[f] = {"rho_level_success": rho, "level1_minus_level4": drop}
    gate(
        "level",
        f"in every learnable family: Spearman(level, step-0 success) < 0 and level 1 - level 4 >= {LEVEL_GATE}",
        falls,
        all(
            v["rho_level_success"] is not None and v["rho_level_success"] < 0 and v["level1_minus_level4"] >= LEVEL_GATE
            for v in falls.values()
        ),
    )
    worked = sum("\\boxed{" in p.solution and not p.solution.startswith("\\boxed{") for p in problems)
    gate(
        "worked solutions",
        "every reference solution is steps, then \\boxed{}",
        f"{worked}/{len(problems)}",
        worked == len(problems),
    )
    reach = {f: float(solved[family == f].mean()) for f in cfg.unreachable}
    gate(
        "out of reach",
        f"at least one family with step-0 success <= {REACH_GATE}",
        reach,
        bool(reach) and all(v <= REACH_GATE for v in reach.values()),
    )
    passes = pass_gate(cfg, len(problems))
    gate(
        "passes",
        "each reset period lets a window reach its cluster's middle (visits >= size / 2, build and "
        "oracle clusters) and the run spans >= 2 passes",
        passes,
        passes["ok"],
    )
    gate(
        "fresh task seed",
        f"task seed not one of {list(e2.USED_TASK_SEEDS)}",
        cfg.task.seed,
        cfg.task.seed not in e2.USED_TASK_SEEDS,
    )
    return {"gates": out, "passed": all(x["passed"] for x in out), "validity": validity(artifact_uri, solved)}


def pass_gate(cfg: StudyConfig, rows: int) -> dict[str, Any]:
    """Visits per cluster per reset period against the positions a window needs to reach the middle."""
    from ads_core.config.sampler import ADSSamplerConfig
    from ads_core.train.trl.options import TRL_MINI_CLUSTER_SIZE

    active = ADSSamplerConfig().active_clusters  # TRL's ADS batch at the arms' documented defaults: 4 x 2 rows
    batch = active * TRL_MINI_CLUSTER_SIZE
    reset = max(1, rows // batch)
    out: dict[str, Any] = {"reset_every": reset, "passes": cfg.steps * batch / rows}
    ok = out["passes"] >= 2
    for name, k in (("build", cfg.num_clusters), ("oracle", len(cfg.task.families))):
        visits, middle = reset * active / k, rows / k / 2
        out[name] = {"clusters": k, "visits_per_reset": visits, "positions_to_middle": middle}
        ok = ok and visits >= middle
    out["ok"] = ok
    return out


def validity(artifact_uri: str, solved: np.ndarray) -> dict[str, dict[str, float | None]]:
    """Per family: Spearman of the scored difficulty against the level and against step-0 success."""
    table = storage.read_parquet(artifact_uri, columns=["extra_info", "difficulty"])
    families, levels, source_row = row_labels(table)
    difficulty = table.column("difficulty").to_numpy()
    success = solved[source_row]
    fam = np.array(families)
    return {
        f: {
            "rho_level": spearman(difficulty[fam == f], levels[fam == f]),
            "rho_step0_success": spearman(difficulty[fam == f], success[fam == f]),
        }
        for f in sorted(set(families))
    }


def pilot_rules(runs: dict[str, list[Any]], learnable: list[str], rows: int, cost: list[float]) -> dict[str, Any]:
    """The declared rules applied to the pilot's runs: N (power rule, capped by the budget, at least
    MIN_REPORTED_SEEDS), the static arm's share (where ADS's windows sat: distinct rows its runs drew, as a share,
    rounded up to 0.05) and the accuracy target (halfway from step 0 to uniform's final accuracy)."""
    from ads_core.evaluation.compare import AVERAGE

    def final(run: Any) -> float:
        return run.curve(AVERAGE, learnable)[-1].accuracy

    base = [final(r) for r in runs["uniform"]]
    sds = {}
    for name in e2.PRIMARY:
        diffs = [final(r) - b for r, b in zip(runs[name], base, strict=True)]
        sds[name] = float(np.std(diffs, ddof=1))
    sd = max(sds.values()) * SD_MARGIN
    needed = max(2, math.ceil((Z_PRIMARY * sd / TARGET_HALF_WIDTH) ** 2))
    per_run = float(np.mean(cost))
    pilot_runs, sweep_runs = sum(len(v) for v in runs.values()), len(e2.SWEEP) * len(e2.SWEEP_SEEDS)
    budget = math.floor((BUDGET_CPU_SECONDS / per_run - pilot_runs - sweep_runs) / len(e2.ARMS))
    n = max(e2.MIN_REPORTED_SEEDS, min(needed, budget))
    drawn = [len({row for s in r.steps for row in s.get("rows", [])}) / rows for r in runs["ads"]]
    share = min(1.0, math.ceil(float(np.mean(drawn)) * 20 - 1e-9) / 20)
    start = float(np.mean([r.curve(AVERAGE, learnable)[0].accuracy for r in runs["uniform"]]))
    target = start + 0.5 * (float(np.mean(base)) - start)
    return {
        "sd_primary": sds,
        "sd_with_margin": sd,
        "seeds_needed": needed,
        "cpu_seconds_per_run": per_run,
        "seeds_budget": budget,
        "seeds": n,
        "over_budget": n > budget,
        "ads_rows_drawn_share": float(np.mean(drawn)),
        "easiest_share": share,
        "step0_accuracy": start,
        "uniform_final": float(np.mean(base)),
        "accuracy_target": round(target, 4),
    }
