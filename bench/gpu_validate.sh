#!/usr/bin/env bash
# One prepared GPU validation run (<= 8 min on one GPU): one summary line per check, at the end.
#
#   1. vllm-vs-transformers  the vLLM scorer (single pass: token_embed hidden states + LM head at target positions)
#                            against the transformers scorer on the bench model, bf16 (bench/vllm_check.py)
#   2. fused-bf16            tokens/s of the fused transformers scorer in bf16, padded vs packed (flash-attention
#                            varlen when flash-attn is installed; SDPA block-diagonal mask otherwise), and agreement
#   3. kmeans-cuml-sklearn   cuML vs scikit-learn K-Means on the same synthetic blobs (ARI, inertia ratio)
#   4. grpo-smoke            bench/gpu_smoke.sh: GRPO steps with the ADS sampler on verl, then a resume
# Checks 2 and 3 are bench/gpu_checks.py. Not run yet: no GPU was available when it was written.
#
# Two environments, prepared beforehand (installing them is not part of the 8 minutes):
#   SCORE_PY  python of a venv with the project and its gpu extra (vllm 0.33, cuML):  pip install -e ".[gpu,dev]"
#   TRAIN_PY  python of a venv with verl and the project's train extra (see bench/gpu_smoke.sh)
# Both default to .venv/bin/python. A check whose environment lacks its packages prints SKIP with the reason.
# Environment: ROWS (rows per data set for check 1; 32), TPUT_ROWS (for check 2; 500), STEPS (2 for check 4),
# VLLM_TIMEOUT (s for check 1, engine start included; 180), CHECK_TIMEOUT (s for checks 2 and 3; 90), SMOKE_TIMEOUT
# (s per verl run, two runs; 150): at most ~8 min in all. With $OUT set (device harness), the logs go there.
set -uo pipefail
cd "$(dirname "$0")/.."

DEFAULT_PY=$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)
SCORE_PY=${SCORE_PY:-$DEFAULT_PY}
TRAIN_PY=${TRAIN_PY:-$DEFAULT_PY}
ROWS=${ROWS:-32}
TPUT_ROWS=${TPUT_ROWS:-500}
STEPS=${STEPS:-2}
VLLM_TIMEOUT=${VLLM_TIMEOUT:-180}
CHECK_TIMEOUT=${CHECK_TIMEOUT:-90}
SMOKE_TIMEOUT=${SMOKE_TIMEOUT:-150}
LOGS=${OUT:-/tmp/ads-gpu-validate}
mkdir -p "$LOGS"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export ADS_CACHE_DIR=${ADS_CACHE_DIR:-/tmp/ads-gpu-validate/cache}
SUMMARY=()
t_all=$(date +%s)

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true

summarise() {  # name, log, exit code: the log's own summary line, else a FAIL/SKIP line
  local name=$1 log=$2 rc=$3 line
  line=$(grep -E "^$name: " "$log" | tail -1)
  if [ -n "$line" ]; then SUMMARY+=("$line")
  elif grep -q "ModuleNotFoundError\|No module named" "$log"; then
    SUMMARY+=("$name: SKIP $(grep -m1 -o "No module named '[^']*'" "$log")")
  elif [ "$rc" = 124 ]; then SUMMARY+=("$name: FAIL timed out")
  else SUMMARY+=("$name: FAIL rc=$rc (see $log)"); fi
}

MODEL=$("$SCORE_PY" -c 'from ads_core import models; print(models.resolve_model("bench"))' 2>"$LOGS/model.log") \
  || { echo "cannot build the bench model:"; tail -5 "$LOGS/model.log"; }
echo "bench model: ${MODEL:-none}"

echo "== 1. vLLM vs transformers (bf16)"
timeout "$VLLM_TIMEOUT" "$SCORE_PY" bench/vllm_check.py --model "$MODEL" --rows "$ROWS" --dtype bfloat16 \
  --device cuda >"$LOGS/vllm_check.log" 2>&1
rc=$?; grep -v " INFO \| WARNING " "$LOGS/vllm_check.log" | tail -4
summarise vllm-vs-transformers "$LOGS/vllm_check.log" $rc

echo "== 2. fused scorer tokens/s, bf16, padded vs packed"
timeout "$CHECK_TIMEOUT" "$SCORE_PY" bench/gpu_checks.py fused --model "$MODEL" --rows "$TPUT_ROWS" \
  >"$LOGS/fused.log" 2>&1
rc=$?; tail -2 "$LOGS/fused.log"
summarise fused-bf16 "$LOGS/fused.log" $rc

echo "== 3. cuML vs scikit-learn K-Means"
timeout "$CHECK_TIMEOUT" "$SCORE_PY" bench/gpu_checks.py kmeans >"$LOGS/kmeans.log" 2>&1
rc=$?; tail -2 "$LOGS/kmeans.log"
summarise kmeans-cuml-sklearn "$LOGS/kmeans.log" $rc

echo "== 4. GRPO smoke with the ADS sampler and a resume"
t0=$(date +%s)
PY=$TRAIN_PY STEPS=$STEPS TIMEOUT=$SMOKE_TIMEOUT bash bench/gpu_smoke.sh >"$LOGS/smoke.log" 2>&1
rc=$?; tail -6 "$LOGS/smoke.log"
if [ $rc = 0 ] && grep -q "^GPU smoke: OK" "$LOGS/smoke.log"; then
  SUMMARY+=("grpo-smoke: ok $(grep -m1 '^steps logged' "$LOGS/smoke.log") ($(( $(date +%s) - t0 )) s)")
else
  summarise grpo-smoke "$LOGS/smoke.log" $rc
fi

echo "== summary ($(( $(date +%s) - t_all )) s)"
printf '%s\n' "${SUMMARY[@]}"
! printf '%s\n' "${SUMMARY[@]}" | grep -q ": FAIL"
