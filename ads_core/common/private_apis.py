"""Every reach into a third party's private names, in one place (data only: this module imports none of them).

Each entry names the object (`module:qualname`), the private names of it we use (attributes we read or set, and
private methods we call or override), where and why. The contract test
`tests/integrations/test_private_apis.py` checks each against the installed packages and fails with the entry's
own line when an upgrade moves one, and it scans the source of `ads_core`, `ads_prefect` and `ads_cli` so a new
reach that is not listed here fails too. TRL's and verl's hooks also have their own, deeper contract tests
(`test_trl_contract.py`, `test_verl_contract.py`). The version ranges in pyproject.toml are the ones tested.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["class", "attribute", "instance_attribute"]


@dataclass(frozen=True)
class PrivateApi:
    package: str  # the distribution (its import name)
    owner: str  # "module:Qualname" of the object whose private names we use (the module itself when no colon)
    names: tuple[str, ...]  # the private names: attributes of `owner` (class attributes, methods, properties)
    used_in: str  # where we reach for them
    why: str
    kind: Kind = "attribute"  # instance_attribute: set on instances (in __init__), checked in the class's source
    contract: str = "tests/integrations/test_private_apis.py"

    def line(self) -> str:
        """How a failed check names this reach."""
        return f"{self.package} {self.owner} {', '.join(self.names)} (used in {self.used_in}: {self.why})"


PRIVATE_APIS: tuple[PrivateApi, ...] = (
    PrivateApi(
        "multiprocessing",
        "multiprocessing.util",
        ("_finalizer_registry",),
        "ads_prefect/runtime/runner.py",
        "an interrupted demo exits with os._exit, which skips the finalizers: the named semaphores of its worker "
        "pools are unlinked from CPython's registry first (no 'leaked semaphore objects' warning)",
    ),
    PrivateApi(
        "multiprocessing",
        "multiprocessing.synchronize:SemLock",
        ("_cleanup",),
        "ads_prefect/runtime/runner.py",
        "the finalizer that unlinks a named semaphore, recognised in that registry",
    ),
    PrivateApi(
        "multiprocessing",
        "multiprocessing.util:Finalize",
        ("_callback",),
        "ads_prefect/runtime/runner.py",
        "a registered finalizer's callback, compared with SemLock._cleanup",
        kind="instance_attribute",
    ),
    PrivateApi(
        "prefect",
        "prefect._internal.concurrency.services:_QueueServiceBase",
        ("_QueueServiceBase", "_instance_lock", "_instance_cache_lock", "_instances", "_new_instance"),
        "ads_prefect/runtime/api_routing.py",
        "keys Prefect's per-process services (events, concurrency slots, logs) on the API URL, so a long-lived Dask "
        "worker reports each task run to its own build's API",
    ),
    PrivateApi(
        "prefect",
        "prefect._internal.concurrency.services:_QueueServiceBase",
        ("_stopped", "_key"),
        "ads_prefect/runtime/api_routing.py",
        "a cached service instance that stopped is replaced; the one made is moved to our key",
        kind="instance_attribute",
    ),
    PrivateApi(
        "prefect",
        "prefect.server.api.server:SubprocessASGIServer",
        ("_run_uvicorn_command", "_instances"),
        "ads_prefect/runtime/server.py",
        "the temporary server's watchdog is attached when its process is spawned; the ephemeral instance (port None) "
        "is stopped quietly at the end of a build",
    ),
    PrivateApi(
        "fsspec",
        "fsspec.spec:AbstractFileSystem",
        ("_strip_protocol",),
        "ads_core/storage/fs.py",
        "the path inside a file system for a URI (what every fsspec call takes)",
    ),
    PrivateApi(
        "transformers",
        "transformers:PretrainedConfig",
        ("_attn_implementation",),
        "ads_core/stages/score/transformers_scorer.py",
        "whether the loaded model attends with varlen flash-attention (packed rows) or not",
    ),
    PrivateApi(
        "trl",
        "trl:GRPOTrainer",
        ("_get_train_sampler", "_generate_and_score_completions", "_calculate_rewards", "_save_checkpoint"),
        "ads_core/train/trl/trainer.py",
        "the ADS trainer draws prompts from the sampler, feeds it each step's rewards and saves it with each "
        "checkpoint (overrides)",
        contract="tests/integrations/test_trl_contract.py",
    ),
    PrivateApi(
        "transformers",
        "transformers:Trainer",
        ("_load_rng_state", "_issue_warnings_after_load"),
        "ads_core/train/trl/trainer.py",
        "a resumed run restores the RNG state when its sampler is first made; a tied output embedding that a "
        "checkpoint stores once is re-tied, not reported missing",
        contract="tests/integrations/test_trl_contract.py",
    ),
    PrivateApi(
        "trl",
        "trl:GRPOTrainer",
        ("_logs",),
        "ads_core/train/trl/hooks.py",
        "TRL's own per-step buffer (prompt, completion, rewards, advantages)",
        kind="instance_attribute",
        contract="tests/integrations/test_trl_contract.py",
    ),
    PrivateApi(
        "trl",
        "trl:GRPOTrainer",
        ("_tokenize_prompts", "_generate_single_turn"),
        "ads_core/train/trl/reference.py",
        "DOTS's reference rollouts render and generate exactly as training does (same template and sampling)",
        contract="tests/integrations/test_trl_contract.py",
    ),
    PrivateApi(
        "trl",
        "trl:GRPOTrainer",
        ("_get_per_token_logps_and_entropies", "_compute_loss"),
        "ads_core/train/trl/replay/trainer.py",
        "rollout replay computes behaviour and pi_old log-probs as TRL's loss does and overrides the loss",
        contract="tests/integrations/test_trl_contract.py",
    ),
    PrivateApi(
        "trl",
        "trl:GRPOTrainer",
        ("_metrics", "_tokenizer"),
        "ads_core/train/trl/replay/trainer.py",
        "rollout replay logs its entropy and importance weights where TRL logs, and pads with TRL's tokenizer",
        kind="instance_attribute",
        contract="tests/integrations/test_trl_contract.py",
    ),
    PrivateApi(
        "verl",
        "verl.trainer.ppo.ray_trainer:RayPPOTrainer",
        ("_update_actor", "_save_checkpoint", "_load_checkpoint"),
        "ads_core/train/verl/trainer.py",
        "the ADS trainer feeds the sampler after each actor update and saves / restores it with each checkpoint "
        "(overrides)",
        contract="tests/integrations/test_verl_contract.py",
    ),
)
