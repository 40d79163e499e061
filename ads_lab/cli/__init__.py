"""The lab's `ads` commands (`ads demo`, `ads simulate`), registered through the entry point group
``ads_pipeline.commands`` (pyproject.toml)."""
