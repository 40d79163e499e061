"""How a cluster's window of difficulty-sorted positions moves after an update, for both windows.

* reference (`shift_window`): a row whose success is below the keep band moves one position easier, one
  above it one position harder; stayers keep their slot and movers take the nearest free one.
* frontier (`frontier_bands`, `fresh_positions`, `move_frontier`): each cluster has a band centre u in
  [0, 1] (a share of its easy-to-hard order); a visit takes the B least-trained rows of the band, nearest the
  centre first, and the centre moves by ``gain * (band success - target)``, so a band far from the target
  jumps instead of crawling.
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


def fresh_positions(uses: np.ndarray, lo: int, center: float, mini_cluster_size: int) -> np.ndarray:
    """``mini_cluster_size`` ascending positions of a band: the least-trained rows first and, among those, the
    nearest to the band centre (``center``, a position). ``uses[j]`` counts the trainings of position lo + j.

    So a band first offers the rows closest to the frontier, then, as they are used, fresh rows further out
    before any row repeats. A band narrower than the slot (a cluster with fewer rows) cycles through all of it.
    """
    width, b = len(uses), mini_cluster_size
    if width <= b:
        return lo + np.arange(b, dtype=np.int64) % max(width, 1)
    fresh = np.flatnonzero(uses == uses.min())
    if len(fresh) >= b:  # the usual case: the b nearest of the least-trained rows, a contiguous run of them
        i = int(np.searchsorted(fresh, center - lo))
        starts = np.arange(max(0, i - b), min(i, len(fresh) - b) + 1)
        reach = np.maximum(center - lo - fresh[starts], fresh[starts + b - 1] - (center - lo))
        first = int(starts[np.argmin(reach)])
        return lo + fresh[first : first + b].astype(np.int64)
    positions = lo + np.arange(width, dtype=np.int64)
    distance = np.abs(positions - center)  # < width + 1 <= the multiplier: uses dominate, distance breaks ties
    key = uses * (2.0 * (width + 1)) + distance
    return np.sort(positions[np.argpartition(key, b - 1)[:b]])


def move_frontier(
    centers: np.ndarray, band_success: np.ndarray, gain: float, target: float, movable: np.ndarray
) -> np.ndarray:
    """New band centres: a proportional step of ``gain * (success - target)`` of the cluster, kept in [0, 1].

    Far from the target the band jumps (a solved band moves ``gain / 2`` of the cluster at once); near it, it
    settles. Clusters that are not ``movable`` (no feedback, or a band that is the whole cluster) stay.
    """
    moved = np.clip(centers + gain * (band_success - target), 0.0, 1.0)
    return np.where(movable, moved, centers)
