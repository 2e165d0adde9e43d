#!/usr/bin/env bash
# Create (or reuse) .venv and install dpr_xrisk into it: the CPU build of torch first, then the
# project with its test extras (the ONNX Runtime backend and a headless browser, whose tests run too). Safe to run again: it reinstalls only when pyproject.toml changed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
stamp=.venv/.dpr_xrisk-installed
want=$(sha256sum pyproject.toml | cut -c1-16)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  # torch 2.13.0 is the CPU build on this kind of machine; any other spec pulls a multi-GB CUDA build
  .venv/bin/python -m pip install -q "torch==2.13.0"
  .venv/bin/python -m pip install -q -e ".[dev,bench,fast,browser]"
  echo "$want" > "$stamp"
fi
