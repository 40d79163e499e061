"""What a refresh changed: rows added, removed and edited against the previous build, rows scored and
reused, how stable the cluster ids stayed, each stage's wall time, and whether training was started.

The previous build's row identities are read from OUT/final before the build overwrites it; a row is
identified by its `sample_id` (the normalised question) and its content by the row score cache key.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import polars as pl

from ads_core import storage
from ads_core.stages.base import StageContext
from ads_core.stages.report.validity import summary_line
from ads_core.stages.score.cache import row_key
from ads_core.storage import manifest as mf


def row_identities(final_uri: str) -> pl.DataFrame | None:
    """(sample_id, row_key) of a finished build's rows, or None when there is no intact one."""
    if mf.verify(mf.stage_dir_of(final_uri)) is None:
        return None
    table = storage.read_parquet(final_uri, columns=["sample_id", "extra_info"])
    info = table.column("extra_info").combine_chunks()
    keys = [
        row_key(q, s, a)
        for q, s, a in zip(
            info.field("question").to_pylist(),
            info.field("solution").to_pylist(),
            info.field("answer").to_pylist(),
            strict=True,
        )
    ]
    return pl.DataFrame({"sample_id": table.column("sample_id").to_pylist(), "row_key": keys})


@dataclass
class RefreshSummary:
    rows: int = 0
    rows_added: int | None = None  # None: no previous build to compare with
    rows_removed: int | None = None
    rows_changed: int | None = None
    rows_scored: int = 0
    rows_reused: int = 0
    cluster_path: str | None = None  # fresh | warm_start | refit
    kept_id_share: float | None = None
    stage_seconds: dict[str, float] = field(default_factory=dict)
    stage_states: dict[str, str] = field(default_factory=dict)
    training: str = "not requested"
    contaminated: int | None = None  # final rows matching a packaged eval set (report.decontaminate)
    label_agreement: dict[str, Any] | None = None  # clusters vs the source's own labels (column, nmi, values)
    difficulty_validity: dict[str, Any] | None = None  # Spearman of each difficulty measure vs the source's labels
    same_as_eval: list[str] = field(default_factory=list)  # the eval sets the training set is (decontam.same_as_eval)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def lines(self) -> list[str]:
        """Plain-text lines for the CLI's last lines and the UI artifact."""
        if self.rows_added is None:
            change = f"{self.rows} rows (no previous build to compare with)"
        else:
            change = (
                f"{self.rows} rows: {self.rows_added} added, {self.rows_removed} removed, "
                f"{self.rows_changed} edited since the previous build"
            )
        stability = self.cluster_path or "n/a"
        if self.kept_id_share is not None:
            stability += f", {100 * self.kept_id_share:.1f}% of rows kept their cluster_id"
        times = ", ".join(f"{name} {seconds:.1f}s" for name, seconds in self.stage_seconds.items())
        lines = [
            f"refresh: {change}",
            f"scored {self.rows_scored} rows, reused {self.rows_reused} from the score cache",
            f"clusters: {stability}",
            f"stage times: {times}",
            f"training: {self.training}",
        ]
        if self.contaminated is not None:
            same = "; ".join(self.same_as_eval)
            lines.append(
                f"decontamination: {self.contaminated} rows match an eval question (OUT/report/decontamination.json)"
                + (f": {same}, so evaluating on it measures recall, not learning" if same else "")
            )
        if self.label_agreement:
            agreement = self.label_agreement
            lines.append(
                f"clusters vs the source's {agreement['column']} labels: NMI {agreement['nmi']:.3f} "
                f"({agreement['values']} labels)"
            )
        if self.difficulty_validity:
            line = summary_line(self.difficulty_validity)
            lines += [line] if line else []
        return lines


def rows_scored_by_this_build(ctx: StageContext, stage_states: dict[str, str]) -> int:
    """Rows the model scored in this build: shard runs it reused (Cached) scored none."""
    total = 0
    for index, uri in enumerate(ctx.shard_uris("score_shard")):
        if stage_states.get(f"score-shard-{index}", "Completed") != "Cached":
            total += int(mf.read(mf.stage_dir_of(uri)).counts.get("rows_scored", 0))
    return total


def summarize(
    ctx: StageContext,
    previous: pl.DataFrame | None,
    stage_seconds: dict[str, float],
    stage_states: dict[str, str],
    training: str,
) -> RefreshSummary:
    """The summary of the build that just wrote ctx.out, against `previous` (its row identities)."""
    current = row_identities(ctx.uri("final"))
    rows = 0 if current is None else current.height
    scored = rows_scored_by_this_build(ctx, stage_states)
    refresh = mf.read(ctx.stage_dir("assignments")).extra.get("refresh") or {}
    report = mf.read(ctx.stage_dir("report"))
    if stage_states.get("cluster") == "Cached":
        refresh = {**refresh, "path": f"unchanged ({refresh.get('path', 'cached')} earlier)", "kept_id_share": 1.0}
    summary = RefreshSummary(
        rows=rows,
        rows_scored=scored,
        rows_reused=rows - scored,
        cluster_path=refresh.get("path"),
        kept_id_share=refresh.get("kept_id_share"),
        stage_seconds={k: round(v, 2) for k, v in stage_seconds.items()},
        stage_states=dict(stage_states),
        training=training,
        contaminated=report.counts.get("contaminated"),
        label_agreement=report.extra.get("label_agreement"),
        difficulty_validity=report.extra.get("difficulty_validity"),
        same_as_eval=list(report.extra.get("same_as_eval") or []),
    )
    if previous is not None and current is not None:
        joined = previous.join(current, on="sample_id", how="full", suffix="_new", coalesce=True)
        summary.rows_added = int(joined["row_key"].is_null().sum())
        summary.rows_removed = int(joined["row_key_new"].is_null().sum())
        both = joined.drop_nulls()
        summary.rows_changed = int((both["row_key"] != both["row_key_new"]).sum())
    return summary
