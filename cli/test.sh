#!/usr/bin/env bash
# The whole test suite (tiny random BERT, the demo sample, and ../shared/data where present).
set -euo pipefail
cd "$(dirname "$0")/.."
bash cli/setup.sh
export HF_HUB_OFFLINE=1
exec .venv/bin/python -m pytest "$@"
