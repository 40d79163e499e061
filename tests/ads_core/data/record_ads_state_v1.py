"""Save a version-1 ADS state (before the frontier window) for the legacy-load test.

The state must come from the old code, so run it against commit 7c1d165's tree:

    mkdir -p /tmp/old_ads && git archive 7c1d165 ads_core | tar -x -C /tmp/old_ads
    PYTHONPATH=/tmp/old_ads .venv/bin/python tests/ads_core/data/record_ads_state_v1.py

It replays the first 15 recorded steps of the ``defaults_small_b`` scenario of ``ads_reference_batches.json``
(checking each batch) and writes the sampler's ``state_dict`` to ``ads_state_v1.json``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

import ads_core.sampler.ads as ads_module
from ads_core.config.sampler import ADSSamplerConfig
from ads_core.sampler.ads import ADSSampler

HERE = Path(__file__).parent
STEPS = 15


def main() -> None:
    assert "old_ads" in ads_module.__file__, f"run against the old tree, not {ads_module.__file__}"
    rec = json.loads((HERE / "ads_reference_batches.json").read_text())["scenarios"]["defaults_small_b"]
    cfg = ADSSamplerConfig(**rec["config"])
    s = ADSSampler(np.array(rec["cluster_ids"]), np.array(rec["rank_in_cluster"]), cfg)
    for batch, success in list(zip(rec["batches"], rec["success"], strict=True))[:STEPS]:
        assert s.next_batch().tolist() == batch
        s.update(np.array(batch), np.array(success))
    state = s.state_dict()
    assert state["version"] == 1 and "window" not in state
    doc = {"recorded_at_commit": "7c1d165", "scenario": "defaults_small_b", "after_steps": STEPS, "state": state}
    (HERE / "ads_state_v1.json").write_text(json.dumps(doc, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()
