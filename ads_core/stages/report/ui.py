"""What the report stage shows in a run's UI: the difficulty-validity table (when the source labels difficulty),
difficulty quantiles, example problems, the report picture, and
each cluster's top terms, the problem nearest its centroid and its commonest source label (a table), and the
terms as a grid picture. Computed here from the stage's outputs; the Prefect layer only renders the items.
"""

from __future__ import annotations

from typing import Any

from ads_core import storage
from ads_core.common.text import md_text
from ads_core.stages.base import StageContext, UIItem
from ads_core.stages.report.validity import describe_measure
from ads_core.storage import manifest as mf


def cluster_terms_rows(
    terms: dict[str, list[dict[str, Any]]], quantiles: list[dict[str, Any]], topics: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """One table row per cluster: its size, top terms (best first), median difficulty, the problem nearest its
    centroid and, when the source labels its rows, its commonest label."""
    by_id = {int(q["cluster_id"]): q for q in quantiles}
    nearest = (topics or {}).get("representatives", {})
    labels = (topics or {}).get("labels") or {}
    rows = []
    for cid, key in sorted((int(k), k) for k in terms):
        row: dict[str, Any] = {
            "cluster_id": cid,
            "size": int(by_id.get(cid, {}).get("size", 0)),
            "top_terms": ", ".join(t["term"] for t in terms[key]),
            "median_difficulty": by_id.get(cid, {}).get("q50"),
        }
        if labels:
            top = labels.get("top", {}).get(key)
            row[f"top_{labels['column']}"] = f"{top['value']} ({top['share']:.0%})" if top else ""
        reps = nearest.get(key) or []
        row["nearest_the_centroid"] = _short(reps[0]["question"]) if reps else ""
        rows.append(row)
    return rows


def _short(text: str, limit: int = 200) -> str:
    one = " ".join(str(text).split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


def validity_items(manifest: mf.Manifest) -> list[UIItem]:
    """The difficulty-validity table (validity.py), when the build's source says how hard its rows are."""
    if "validity" not in manifest.outputs:
        return []
    section = storage.read_json(manifest.output_uri("validity"))
    clusters = section.get("clusters")
    nmi = f"; clusters vs {clusters['label']}: NMI {clusters['nmi']:.3f}" if clusters else ""
    return [
        UIItem(
            "table",
            "difficulty-validity",
            section["spearman"],
            f"difficulty validity: Spearman rho of each measure (scored: {section['scored']}) against the source's "
            f"own labels and the other measures{nmi}",
        )
    ]


def ui_items(ctx: StageContext, manifest: mf.Manifest) -> list[UIItem]:
    quantiles = storage.read_json(manifest.output_uri("quantiles"))
    terms = storage.read_json(manifest.output_uri("terms"))
    topics = storage.read_json(manifest.output_uri("topics")) if "topics" in manifest.outputs else None
    labels = (topics or {}).get("labels")
    agreement = f"; clusters vs the source's {labels['column']} labels: NMI {labels['nmi']:.3f}" if labels else ""
    name = md_text(ctx.dataset)
    return validity_items(manifest) + [
        UIItem(
            "table",
            "difficulty-quantiles",
            quantiles,
            f"difficulty quantiles per cluster ({describe_measure(manifest.extra.get('difficulty_measure'))})",
        ),
        UIItem(
            "markdown",
            "cluster-examples",
            storage.read_bytes(manifest.output_uri("examples")).decode(),
            "example problems per cluster",
        ),
        UIItem(
            "image",
            "report-plot",
            (f"{name}: build report", storage.read_bytes(manifest.output_uri("plot")), manifest.output_uri("plot")),
            "difficulty histogram, cluster sizes, 2-D t-SNE map by cluster and by difficulty",
        ),
        UIItem(
            "table",
            "cluster-terms",
            cluster_terms_rows(terms, quantiles, topics),
            "top terms per cluster by class-based TF-IDF over the question text (no stop words, names or numbers; "
            "words common to most clusters left out), size, median difficulty, the problem nearest the centroid"
            + agreement,
        ),
        UIItem(
            "image",
            "cluster-terms-image",
            (
                f"{name}: top terms per cluster",
                storage.read_bytes(manifest.output_uri("terms_plot")),
                manifest.output_uri("terms_plot"),
            ),
            "top c-TF-IDF terms per cluster, one cell per cluster",
        ),
    ]
