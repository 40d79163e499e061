#!/usr/bin/env bash
# Creates .venv in the repo root and installs the project with everything its tests need
# (core + the `train` extra with verl + dev tools). Safe to rerun.
#
#   ADS_PYTHON=python3.12 ./setup.sh          # pick the interpreter (>= 3.11)
#   ADS_TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu ./setup.sh
#                                              # where to get the CPU torch wheel if pip can't find it locally
#   ADS_EXTRAS=dev,train,gpu ./setup.sh       # on a GPU node (vllm, cuML, dask-cuda)
set -euo pipefail
cd "$(dirname "$0")"

PY=${ADS_PYTHON:-python3}
EXTRAS=${ADS_EXTRAS:-dev,train}
"$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "ADS pipeline needs Python >= 3.11")'

[ -x .venv/bin/python ] || "$PY" -m venv .venv
PIP=(.venv/bin/python -m pip --disable-pip-version-check)

# Never pull a multi-GB CUDA torch onto a machine without a GPU: install the CPU build first.
if ! command -v nvidia-smi >/dev/null 2>&1 && ! .venv/bin/python -c 'import torch' 2>/dev/null; then
  if [ -n "${ADS_TORCH_INDEX_URL:-}" ]; then
    "${PIP[@]}" install -q "torch==2.13.0" --index-url "$ADS_TORCH_INDEX_URL"
  else
    "${PIP[@]}" install -q "torch==2.13.0"
  fi
fi
"${PIP[@]}" install -q -e ".[${EXTRAS}]"
# An editable install leaves our own modules uncompiled, and where PYTHONDONTWRITEBYTECODE is set every process
# (each build, worker and test process) compiles them again: compile them once, as pip does for a regular install.
.venv/bin/python -m compileall -q ads_core ads_prefect ads_cli
echo "setup done: $(.venv/bin/python -c 'import torch, transformers; print("torch", torch.__version__, "| transformers", transformers.__version__)')"
