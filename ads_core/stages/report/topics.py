"""What a cluster holds, besides its top terms: the problems nearest its centroid, and how well the clusters
agree with labels the source set carries itself (MATH's `subject`), as normalised mutual information (NMI).

The representatives are the rows with the smallest `distance_to_centroid` (OUT/clusters/assignments.parquet,
in the space K-Means ran in), so they are the cluster's most typical problems, not its easiest or hardest.
Labels are read from `extra_info.source_meta`, where the format stage keeps a source row's other short
fields: the first of `LABEL_COLUMNS` that nearly every row has, with between 2 and `rows // 5` values (at
most 100), is the set's own grouping. NMI is 1 when clusters and labels split the rows the same way, 0 when
they are independent; how high it gets depends on the policy model's embeddings.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from ads_core import storage

LABEL_COLUMNS = ("subject", "type", "category", "topic", "domain", "folder")
MIN_LABELLED = 0.9  # share of rows that must carry the label


def representatives(final: pl.DataFrame, assignments_uri: str, per_cluster: int) -> dict[str, list[dict[str, Any]]]:
    """cluster_id (a JSON key) -> its `per_cluster` rows nearest the centroid: sample_id, question, distance."""
    if per_cluster <= 0:
        return {str(c): [] for c in final["cluster_id"].unique().sort().to_list()}
    distances = pl.from_arrow(storage.read_parquet(assignments_uri, columns=["sample_id", "distance_to_centroid"]))
    nearest = (
        final.select("sample_id", "cluster_id", "question")
        .join(distances, on="sample_id", how="left")
        .sort(["cluster_id", "distance_to_centroid", "sample_id"], nulls_last=True)
        .group_by("cluster_id", maintain_order=True)
        .head(per_cluster)
    )
    out: dict[str, list[dict[str, Any]]] = {}
    for row in nearest.iter_rows(named=True):
        distance = row["distance_to_centroid"]
        out.setdefault(str(row["cluster_id"]), []).append(
            {
                "sample_id": int(row["sample_id"]),
                "question": row["question"],
                "distance": None if distance is None else round(float(distance), 6),
            }
        )
    return out


def source_labels(final: pl.DataFrame) -> tuple[str, pl.Series] | None:
    """(column, one label per row) for the source's own grouping, or None when the rows carry none."""
    if "source_meta" not in final.columns or final.height == 0:
        return None
    meta = final["source_meta"].cast(pl.String)
    for column in LABEL_COLUMNS:
        values = meta.str.json_path_match(f"$.{column}")
        present = values.drop_nulls()
        distinct = present.n_unique()
        if len(present) >= MIN_LABELLED * final.height and 2 <= distinct <= min(100, final.height // 5):
            return column, values
    return None


def label_agreement(final: pl.DataFrame) -> dict[str, Any] | None:
    """The clusters against the source's own labels: the column, NMI, and each cluster's commonest label."""
    from sklearn.metrics import normalized_mutual_info_score

    found = source_labels(final)
    if found is None:
        return None
    column, labels = found
    frame = pl.DataFrame({"cluster_id": final["cluster_id"], "label": labels}).drop_nulls()
    nmi = normalized_mutual_info_score(frame["label"].to_list(), frame["cluster_id"].to_list())
    counts = (
        frame.group_by("cluster_id", "label")
        .len()
        .sort(["cluster_id", "len", "label"], descending=[False, True, False])
    )
    sizes = dict(frame.group_by("cluster_id").len().iter_rows())
    top = {
        str(cid): {"value": label, "share": round(n / sizes[cid], 4)}
        for cid, label, n in counts.group_by("cluster_id", maintain_order=True).first().iter_rows()
    }
    return {
        "column": column,
        "values": int(frame["label"].n_unique()),
        "rows": frame.height,
        "nmi": round(float(nmi), 4),
        "top": top,
    }
