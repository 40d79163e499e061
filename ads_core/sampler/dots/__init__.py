"""DOTS (difficulty-targeted online data selection, arXiv 2506.05316): the trained adaptive-difficulty predictor
(``predictor``), its selection rule (``selection``), the sampler kind that runs a selection round every mu steps
(``sampler``), its options (``options``) and the predictor artifact (``artifact``). Training the predictor (label
rollouts of source policies, fit, measure: torch, models, the grader) is ``ads_core.train.dots``. Rollout replay,
the other half of DOTS+RR, is a trainer extension: ``ads_core.train.trl.replay``. docs/sampler.md says where this
departs from the paper and the official code."""
