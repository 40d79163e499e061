"""What makes a training run never lose a step: one run per run folder (`lock`), checkpoints with a manifest that
a resume verifies (`checkpoints`; the manifest itself is `ads_core.storage.manifest`), and a record of what fixes
the run's trajectory that a resume must match (`identity`). Trainer-neutral; TRL uses all three
(`ads_core.train.trl.run`, `ads_core.train.trl.trainer`)."""
