"""Encode batch size per inference path (issue #13 item 4): passages/s of MiniLM's passage tower
for torch fp32, torch bf16, torch int8, ONNX fp32 and ONNX int8 at several batch sizes, on the
first --n Wikipedia passages (length-sorted batches, as `encode` runs them), --threads threads,
repetitions interleaved (the order rotates). The best batch of each path is what its default
should be.

    python eval/bench_batch.py [--n 400 --reps 2 --batches 16 32 64 128 256] [--paths torch-fp32 ...]

With few passages, length-sorted batches near the sample's size mix short and long passages and
pad more than in `encode`'s 8,192-passage chunks, which favours small batches: read a small-n
run with that in mind.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402

from _common import EVAL, RESULTS, WIKI, WORK, machine, median, replace_section  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=400)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batches", type=int, nargs="+", default=[16, 32, 64, 128, 256])
    ap.add_argument("--paths", nargs="+", default=None, help="a subset of: torch-fp32 torch-bf16 torch-int8 onnx-fp32 onnx-int8")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    from dpr_xrisk.retrieval.encoder import DualEncoder
    from dpr_xrisk.io.passages import read_passages
    from dpr_xrisk.runtime.onnx_backend import onnx_encoder
    from dpr_xrisk.runtime.quantize import quantized

    ps = list(itertools.islice(read_passages(WIKI, check_duplicates=False), args.n))
    titles, texts = [p.title for p in ps], [p.text for p in ps]
    fp32 = DualEncoder.load("minilm").eval()
    cache = WORK / "quantize" / "onnx-cache"
    encs = {"torch fp32": (fp32, False), "torch bf16": (fp32, True), "torch int8": (quantized(fp32, "int8"), False),
            "onnx fp32": (onnx_encoder(fp32, "none", cache, threads=args.threads)[0], False),
            "onnx int8": (onnx_encoder(fp32, "int8", cache, threads=args.threads)[0], False)}
    if args.paths:
        encs = {k: v for k, v in encs.items() if k.replace(" ", "-") in args.paths}
    for enc, bf16 in encs.values():  # warm-up
        enc.encode_passages(titles[:64], texts[:64], batch_size=32, bf16=bf16)
    cells = [(p, b) for p in encs for b in args.batches]
    times: dict = {c: [] for c in cells}
    for r in range(args.reps):
        for c in cells[r % len(cells):] + cells[: r % len(cells)]:
            enc, bf16 = encs[c[0]]
            t0 = time.perf_counter()
            enc.encode_passages(titles, texts, batch_size=c[1], bf16=bf16)
            times[c].append(time.perf_counter() - t0)
            print(c, f"{args.n / times[c][-1]:.1f} psg/s", flush=True)
    rate = {c: args.n / median(ts) for c, ts in times.items()}
    best = {p: max(args.batches, key=lambda b: rate[(p, b)]) for p in encs}
    res = {"command": "python eval/bench_batch.py " + " ".join(sys.argv[1:]), "machine": machine(), "args": vars(args),
           "psg_per_s": {f"{p} b{b}": round(rate[(p, b)], 1) for p, b in cells},
           "seconds": {f"{p} b{b}": [round(t, 2) for t in times[(p, b)]] for p, b in cells}, "best_batch": best}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "bench_batch.json").write_text(json.dumps(res, indent=2) + "\n")
    head = "| path | " + " | ".join(f"batch {b}" for b in args.batches) + " | best |\n|---|" + "---:|" * (len(args.batches) + 1)
    rows = "\n".join(f"| {p} | " + " | ".join(f"{rate[(p, b)]:.1f}" for b in args.batches) + f" | {best[p]} |" for p in encs)
    section = (f"## Encode batch size per path (issue #13)\n\nCommand: `{res['command'].strip()}`  \n"
               f"Date: {res['machine']['date']}; {args.threads} threads; {args.n} Wikipedia passages, passages/s "
               f"(median of {args.reps} interleaved repetitions):\n\n{head}\n{rows}\n")
    print(section)
    heading = f"## Encode batch size per path (issue #13), {args.n} passages"
    replace_section(EVAL / "RESULTS.md", heading, section.replace("## Encode batch size per path (issue #13)", heading, 1))


if __name__ == "__main__":
    main()
