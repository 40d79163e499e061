"""How a cluster's window of difficulty-sorted positions moves after an update.

The reference rule (`shift_window`): a row whose success is below the keep band moves one position
easier, one above it one position harder; stayers keep their slot and movers take the nearest free one.
"""

from __future__ import annotations


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
