"""The report stage: what a person looks at after a build, written to OUT/report/ like any artifact.

- build_report.png: difficulty histogram, cluster sizes, and the 2-D projection coloured by cluster;
- quantiles.json: difficulty quantiles per cluster;
- examples.md: the easiest, median and hardest problem of each cluster.
The Prefect flow shows these in the UI (tasks/publish.py); `ads build` prints a text summary.
"""

from __future__ import annotations

import io
from typing import Any

import polars as pl

from ads_core import manifest as mf
from ads_core import storage
from ads_core.config import ReportConfig

STAGE = "report"
VERSION = "1"
REPORT_DIR = "report"
PLOT_NAME = "build_report.png"
QUANTILES_NAME = "quantiles.json"
EXAMPLES_NAME = "examples.md"
QUANTILES = (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0)


def md_text(text: str | None, limit: int = 220) -> str:
    """One line of user text, safe inside markdown."""
    flat = " ".join(str(text or "").split())
    if len(flat) > limit:
        flat = flat[: limit - 1] + "…"
    for ch in "\\`*_[]<>|#":
        flat = flat.replace(ch, "\\" + ch)
    return flat


def render_plot(final: pl.DataFrame, assignments: pl.DataFrame, title: str) -> bytes:
    """PNG: difficulty histogram, cluster sizes, and the 2-D PCA projection coloured by cluster."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.6), dpi=100)
    try:
        axes[0].hist(final["difficulty"].to_numpy(), bins=min(40, max(5, final.height // 10)), color="#3b6ea8")
        axes[0].set(title="difficulty (token-mean NLL)", xlabel="difficulty", ylabel="rows")
        sizes = final.group_by("cluster_id").len().sort("cluster_id")
        axes[1].bar(sizes["cluster_id"].to_numpy(), sizes["len"].to_numpy(), color="#d08c3a")
        axes[1].set(title=f"cluster sizes (k={sizes.height})", xlabel="cluster_id", ylabel="rows")
        axes[1].xaxis.set_major_locator(MaxNLocator(integer=True))
        axes[2].scatter(assignments["pc1"].to_numpy(), assignments["pc2"].to_numpy(),
                        c=assignments["cluster_id"].to_numpy(), cmap="tab20", s=6, alpha=0.8)
        axes[2].set(title="embeddings: first two PCA components", xlabel="pc1", ylabel="pc2")
        fig.suptitle(title)
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png", metadata={"Software": None})  # no version stamp: same bytes every run
        return buf.getvalue()
    finally:
        plt.close(fig)


def difficulty_quantiles(final: pl.DataFrame) -> list[dict[str, Any]]:
    aggs = [pl.len().alias("size"), pl.col("difficulty").mean().alias("mean")]
    aggs += [pl.col("difficulty").quantile(q).alias(f"q{int(q * 100):02d}") for q in QUANTILES]
    table = final.group_by("cluster_id").agg(aggs).sort("cluster_id")
    return [{k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}
            for row in table.iter_rows(named=True)]


def examples_markdown(final: pl.DataFrame, dataset: str, cfg: ReportConfig) -> str:
    """A few example problems per cluster: the easiest, the median and the hardest."""
    lines = [f"# {md_text(dataset)}: example problems per cluster", "",
             "Easiest, median and hardest problem of each cluster (difficulty = token-mean NLL of the "
             "reference solution under the policy model).", ""]
    clusters = final["cluster_id"].unique().sort().to_list()
    for cid in clusters[: cfg.max_example_clusters]:
        rows = final.filter(pl.col("cluster_id") == cid).sort("rank_in_cluster")
        picks: dict[int, str] = {}
        for label, idx in (("easiest", 0), ("median", rows.height // 2), ("hardest", rows.height - 1)):
            picks.setdefault(idx, label)
        lines.append(f"## cluster {cid} ({rows.height} rows)")
        for idx, label in list(picks.items())[: cfg.examples_per_cluster]:
            row = rows.row(idx, named=True)
            lines.append(f"- **{label}** (difficulty {row['difficulty']:.3f}): {md_text(row['question'])}")
        lines.append("")
    if len(clusters) > cfg.max_example_clusters:
        lines.append(f"_{len(clusters) - cfg.max_example_clusters} more clusters not shown._")
    return "\n".join(lines)


def read_final_for_report(final_uri: str) -> pl.DataFrame:
    final = pl.from_arrow(storage.read_parquet(final_uri, columns=["cluster_id", "rank_in_cluster", "difficulty",
                                                                   "extra_info"]))
    return final.with_columns(pl.col("extra_info").struct.field("question").alias("question")).drop("extra_info")


def write_report(final_uri: str, assignments_uri: str, out: str, cfg: ReportConfig, dataset: str) -> mf.Manifest:
    """Write OUT/report/{build_report.png, quantiles.json, examples.md} and their manifest."""
    final = read_final_for_report(final_uri)
    assignments = pl.from_arrow(storage.read_parquet(assignments_uri, columns=["cluster_id", "pc1", "pc2"]))
    directory = storage.join(out, REPORT_DIR)
    uris = {name: storage.join(directory, file) for name, file in
            (("plot", PLOT_NAME), ("quantiles", QUANTILES_NAME), ("examples", EXAMPLES_NAME))}
    storage.write_bytes(uris["plot"], render_plot(final, assignments, f"ads-build {dataset}: {final.height} rows"))
    storage.write_json(uris["quantiles"], difficulty_quantiles(final))
    storage.write_bytes(uris["examples"], examples_markdown(final, dataset, cfg).encode())
    manifest = mf.Manifest(
        stage=STAGE,
        inputs={"final": mf.input_entry(final_uri), "assignments": mf.input_entry(assignments_uri)},
        outputs={name: mf.output_entry(uri) for name, uri in uris.items()},
        config=cfg.model_dump(),
        code_version=mf.version_of(STAGE, VERSION),
        counts={"rows": final.height, "clusters": final["cluster_id"].n_unique()},
        extra={"dataset": dataset},
    )
    mf.write(directory, manifest)
    return manifest
