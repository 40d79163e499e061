"""The lab: the research tooling beside the product. `ads demo`, `ads simulate`, the pre-declared studies
(docs/study.md, docs/experiment2.md) and the benches that run them.

It may import the product (ads_core, ads_prefect, ads_cli); the product never imports it, not even lazily
(tests/test_layers.py). The `ads` command finds the lab's commands through the entry point group
``ads_pipeline.commands``. Inside, the same one-way rule as the product's: ``cli`` -> ``flows`` (Prefect) -> the
rest, which never imports Prefect.
"""
