"""`ads demo`: a synthetic task a tiny policy learns on a CPU, built with the real pipeline, trained with ADS and
with uniform sampling (TRL), validated and compared with ``ads eval``'s and ``ads compare``'s code.

* ``task``: the arithmetic task (families = semantic groups, operand count = latent difficulty);
* ``policy``: the tiny policy and its supervised warm-up;
* ``runs``: preparing, the build's settings, one training run, the workers, the comparison;
* ``report``: what the demo prints (its verdict from the paired interval, ``study_analysis.paired_verdict``);
* ``start``, ``study``, ``study_analysis``, ``study_plots``: the study of docs/study.md (``bench/study.py``), the
  demo's task at full size: the step-0 regime, its runs, the paired analysis, the window traces.

The orchestration is the ``ads-demo`` Prefect flow (``ads_prefect.flows.ads_demo``); this package never imports
Prefect.
"""
