"""The report stage: what a person looks at after a build, written to OUT/report/ like any artifact.

- build_report.png: difficulty histogram, cluster sizes, and a 2-D t-SNE map of the embeddings (a seeded
  sample, PCA-reduced first, as the ADS reference's visual script does) coloured by cluster and by difficulty;
- quantiles.json: difficulty quantiles per cluster;
- examples.md: the problems nearest each cluster's centroid, then its easiest, median and hardest one;
- cluster_terms.json / cluster_terms.png: each cluster's top c-TF-IDF terms (terms.py);
- topics.json: the problems nearest each centroid and, when the source labels its rows (MATH's `subject`), the
  clusters' agreement with those labels (NMI; also in the manifest's `extra.label_agreement`) (topics.py);
- difficulty_validity.json: when the source says how hard its rows are (MATH's `level`), Spearman between each
  difficulty measure and it, and the clusters' NMI (validity.py; also a section of examples.md and a UI table).
Every output is byte-deterministic for the same inputs (fixed seeds, one thread, no version stamps in PNGs),
so a rerun writes the same hashes. The Prefect flow shows these in the UI (tasks/publish.py); `ads build`
prints a text summary.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import polars as pl

from ads_core import storage
from ads_core.common.text import md_text
from ads_core.config.build import ReportConfig
from ads_core.stages.base import Stage, StageContext
from ads_core.stages.report.embedding_map import palette, read_embeddings, sample_ids, tsne_map
from ads_core.stages.report.terms import class_tfidf, render_terms_grid
from ads_core.stages.report.topics import label_agreement, representatives
from ads_core.stages.report.ui import ui_items
from ads_core.stages.report.validity import (
    describe_measure,
    measure_columns,
    numeric_labels,
    validity,
    validity_summary,
)
from ads_core.stages.report.validity import markdown as validity_markdown
from ads_core.storage import manifest as mf

VERSION = "6"  # 6: the difficulty is named from the final manifest's record
STAGE_DIR = "report"
# manifest output name -> file in the report folder (the stage declares these as its outputs)
REPORT_FILES = {
    "plot": "build_report.png",
    "quantiles": "quantiles.json",
    "examples": "examples.md",
    "terms": "cluster_terms.json",
    "terms_plot": "cluster_terms.png",
    "topics": "topics.json",
    "decontamination": "decontamination.json",
    "validity": "difficulty_validity.json",
}
QUANTILES = (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0)


def render_plot(
    final: pl.DataFrame, points: pl.DataFrame, method: str, colors: dict[int, Any], title: str, measure: str
) -> bytes:
    """PNG: difficulty histogram and cluster sizes on top; the 2-D map by cluster and by difficulty below."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, axes = plt.subplots(2, 2, figsize=(14, 11), dpi=100)
    try:
        (hist, bars), (by_cluster, by_difficulty) = axes
        hist.hist(final["difficulty"].to_numpy(), bins=min(40, max(5, final.height // 10)), color="#3b6ea8")
        hist.set(title=f"difficulty: {describe_measure(measure)}", xlabel="difficulty", ylabel="rows")
        sizes = final.group_by("cluster_id").len().sort("cluster_id")
        ids = sizes["cluster_id"].to_list()
        bars.bar(ids, sizes["len"].to_numpy(), color=[colors[c] for c in ids])
        bars.set(title=f"cluster sizes (k={sizes.height})", xlabel="cluster_id", ylabel="rows")
        bars.xaxis.set_major_locator(MaxNLocator(integer=True))
        x, y = points["x"].to_numpy(), points["y"].to_numpy()
        by_cluster.scatter(x, y, c=[colors[c] for c in points["cluster_id"].to_list()], s=7, alpha=0.8, linewidths=0)
        centres = points.group_by("cluster_id").agg(pl.col("x").median(), pl.col("y").median()).sort("cluster_id")
        for cid, cx, cy in centres.iter_rows():
            by_cluster.text(cx, cy, str(cid), fontsize=7, ha="center", va="center", alpha=0.85)
        shown = f"{points.height} of {final.height} rows" if points.height < final.height else f"{points.height} rows"
        by_cluster.set(title=f"embeddings, {method} ({shown}): by cluster", xticks=[], yticks=[])
        dots = by_difficulty.scatter(
            x, y, c=points["difficulty"].to_numpy(), cmap="viridis", s=7, alpha=0.8, linewidths=0
        )
        fig.colorbar(dots, ax=by_difficulty, label="difficulty")
        by_difficulty.set(title=f"embeddings, {method}: by difficulty", xticks=[], yticks=[])
        fig.suptitle(title)
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png", metadata={"Software": None})  # no version stamp: same bytes every run
        return buf.getvalue()
    finally:
        plt.close(fig)


def map_points(final: pl.DataFrame, scores_uri: str, cfg: ReportConfig) -> tuple[pl.DataFrame, str]:
    """The sampled rows with their map coordinates (x, y), cluster_id and difficulty, and the method used."""
    ids = sample_ids(final["sample_id"].to_numpy(), cfg.map_sample, cfg.map_seed)
    found, embeddings = read_embeddings(scores_uri, ids)
    if len(found) != len(ids):
        missing = np.setdiff1d(ids, found)[:5].tolist()
        raise ValueError(
            f"{scores_uri}: {len(ids) - len(found)} sample_id(s) of the final artifact have no "
            f"embedding (e.g. {missing}); rebuild with force_from=score"
        )
    coords, method = tsne_map(embeddings, cfg.map_perplexity, cfg.map_iterations, cfg.map_seed)
    rows = pl.DataFrame({"sample_id": found, "x": coords[:, 0], "y": coords[:, 1]})
    meta = final.select("sample_id", "cluster_id", "difficulty")
    return rows.join(meta, on="sample_id", how="left").sort("sample_id"), method


def difficulty_quantiles(final: pl.DataFrame) -> list[dict[str, Any]]:
    aggs = [pl.len().alias("size"), pl.col("difficulty").mean().alias("mean")]
    aggs += [pl.col("difficulty").quantile(q).alias(f"q{int(q * 100):02d}") for q in QUANTILES]
    table = final.group_by("cluster_id").agg(aggs).sort("cluster_id")
    return [
        {k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()} for row in table.iter_rows(named=True)
    ]


def examples_markdown(
    final: pl.DataFrame, dataset: str, cfg: ReportConfig, topics: dict[str, Any] | None = None, measure: str = ""
) -> str:
    """Per cluster: the problems nearest its centroid (what it typically holds), its commonest source label
    when there is one, then its easiest, median and hardest problem; MEASURE names the difficulty."""
    topics = topics or {}
    nearest, labels = topics.get("representatives", {}), topics.get("labels") or {}
    lines = [
        f"# {md_text(dataset)}: example problems per cluster",
        "",
        "The problems nearest each cluster's centroid, then its easiest, median and hardest problem "
        f"(difficulty = {describe_measure(measure)}, under the policy model).",
        "",
    ]
    if labels:
        lines += [
            f"Clusters against the source's own `{md_text(labels['column'])}` labels ({labels['values']} values): "
            f"NMI **{labels['nmi']:.3f}** (1: the same grouping, 0: independent).",
            "",
        ]
    clusters = final["cluster_id"].unique().sort().to_list()
    for cid in clusters[: cfg.max_example_clusters]:
        rows = final.filter(pl.col("cluster_id") == cid).sort("rank_in_cluster")
        picks: dict[int, str] = {}
        for label, idx in (("easiest", 0), ("median", rows.height // 2), ("hardest", rows.height - 1)):
            picks.setdefault(idx, label)
        lines.append(f"## cluster {cid} ({rows.height} rows)")
        top = labels.get("top", {}).get(str(cid))
        if top:
            lines.append(f"- {md_text(labels['column'])}: mostly **{md_text(str(top['value']))}** ({top['share']:.0%})")
        for rep in nearest.get(str(cid), []):
            lines.append(f"- **nearest the centroid**: {md_text(rep['question'])}")
        for idx, label in list(picks.items())[: cfg.examples_per_cluster]:
            row = rows.row(idx, named=True)
            lines.append(f"- **{label}** (difficulty {row['difficulty']:.3f}): {md_text(row['question'])}")
        lines.append("")
    if len(clusters) > cfg.max_example_clusters:
        lines.append(f"_{len(clusters) - cfg.max_example_clusters} more clusters not shown._")
    return "\n".join(lines)


def read_final_for_report(final_uri: str) -> pl.DataFrame:
    """The final rows' ids, clusters, ranks and difficulty, with the question and (when present) source_meta."""
    table = storage.read_parquet(
        final_uri, columns=["sample_id", "cluster_id", "rank_in_cluster", "difficulty", "extra_info"]
    )
    info = table.schema.field("extra_info").type
    fields = [pl.col("extra_info").struct.field("question").alias("question")]
    if any(info.field(i).name == "source_meta" for i in range(info.num_fields)):
        fields.append(pl.col("extra_info").struct.field("source_meta").alias("source_meta"))
    return pl.from_arrow(table).with_columns(fields).drop("extra_info")


def recorded_measure(final_uri: str) -> str | None:
    """The difficulty measure the final artifact's manifest records (extra.difficulty_measure), None if none."""
    try:
        return mf.read(mf.stage_dir_of(final_uri)).extra.get("difficulty_measure")
    except (OSError, ValueError):
        return None


def with_target_tokens(final: pl.DataFrame, scores_uri: str) -> pl.DataFrame:
    """FINAL with each row's scored token count (`n_target_tokens`) when the scores keep it."""
    try:
        tokens = storage.read_parquet(scores_uri, columns=["sample_id", "n_target_tokens"])
    except ValueError:  # scores written without it (older builds, hand-made inputs)
        return final
    return final.join(pl.from_arrow(tokens), on="sample_id", how="left")


def cluster_terms(final: pl.DataFrame, cfg: ReportConfig) -> dict[str, list[dict[str, Any]]]:
    """cluster_id (as a JSON key) -> its top c-TF-IDF terms with their weights."""
    top = class_tfidf(
        final.select("cluster_id", "question"), cfg.terms_per_cluster, cfg.terms_min_rows, cfg.terms_min_lift
    )
    return {str(cid): terms for cid, terms in top.items()}


def write_report(
    final_uri: str,
    assignments_uri: str,
    scores_uri: str,
    directory: str,
    cfg: ReportConfig,
    dataset: str,
    scored: str = "nll_mean",
) -> mf.Manifest:
    """Write the report files (`REPORT_FILES`) into DIRECTORY, and the decontamination check if configured.

    The map needs the embeddings (SCORES_URI); the representatives need each row's distance to its centroid
    (ASSIGNMENTS_URI, the clustering the final artifact carries). SCORED names the difficulty measure the build
    scored (score.difficulty); the final artifact's own record of it (its manifest's extra.difficulty_measure) wins.
    """
    final = read_final_for_report(final_uri)
    scored = recorded_measure(final_uri) or scored
    if not storage.exists(scores_uri):
        raise FileNotFoundError(
            f"{scores_uri}: the report's embedding map needs the scores file; rebuild with force_from=score"
        )
    uris = {name: storage.join(directory, file) for name, file in REPORT_FILES.items()}
    colors = palette(final["cluster_id"].unique().to_list())
    points, method = map_points(final, scores_uri, cfg)
    title = f"ads-build {dataset}: {final.height} rows"
    storage.write_bytes(uris["plot"], render_plot(final, points, method, colors, title, scored))
    quantiles = difficulty_quantiles(final)
    storage.write_json(uris["quantiles"], quantiles)
    agreement = label_agreement(final)
    topics = {"representatives": representatives(final, assignments_uri, cfg.representatives), "labels": agreement}
    storage.write_json(uris["topics"], topics)
    measures = measure_columns(with_target_tokens(final, scores_uri), scored)
    section = validity(measures, numeric_labels(final), agreement)
    examples = examples_markdown(final, dataset, cfg, topics, scored)
    if section:
        examples += "\n" + validity_markdown(section, scored)
    storage.write_bytes(uris["examples"], examples.encode())
    terms = cluster_terms(final, cfg)
    storage.write_json(uris["terms"], terms)
    sizes = {int(q["cluster_id"]): int(q["size"]) for q in quantiles}
    medians = {int(q["cluster_id"]): float(q["q50"]) for q in quantiles}
    grid = render_terms_grid(
        {int(c): t for c, t in terms.items()},
        sizes,
        medians,
        colors,
        f"{dataset}: top terms per cluster (c-TF-IDF)",
        cfg.terms_grid_clusters,
    )
    storage.write_bytes(uris["terms_plot"], grid)
    written = [name for name in REPORT_FILES if name not in ("decontamination", "validity")]
    if section:
        storage.write_json(uris["validity"], {"scored": scored, **section})
        written.append("validity")
    counts = {"rows": final.height, "clusters": final["cluster_id"].n_unique(), "map_rows": points.height}
    same_as_eval: list[str] = []
    if cfg.decontaminate:
        counts["contaminated"], same_as_eval = write_decontamination(final_uri, uris["decontamination"])
        written.append("decontamination")
    manifest = mf.Manifest(
        stage="report",
        inputs={
            "final": mf.input_entry(final_uri),
            "assignments": mf.input_entry(assignments_uri),
            "scores": mf.input_entry(scores_uri),
        },
        outputs={name: mf.output_entry(uris[name]) for name in written},
        config=cfg.model_dump(),
        code_version=mf.version_of("report", VERSION),
        counts=counts,
        extra={
            "dataset": dataset,
            "difficulty_measure": scored,
            "map_method": method,
            **({"label_agreement": {k: v for k, v in agreement.items() if k != "top"}} if agreement else {}),
            **({"difficulty_validity": validity_summary(section, scored)} if section else {}),
            **({"same_as_eval": same_as_eval} if same_as_eval else {}),
        },
    )
    mf.write(directory, manifest)
    return manifest


def write_decontamination(final_uri: str, uri: str) -> tuple[int, list[str]]:
    """The build's check: the final set against the packaged eval sets, written to URI (no paths in the
    file, so it does not depend on OUT); returns the number of contaminated rows and a sentence for each eval
    set the training set is (``decontam.same_as_eval``)."""
    import tempfile

    from ads_core.evaluation.sets.decontam import decontaminate, same_as_eval
    from ads_core.evaluation.sets.writer import write_eval_sets

    with tempfile.TemporaryDirectory(prefix="ads-decontam-") as tmp:
        sets = write_eval_sets(tmp)
        found = decontaminate(final_uri, {name: s.uri for name, s in sets.items()}, max_examples=5)
    report = {k: v for k, v in found.to_dict().items() if k not in ("train_uri", "output_uri", "rejects_uri")}
    storage.write_json(uri, report)
    return found.contaminated, same_as_eval(report)


# ---------------------------------------------------------------------------------------------
# the declaration


def run(ctx: StageContext, _: int | None) -> mf.Manifest:
    with ctx.progress("report", None):
        return write_report(
            ctx.uri("final"),
            ctx.uri("assignments"),
            ctx.uri("scores"),
            ctx.stage_dir("report"),
            ctx.config.report,
            ctx.dataset,
            ctx.config.score.difficulty,
        )


STAGE = Stage(
    name="report",
    section="report",
    inputs=("final", "assignments", "scores"),
    outputs={("report" if name == "plot" else name): f"{STAGE_DIR}/{file}" for name, file in REPORT_FILES.items()},
    version=VERSION,
    run=run,
    ui=ui_items,
    key_config=lambda cfg: {**cfg.report.model_dump(), "dataset": cfg.format.name, "difficulty": cfg.score.difficulty},
    recorded=lambda ctx, _: {
        **{f"config.{k}": v for k, v in ctx.config.report.model_dump().items()},
        "extra.dataset": ctx.dataset,
    },
)
