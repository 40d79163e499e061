"""The ADS sampler in unmodified verl 0.9.x, driven from the outside.

verl 0.8 removed its curriculum-sampler plug-in, so this package brings its own pieces:

* ``config/ads_grpo.yaml``: verl's ``ppo_trainer`` config plus the integration's run settings (Hydra entry
  point ``python -m ads_core.train.verl.main``);
* ``sampler_file``: RUN_DIR/sampler.json, the run's resolved sampler, the one way it reaches the verl task;
* ``sampler.ADSVerlSampler``: a torch ``Sampler[int]`` over the training ``RLHFDataset`` that emits whole
  ADS batches and keeps its state in verl's ``data.pt`` (read weights-only) and in ``ads_sampler.json``;
* ``trainer.ADSRayPPOTrainer``: a minimal ``RayPPOTrainer`` subclass that feeds each step's rollouts back
  to the sampler before the checkpoint, logs ``ads/*`` and restores the sampler on every resume;
* ``task_runner.ADSTaskRunner``: verl's v0 ``TaskRunner.run`` with the sampler and the subclass swapped in;
* ``plan`` (overrides, command, resolved config of a neutral ``TrainPlan``) and ``launch`` (fail fast, run).

Importing this package does not import verl; the modules above do.
"""

SUPPORTED_VERL = ">=0.9.1,<0.10"
