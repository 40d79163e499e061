#!/usr/bin/env bash
# Creates .venv in the repo root and installs the project with everything its tests need (core + the `train` extra
# with verl + dev tools), every package at the version pinned in requirements.lock, with uv (pip if uv cannot be
# installed). Safe to rerun: with nothing changed (lock, pyproject, this script, extras, interpreter) it checks a
# stamp and finishes in seconds.
#
#   ./setup.sh --lock                         # after editing pyproject's dependencies: regenerate requirements.lock
#                                             # (uv pip compile of the extras dev,train,smollm2 for Linux x86_64, Python 3.11)
#   ADS_PYTHON=python3.12 ./setup.sh          # pick the interpreter (>= 3.11; the lock is for 3.11, others resolve)
#   ADS_TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu ./setup.sh
#                                             # where to get the CPU torch wheel if pip can't find it locally
#   ADS_EXTRAS=dev,gpu ./setup.sh             # on a GPU node (vllm, cuML, dask-cuda): resolved by uv, not locked
#   ADS_NO_UV=1 ./setup.sh                    # pip instead of uv (what happens where uv cannot be installed)
set -euo pipefail
cd "$(dirname "$0")"

PY=${ADS_PYTHON:-python3}
EXTRAS=${ADS_EXTRAS:-dev,train,smollm2}
LOCK=requirements.lock
LOCKED_EXTRAS=dev,train,smollm2 # the extras requirements.lock holds (tests/test_lock.py checks it against pyproject.toml)
TORCH=2.13.0            # the CPU build, installed first where there is no GPU (never a multi-GB CUDA wheel there)
STAMP=.venv/.ads-setup-stamp
"$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "ADS pipeline needs Python >= 3.11")'

[ -x .venv/bin/python ] || "$PY" -m venv .venv
PIP=(.venv/bin/python -m pip --disable-pip-version-check)

uv_bin() { # uv on PATH, else in .venv (installed there from the package index); empty when neither works
  if [ -n "${ADS_NO_UV:-}" ]; then
    return 0
  elif command -v uv >/dev/null 2>&1; then
    command -v uv
  elif [ -x .venv/bin/uv ] || "${PIP[@]}" install -q uv >/dev/null 2>&1; then
    echo .venv/bin/uv
  fi
}

if [ "${1:-}" = "--lock" ]; then
  UV=$(uv_bin)
  [ -n "$UV" ] || { echo "error: --lock needs uv (pip install uv)" >&2; exit 2; }
  echo "torch==$TORCH" >.venv/.ads-torch-pin
  args=()
  for extra in ${LOCKED_EXTRAS//,/ }; do args+=(--extra "$extra"); done
  "$UV" pip compile pyproject.toml "${args[@]}" --python-version 3.11 --python-platform x86_64-manylinux_2_28 \
    --constraint .venv/.ads-torch-pin --override requirements.overrides --custom-compile-command "./setup.sh --lock" --quiet -o "$LOCK"
  echo "wrote $LOCK ($(grep -c '^[A-Za-z0-9].*==' "$LOCK") packages); commit it with pyproject.toml"
  exit 0
fi

GPU=$(command -v nvidia-smi >/dev/null 2>&1 && echo gpu || echo cpu)
PYVER=$(.venv/bin/python -c 'import sys; print("%d.%d" % sys.version_info[:2])')
STATE="$(cat "$LOCK" pyproject.toml requirements.overrides setup.sh | sha256sum | cut -c1-16) extras=$EXTRAS $GPU python=$PYVER"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$STATE" ] && .venv/bin/python -c 'import ads_core' 2>/dev/null; then
  echo "setup: .venv is up to date with $LOCK ($STATE)"
  exit 0
fi
rm -f "$STAMP"

UV=$(uv_bin)
why=$([ -n "${ADS_NO_UV:-}" ] && echo "ADS_NO_UV is set" || echo "uv could not be installed")
[ -n "$UV" ] || echo "note: $why; installing with pip instead (slower, same pinned versions)"

# Never pull a multi-GB CUDA torch onto a machine without a GPU: install the CPU build first. pip finds it, because
# pip's configuration (find-links, extra indexes) is where a machine keeps its local CPU wheel, and uv does not read
# it; uv installs the wheel pip fetched. uv installs without bytecode unless told (--compile-bytecode, pip's default):
# where PYTHONDONTWRITEBYTECODE is set, every process would compile torch, transformers and Prefect again, and even
# where it is not, the first processes to start all compile them. Measured on 2 cores, a fresh clone's test suite:
# 531 s without, 500 s with (setup itself then takes about 48 s).
if [ "$GPU" = cpu ] && ! .venv/bin/python -c 'import torch' 2>/dev/null; then
  torch_from=(${ADS_TORCH_INDEX_URL:+--index-url "$ADS_TORCH_INDEX_URL"})
  if [ -n "$UV" ]; then
    rm -rf .venv/.ads-wheels
    "${PIP[@]}" download -q --no-deps --only-binary=:all: -d .venv/.ads-wheels "torch==$TORCH" "${torch_from[@]}"
    "$UV" pip install -q --compile-bytecode --no-deps --python .venv/bin/python .venv/.ads-wheels/torch-*.whl
    rm -rf .venv/.ads-wheels
  else
    "${PIP[@]}" install -q --no-deps "torch==$TORCH" "${torch_from[@]}"
  fi
fi
if [ "$EXTRAS" = "$LOCKED_EXTRAS" ] && [ "$PYVER" = 3.11 ]; then
  # The lock pins every package, so nothing is resolved here (--no-deps). Without a GPU the CUDA stack stays out:
  # torch is the CPU build installed above, and triton / nvidia-* / cuda-* are what only CUDA torch needs.
  reqs=.venv/.ads-requirements.txt
  if [ "$GPU" = cpu ]; then
    grep -Ev '^(torch|triton|nvidia-[a-z0-9-]+|cuda-(bindings|pathfinder|toolkit))==' "$LOCK" >"$reqs"
  else
    cp "$LOCK" "$reqs"
  fi
  if [ -n "$UV" ]; then
    "$UV" pip install -q --compile-bytecode --no-deps --python .venv/bin/python -r "$reqs"
    "$UV" pip install -q --no-deps --python .venv/bin/python -e .
  else
    "${PIP[@]}" install -q --no-deps -r "$reqs"
    "${PIP[@]}" install -q --no-deps -e .
  fi
else
  echo "note: $LOCK holds the extras $LOCKED_EXTRAS for Python 3.11; resolving .[$EXTRAS] for Python $PYVER now"
  if [ -n "$UV" ]; then
    "$UV" pip install -q --compile-bytecode --python .venv/bin/python --override requirements.overrides -e ".[${EXTRAS}]"
  else
    "${PIP[@]}" install -q -e ".[${EXTRAS}]"
  fi
fi
# An editable install leaves our own modules uncompiled (--compile-bytecode covers installed packages only): compile
# them once, as pip does for a regular install.
.venv/bin/python -m compileall -q ads_core ads_prefect ads_cli ads_lab
echo "$STATE" >"$STAMP"
echo "setup done: $(.venv/bin/python -c 'import torch, transformers; print("torch", torch.__version__, "| transformers", transformers.__version__)')"
