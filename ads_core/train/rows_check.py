"""Row checks on a training artifact, before any trainer sees it: a bad row is refused at plan time (and by
`--dry-run`), in one line with its row number and field, instead of crashing step 1 or training on nonsense.

What is refused (row numbers are 0-based positions in the Parquet file):
- a prompt with no messages, or whose messages hold no text at all (an empty prompt);
- a message whose ``content`` is missing (null);
- a missing or empty ground truth (null, blank, or an empty JSON list): it would be graded against nothing;
- sampler columns that break the contract: per cluster, ``rank_in_cluster`` is exactly 0..n-1 (whole numbers,
  no gap, no repeat; all-zero ranks would silently remove the easy-to-hard order), and ``cluster_size``, where
  present, equals the cluster's row count.

Everything is vectorised (pyarrow compute and numpy), so a million rows take well under a second.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


class RowError(ValueError):
    """One bad row (or a count of them): the message names the row number and the field."""


def _first(mask: np.ndarray) -> tuple[int, int]:
    """(first row where mask holds, how many rows it holds for)."""
    bad = np.flatnonzero(mask)
    return int(bad[0]), int(bad.size)


def _more(count: int) -> str:
    return f" (and {count - 1} more row{'s' if count > 2 else ''})" if count > 1 else ""


def check_prompts(prompt: pa.ChunkedArray) -> None:
    """Every prompt has at least one message, every message has content, and some message holds text."""
    prompt = prompt.combine_chunks() if isinstance(prompt, pa.ChunkedArray) else prompt
    n = len(prompt)
    lengths = pc.fill_null(pc.list_value_length(prompt), 0).to_numpy(zero_copy_only=False)
    if (lengths == 0).any():
        row, count = _first(lengths == 0)
        raise RowError(f"row {row}: field 'prompt' is empty (no messages){_more(count)}")
    flat = pc.list_flatten(prompt)
    parents = pc.list_parent_indices(prompt).to_numpy(zero_copy_only=False)
    content = flat.field("content")
    null_content = content.is_null().to_numpy(zero_copy_only=False)
    if null_content.any():
        bad = np.zeros(n, dtype=bool)
        bad[parents[null_content]] = True
        row, count = _first(bad)
        message = int(np.flatnonzero(null_content[parents == row])[0])
        raise RowError(f"row {row}: field 'prompt' message {message} has no content{_more(count)}")
    has_text = pc.greater(pc.utf8_length(pc.utf8_trim_whitespace(content.cast(pa.string()))), 0)
    with_text = np.zeros(n, dtype=bool)
    with_text[parents[has_text.to_numpy(zero_copy_only=False)]] = True
    if not with_text.all():
        row, count = _first(~with_text)
        raise RowError(f"row {row}: field 'prompt' has no text (every message is blank){_more(count)}")


def check_ground_truths(ground_truth: pa.ChunkedArray) -> None:
    """Every row has a non-empty ground truth (a blank string or ``[]`` counts as missing)."""
    gt = ground_truth.combine_chunks() if isinstance(ground_truth, pa.ChunkedArray) else ground_truth
    if not (pa.types.is_string(gt.type) or pa.types.is_large_string(gt.type)):
        gt = gt.cast(pa.string())
    trimmed = pc.utf8_trim_whitespace(gt)
    missing = pc.or_kleene(pc.equal(pc.utf8_length(trimmed), 0), pc.equal(trimmed, "[]"))
    mask = pc.fill_null(missing, True).to_numpy(zero_copy_only=False)
    if mask.any():
        row, count = _first(mask)
        what = "null" if gt[row].as_py() is None else f"empty ({gt[row].as_py()!r})"
        raise RowError(f"row {row}: field 'reward_model.ground_truth' is {what}{_more(count)}")


def check_sampler_columns(cluster_id: np.ndarray, rank: np.ndarray, cluster_size: np.ndarray | None = None) -> None:
    """Per cluster, ranks are exactly 0..n-1; ``cluster_size`` (when given) is the cluster's row count."""
    rank = np.asarray(rank)
    cluster_id = np.asarray(cluster_id).astype(np.int64)
    if rank.dtype.kind == "f":
        fractional = ~np.isfinite(rank) | (rank != np.round(rank))
        if fractional.any():
            row, count = _first(fractional)
            raise RowError(
                f"row {row}: field 'rank_in_cluster' is {float(rank[row])!r}, not a whole number{_more(count)}"
            )
    rank = rank.astype(np.int64)
    if (rank < 0).any():
        row, count = _first(rank < 0)
        raise RowError(f"row {row}: field 'rank_in_cluster' is negative ({rank[row]}){_more(count)}")
    order = np.lexsort((rank, cluster_id))
    cid_sorted, rank_sorted = cluster_id[order], rank[order]
    starts = np.flatnonzero(np.r_[True, cid_sorted[1:] != cid_sorted[:-1]])
    sizes = np.diff(np.r_[starts, len(order)])
    counts = np.empty(len(order), dtype=np.int64)
    counts[order] = np.repeat(sizes, sizes)  # each row's cluster size, in file order
    outside = rank >= counts
    if outside.any():
        row, count = _first(outside)
        raise RowError(
            f"row {row}: field 'rank_in_cluster' is {rank[row]}, outside 0..{counts[row] - 1} for cluster "
            f"{cluster_id[row]}'s {counts[row]} rows (ranks are 0..n-1, easiest first){_more(count)}; rebuild with "
            "`ads build`"
        )
    repeated = np.zeros(len(order), dtype=bool)
    repeated[order[1:]] = (rank_sorted[1:] == rank_sorted[:-1]) & (cid_sorted[1:] == cid_sorted[:-1])
    if repeated.any():
        row, count = _first(repeated)
        raise RowError(
            f"row {row}: field 'rank_in_cluster' repeats rank {rank[row]} in cluster {cluster_id[row]} (each of its "
            f"{counts[row]} rows needs its own rank 0..{counts[row] - 1}, easiest first){_more(count)}; rebuild "
            "with `ads build`"
        )
    if cluster_size is not None:
        sizes_given = np.asarray(cluster_size).astype(np.int64)
        off = sizes_given != counts
        if off.any():
            row, count = _first(off)
            raise RowError(
                f"row {row}: field 'cluster_size' is {int(sizes_given[row])}, but cluster {int(cluster_id[row])} "
                f"has {int(counts[row])} rows{_more(count)}"
            )


def check_rows(table: pa.Table) -> None:
    """All the checks above on a table holding ``prompt``, ``reward_model``, ``cluster_id``, ``rank_in_cluster``
    (and ``cluster_size`` when the artifact has it)."""
    check_prompts(table.column("prompt"))
    check_ground_truths(table.column("reward_model").combine_chunks().field("ground_truth"))
    sizes = table.column("cluster_size").to_numpy() if "cluster_size" in table.column_names else None
    check_sampler_columns(table.column("cluster_id").to_numpy(), table.column("rank_in_cluster").to_numpy(), sizes)
