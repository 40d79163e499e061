"""Measure a policy the way the ADS paper does: k samples per problem, graded, mean@k / pass@k / maj@k.

The entry points live in ``ads_core.evaluation.api``:

* ``evaluate_policy(model, tokenizer, sets, cfg)``: an already loaded policy (validation during training), no
  files written; returns per set ``{"mean_at_k", "pass_at_k", "maj_at_k", "n", "k", "ci_low", "ci_high"}``.
* ``evaluate_model(path, sets, cfg, out=...)``: a model folder (``ads eval``): loads it with the configured
  backend and writes ``completions.parquet``, ``summary.json`` and ``table.md``, resuming a killed run.

``sets`` (``catalog``, ``problems``, ``choice``, ``templates``, ``decontam``, ``writer``) names, writes and reads
eval sets, ``backends`` (``hf``, ``vllm_backend``) generate, ``runner`` grades with ``ads_core.grading`` and keeps
the files, ``metrics`` computes the numbers, ``report`` draws the table, ``policies`` finds the model a run,
checkpoint or hub id names.
"""
