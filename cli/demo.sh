#!/usr/bin/env bash
# The main job on the bundled demo sample: BM25 (pyserini), the default dense encoder (MiniLM)
# and their hybrid retrieve for the sample's test questions, then one metrics table.
# Outputs: indexes/demo-*/ (indexes) and runs/demo/ (runs, eval.json). Re-running reuses them.
set -euo pipefail
cd "$(dirname "$0")/.."
bash cli/setup.sh
export HF_HUB_OFFLINE=1
X=.venv/bin/dpr-xrisk
S=data/sample
R=runs/demo
mkdir -p "$R"
[ -d indexes/demo-bm25 ] || $X bm25 index --corpus $S/passages.tsv --out indexes/demo-bm25
$X bm25 search --index indexes/demo-bm25 --queries $S/test.qa.tsv --k 100 --out-json $R/bm25.json
[ -f "$R/emb/meta-00000-of-00001.json" ] || $X encode --model minilm --corpus $S/passages.tsv --out $R/emb
[ -d indexes/demo-minilm ] || $X index --embeddings $R/emb --out indexes/demo-minilm
$X search --index indexes/demo-minilm --queries $S/test.qa.tsv --k 100 --out-json $R/dense.json
$X search --index indexes/demo-minilm --queries $S/test.qa.tsv --k 100 --bm25-index indexes/demo-bm25 --out-json $R/hybrid.json
$X evaluate --run $R/bm25.json --run $R/dense.json --run $R/hybrid.json --qrels $S/test.qrels.tsv --out $R/eval.json
