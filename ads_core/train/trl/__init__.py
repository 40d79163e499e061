"""GRPO with the ADS sampler (or a baseline) in Hugging Face TRL's loop, unmodified TRL 1.16 (CPU or one node).

* ``options``: TRL's options (the `trl` section of the config tree), registered with the trainer (``entry``);
* ``plan``: TRL's part of a plan (the batch layout: one sampler batch per generation batch per optimizer step);
* ``feed``: the artifact's rows as the dataset TRL reads (prompt messages, ground truth, row, sample_id), the
  prompt sampler TRL iterates (draws each generation batch lazily from the live sampler, with TRL's repeat
  semantics) and the feedback path (each prompt's mean correctness back into ``update``);
* ``validate``: the live policy validated on the eval sets during training (``ads eval``'s code);
* ``trainer``: the ``GRPOTrainer`` subclass (sampler hook, feedback after the gathered rewards, sampler state in
  every checkpoint, one ``steps.jsonl`` line per optimizer step), made with everything it needs (``RunSettings``);
* ``hooks``: the run's callbacks (learning rate, trackers, completions, processes' agreement) and step notices;
* ``reference``: reference rollouts by the current policy, the need ``reference_rollouts`` of kind ``dots``;
* ``replay``: rollout replay, a trainer extension (``ReplayGRPOTrainer``);
* ``steps``: the per-step log (written as the run goes, cut back to the checkpoint on resume);
* ``run``: ``run_trl(plan)`` builds everything, resumes from the newest complete checkpoint, trains.

Importing this package imports neither torch nor TRL; the modules above do (``options``, ``plan`` and ``steps``
don't).
"""

SUPPORTED_TRL = ">=1.16,<1.17"
