"""How a cluster's window of difficulty-sorted positions moves after an update, for both windows.

* reference (`shift_window`): a row whose success is below the keep band moves one position easier, one
  above it one position harder; stayers keep their slot and movers take the nearest free one.
* frontier (`frontier_bands`, `frontier_positions`, `move_frontier`): each cluster has a band centre u in
  [0, 1] (a share of its easy-to-hard order); a visit draws B rows spread over the band, and the centre
  moves by ``gain * (band success - target)``, so a band far from the target jumps instead of crawling.
"""

from __future__ import annotations

import numpy as np


def shift_window(window: list[int], easier: list[int], harder: list[int], size: int) -> list[int]:
    """The reference's window move: stayers keep their slot, then easier movers (ascending) and harder
    movers (descending) each take the free slot nearest to one step in their direction.

    ``window`` holds the current positions, ``easier`` / ``harder`` the subsets classified too hard / too
    easy, and ``size`` the cluster size. Returns the new sorted positions (same count, all distinct).
    """
    if size <= len(window):
        return sorted(window)
    occupied = set(window).difference(easier, harder)
    last = size - 1
    for pos in sorted(easier):
        want = pos - 1 if pos > 0 else 0
        occupied.add(want if want not in occupied else _nearest_free(want, -1, occupied, size, pos))
    for pos in sorted(harder, reverse=True):
        want = pos + 1 if pos < last else last
        occupied.add(want if want not in occupied else _nearest_free(want, 1, occupied, size, pos))
    return sorted(occupied)


def _nearest_free(desired: int, direction: int, occupied: set[int], size: int, fallback: int) -> int:
    """Clamp, then search outwards, trying the move's direction first at each radius."""
    desired = min(max(desired, 0), size - 1)
    if desired not in occupied:
        return desired
    for radius in range(1, size):
        for cand in (desired + direction * radius, desired - direction * radius):
            if 0 <= cand < size and cand not in occupied:
                return cand
    return fallback  # unreachable while the window is smaller than the cluster


def frontier_bands(
    centers: np.ndarray, sizes: np.ndarray, mini_cluster_size: int, band: float
) -> tuple[np.ndarray, np.ndarray]:
    """The frontier window's band of each cluster: (first position, width).

    The band holds ``band`` of the cluster, at least ``mini_cluster_size`` rows (the whole cluster when it is
    smaller) and is centred on ``center * (size - 1)``, shifted inwards at either end.
    """
    width = np.minimum(sizes, np.maximum(mini_cluster_size, np.rint(band * sizes))).astype(np.int64)
    lo = np.clip(np.rint(centers * (sizes - 1) - width / 2.0), 0, sizes - width).astype(np.int64)
    return lo, width


def frontier_positions(lo: np.ndarray, width: np.ndarray, mini_cluster_size: int, jitter: np.ndarray) -> np.ndarray:
    """``mini_cluster_size`` positions per band, ascending: slot j draws one position from its stratum.

    The band is cut into ``mini_cluster_size`` strata of whole positions, so the positions are distinct and
    spread over the band, and a band wider than a batch slot offers fresh rows on every visit. ``jitter``
    (uniform in [0, 1), one per slot) picks inside each stratum. A band narrower than the slot (a cluster with
    fewer rows) cycles through its positions, as the reference does.
    """
    b = mini_cluster_size
    cols = np.arange(b + 1, dtype=np.int64)
    edges = (cols[None, :] * width[:, None]) // b  # (A, b + 1) stratum edges, ascending, ends at width
    strata = edges[:, 1:] - edges[:, :-1]
    spread = edges[:, :-1] + np.floor(jitter * strata).astype(np.int64)
    cycled = cols[None, :b] % np.maximum(width[:, None], 1)
    return lo[:, None] + np.where((width >= b)[:, None], spread, cycled)


def move_frontier(
    centers: np.ndarray, band_success: np.ndarray, gain: float, target: float, movable: np.ndarray
) -> np.ndarray:
    """New band centres: a proportional step of ``gain * (success - target)`` of the cluster, kept in [0, 1].

    Far from the target the band jumps (a solved band moves ``gain / 2`` of the cluster at once); near it, it
    settles. Clusters that are not ``movable`` (no feedback, or a band that is the whole cluster) stay.
    """
    moved = np.clip(centers + gain * (band_success - target), 0.0, 1.0)
    return np.where(movable, moved, centers)
