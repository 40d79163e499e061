"""Rollout replay (the RR of DOTS+RR) as a TRL trainer extension: a FIFO buffer of whole mixed-reward groups with
their behaviour log-probs (``buffer``), the decoupled importance-corrected clipped loss (``loss``), its options
(``options``) and the trainer that mixes replayed groups into each step (``trainer``). verl refuses replay.
DOTS's other trainer-side part, the reference rollouts its sampler kind needs, is ``ads_core.train.trl.reference``."""
