"""The garbage collector's young-generation threshold in our own batch processes (the `ads` commands, the lab's
worker processes and the two study scripts), set by their entry points, never at import.

CPython 3.11 runs a young collection every 700 net allocations of container objects, and a full one whenever the
objects that survived since the last full collection outnumber a quarter of the older ones. Importing torch,
transformers and TRL allocates millions of long-lived objects and almost no garbage cycles, so a training process
walked its whole heap about nine times while it imported (measured with `gc.callbacks`: `ads train` of 4 tiny
steps spent 1.6 of its 9.5 CPU-s collecting). With a young threshold of 50,000 the same run took 10.8 CPU-s
against 11.5 (four runs each, alternated; docs/benchmarks.md), with the same peak RSS. Reference cycles are still
collected, only in larger batches.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 50_000


def freeze_what_is_loaded() -> None:
    """Collect once, then move every object alive now to the collector's permanent generation, which no later
    collection walks. For a process about to run many jobs after importing what they need: those modules live as
    long as the process and hold no garbage, while each full collection walked them again (accelerate makes one
    at every `Trainer.train`). Objects frozen here are still freed by reference counting; only a cycle among them
    would stay, so call it before the jobs' own objects exist."""
    gc.collect()
    gc.freeze()


def tune_gc_for_batch_work() -> None:
    """Raise the young generation's threshold to YOUNG_THRESHOLD; the older generations keep theirs."""
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
