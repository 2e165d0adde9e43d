#!/usr/bin/env bash
# The main job on the bundled demo sample: BM25 (pyserini), the default dense encoder (MiniLM,
# zero-shot) and their hybrid retrieve for the sample's test questions; then MiniLM is trained
# briefly with the DPM loss on the sample's train split and retrieves again. One metrics table.
# Outputs: indexes/demo-*/ (indexes) and runs/demo/ (runs, model, eval.json, report/). Re-running reuses them.
# From scratch (.venv already set up) about 5 minutes on a busy 2-core CPU, half of it the 10 training steps.
# tests/test_demo.py checks that the table it prints is the one in README.md.
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
# train briefly (2 epochs over 80 questions = 10 steps), then retrieve with it
[ -f "$R/dpm-model/dpr_xrisk.json" ] || $X train --model minilm --train $S/biencoder-train.json \
    --dev $S/dev.qa.tsv --corpus $S/passages.tsv --loss dpm --batch-size 16 --epochs 2 --lr 2e-5 --out $R/dpm-model
[ -f "$R/emb-dpm/meta-00000-of-00001.json" ] || $X encode --model $R/dpm-model --corpus $S/passages.tsv --out $R/emb-dpm
[ -d indexes/demo-dpm ] || $X index --embeddings $R/emb-dpm --out indexes/demo-dpm
$X search --index indexes/demo-dpm --queries $S/test.qa.tsv --k 100 --out-json $R/dense-dpm.json
$X evaluate --run $R/bm25.json --run $R/dense.json --run $R/hybrid.json --run $R/dense-dpm.json \
    --qrels $S/test.qrels.tsv --out $R/eval.json
# charts (top-k vs k, recall/MRR/nDCG, training curves, bm25 vs dense per question) and one HTML page
$X report --eval $R/eval.json --run $R/bm25.json --run $R/dense.json --run $R/hybrid.json --run $R/dense-dpm.json \
    --train $R/dpm-model --compare bm25.json dense.json --out $R/report
