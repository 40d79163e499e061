"""`ads demo`: a synthetic task a tiny policy learns on a CPU, built with the real pipeline, trained with ADS and
with uniform sampling (TRL), validated and compared with ``ads eval``'s and ``ads compare``'s code.

* ``task``: the arithmetic task (families = semantic groups, operand count = latent difficulty);
* ``policy``: the tiny policy and its supervised warm-up;
* ``runs``: preparing, the build's settings, one training run, the workers, the comparison;
* ``report``: what the demo prints beside ``ads compare``'s tables.

The studies (``ads_lab.studies``) run the same task at full size. The orchestration is the ``ads-demo`` Prefect
flow (``ads_lab.flows.ads_demo``); this package never imports Prefect.
"""
