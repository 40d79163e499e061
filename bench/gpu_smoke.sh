#!/usr/bin/env bash
# GPU smoke test: a few GRPO steps with the ADS sampler on real verl, then a resume; prints the ads/*
# metrics and the step time of every step.
#
# Needs one or more CUDA GPUs and a training environment: verl with its vLLM stack plus this project, e.g.
#   python -m venv .venv && .venv/bin/pip install "verl[vllm]==0.9.1" && .venv/bin/pip install -e ".[train,dev]"
# (verl 0.9.1 pins vllm 0.24 / torch 2.11 / transformers 5.9; the project's `gpu` extra, vllm 0.33 for scoring,
# is a different environment). No network: the training set is built from the bundled sample with the tiny
# local model, and the policy defaults to the locally generated `bench` Qwen2 model (~40M parameters, random
# weights: rewards stay ~0, the mechanics are what is tested). MODEL=<local dir or cached hub id> of a real
# instruct model (e.g. Qwen2.5-0.5B-Instruct) gives non-zero rewards.
#
#   bench/gpu_smoke.sh                                  # 4 steps, then resume to step 6
#   MODEL=/models/Qwen2.5-0.5B-Instruct STEPS=6 bench/gpu_smoke.sh
#
# Environment: MODEL, STEPS (4), GPUS (1), TIMEOUT seconds for each verl run (420), WORK (/tmp/ads-gpu-smoke),
# PY (the interpreter; default .venv/bin/python). When $OUT is set (device harness), the log and the metrics
# JSONL are copied there.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PY:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}
WORK=${WORK:-/tmp/ads-gpu-smoke}
STEPS=${STEPS:-4}
GPUS=${GPUS:-1}
TIMEOUT=${TIMEOUT:-420}
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=${HF_HUB_OFFLINE:-1} ADS_CACHE_DIR=${ADS_CACHE_DIR:-$WORK/cache}
LOG=$WORK/train.log
RUN=$WORK/run
mkdir -p "$WORK"
rm -rf "$RUN" "$LOG"

copy_out() {
  if [ -n "${OUT:-}" ]; then
    cp -f "$LOG" "$OUT/gpu_smoke.log" 2>/dev/null || true
    cp -f "$RUN/metrics.jsonl" "$OUT/gpu_smoke_metrics.jsonl" 2>/dev/null || true
  fi
}
trap copy_out EXIT

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
"$PY" -c 'import torch, verl, vllm; print("torch", torch.__version__, "cuda", torch.version.cuda, "| verl",
verl.__version__, "| vllm", vllm.__version__, "| GPUs", torch.cuda.device_count())'

echo "== building the training set (bundled GSM8K sample, tiny scorer, 8 clusters)"
t0=$(date +%s)
"$PY" - "$WORK/build" <<'EOF'
import sys
from ads_core.config.build import ClusterConfig
from ads_core.pipeline.build import BuildConfig, build
print(build(None, sys.argv[1], BuildConfig(cluster=ClusterConfig(num_clusters=8))).final_uri)
EOF
echo "build: $(( $(date +%s) - t0 )) s"

if [ -z "${MODEL:-}" ]; then
  MODEL=$WORK/policy-bench
  [ -f "$MODEL/config.json" ] || "$PY" -m ads_cli.main make-tiny-model "$MODEL" --preset bench
fi
echo "policy: $MODEL"

# 4 clusters x 8 rows = 32 prompts x 4 rollouts per step; a checkpoint every 2 steps.
ARGS=(
  "$WORK/build/final/train.parquet" --trainer verl --model "$MODEL" --gpus "$GPUS" --no-eval --run-dir "$RUN" --name smoke
  -s active_clusters=4 -s mini_cluster_size=8 -s cluster_metrics_interval=0
  trainer.save_freq=2 trainer.resume_mode=auto trainer.total_epochs=100
  data.max_prompt_length=512 data.max_response_length=256
  actor_rollout_ref.rollout.n=4 actor_rollout_ref.rollout.gpu_memory_utilization=0.4
  actor_rollout_ref.rollout.max_model_len=1024 actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=16
  actor_rollout_ref.actor.ppo_mini_batch_size=16 actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16
  actor_rollout_ref.model.use_remove_padding=false actor_rollout_ref.model.enable_gradient_checkpointing=false
)

echo "== training $STEPS steps"
t0=$(date +%s)
timeout "$TIMEOUT" "$PY" -m ads_cli.main train "${ARGS[@]}" --steps "$STEPS" 2>&1 | tee "$LOG"
echo "run 1: $(( $(date +%s) - t0 )) s"

echo "== resuming to step $((STEPS + 2)) (same name and run dir: verl resume_mode=auto)"
t0=$(date +%s)
timeout "$TIMEOUT" "$PY" -m ads_cli.main train "${ARGS[@]}" --steps "$((STEPS + 2))" 2>&1 | tee -a "$LOG"
echo "run 2: $(( $(date +%s) - t0 )) s"
grep -E "^\[ads\] (restored|WARNING)" "$LOG" || { echo "FAIL: the resume did not restore the ADS schedule"; exit 1; }

echo "== per-step metrics"
"$PY" - "$RUN/metrics.jsonl" <<'EOF'
import json, sys
keys = ["timing_s/step", "critic/score/mean", "ads/batch_success_mean", "ads/groups", "ads/prob_max",
        "ads/prob_entropy", "ads/success_rate_mean", "ads/window_frac_mean", "ads/frac_easier", "ads/frac_keep",
        "ads/frac_harder", "ads/steps_in_epoch"]
rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
steps = [r for r in rows if "ads/step" in r["data"]]
if not steps:
    sys.exit("FAIL: no ads/* metrics were logged")
print("step  " + "  ".join(k.split("/", 1)[1] if k.startswith("ads/") else k for k in keys))
for r in steps:
    d = r["data"]
    print(f"{r['step']:>4}  " + "  ".join(f"{d.get(k, float('nan')):.4g}" for k in keys))
times = [r["data"]["timing_s/step"] for r in steps if "timing_s/step" in r["data"]]
print(f"steps logged: {len(steps)}; step time mean {sum(times) / len(times):.2f} s (first {times[0]:.2f} s)")
EOF
echo "GPU smoke: OK"
