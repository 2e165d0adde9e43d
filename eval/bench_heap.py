"""What the `encode` command's fixed mmap threshold costs in speed, with MiniLM.

What: `dpr-xrisk encode` serves every allocation of 1 MiB or more with its own mmap
(``encode_corpus(bound_heap=True)``, :func:`dpr_xrisk.retrieval.encode.fix_mmap_threshold`), which keeps its
peak RSS flat over a long corpus (eval/bench_encode_rss.py, measured with a tiny model). With a
real model every batch's activations are then mapped, page-faulted and unmapped afresh. This
benchmark encodes the first ``--n`` passages of ../shared/data/wikipedia-100k with MiniLM-L6
through ``encode_corpus`` in fresh processes, with a fixed 1 MiB threshold (``fixed``: what `encode`
did until 2026-12-01), a fixed 32 MiB one (``32mib``: what it now does for shards of up to a million
passages, ``dpr_xrisk.retrieval.encode.mmap_threshold``) and glibc's default, dynamic one (``dynamic``: what
the training refresh does), for
fp32 at batch 16 and bf16 at batch 64 (the measured defaults), interleaved, 2 threads. It
reports passages/s (the encode loop's own clock, model loading excluded), minor page faults and
the child's peak RSS.

    python eval/bench_heap.py [--n 1500] [--reps 2] [--paths fp32 bf16] [--modes fixed dynamic]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import WIKI, WORK, machine, median, save  # noqa: E402

CHILD = """
import json, resource, sys, torch
from dpr_xrisk.retrieval.encode import MMAP_BOUNDED, MMAP_FAST, encode_corpus, fix_mmap_threshold
from dpr_xrisk.retrieval.encoder import DualEncoder
corpus, out, mode, bf16, batch = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1", int(sys.argv[5])
torch.set_num_threads(2)
enc = DualEncoder.load("minilm")
if mode != "dynamic":  # what encode_corpus(bound_heap=True) does, at this threshold
    fix_mmap_threshold({"fixed": MMAP_BOUNDED, "32mib": MMAP_FAST}[mode])
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
meta = encode_corpus(enc, corpus, out, batch_size=batch, bf16=bf16, progress=False)
ru = resource.getrusage(resource.RUSAGE_SELF)
m = json.loads(open(meta).read())
print(json.dumps({"seconds": m["seconds"], "count": m["count"], "minflt": ru.ru_minflt - before,
                  "maxrss_mib": ru.ru_maxrss / 1024}))
"""


def corpus_of(n: int) -> Path:
    out = WORK / "heap" / f"psgs-{n}.tsv"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        with open(WIKI, encoding="utf-8") as f, open(out, "w", encoding="utf-8") as g:
            g.writelines(itertools.islice(f, n + 1))  # header + n passages
    return out


def one(corpus: Path, mode: str, path: str) -> dict:
    out = WORK / "heap" / "emb"
    shutil.rmtree(out, ignore_errors=True)
    bf16, batch = (True, 64) if path == "bf16" else (False, 16)
    res = subprocess.run([sys.executable, "-c", CHILD, str(corpus), str(out), mode, "1" if bf16 else "0", str(batch)],
                         capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    if res.returncode != 0:
        raise SystemExit(res.stderr[-2000:])
    r = json.loads(res.stdout.strip().splitlines()[-1])
    r["psg_per_s"] = r["count"] / r["seconds"]
    return r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1500)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--paths", nargs="+", default=["fp32", "bf16"], choices=["fp32", "bf16"])
    ap.add_argument("--modes", nargs="+", default=["fixed", "dynamic"], choices=["fixed", "dynamic", "32mib"])
    args = ap.parse_args()
    corpus = corpus_of(args.n)
    raw: dict = {p: {m: [] for m in args.modes} for p in args.paths}
    for rep in range(args.reps):
        for path in args.paths:
            for mode in (args.modes if rep % 2 == 0 else args.modes[::-1]):  # ABBA: drift cancels
                r = one(corpus, mode, path)
                raw[path][mode].append(r)
                print(f"rep {rep} {path:4s} {mode:7s}: {r['psg_per_s']:6.1f} psg/s  minflt {r['minflt']:>10,d}  "
                      f"peak RSS {r['maxrss_mib']:7.1f} MiB", flush=True)
    summary = {}
    print("\n| path | mode | psg/s (median) | vs fixed | minor faults | peak RSS MiB |")
    print("|---|---|---:|---:|---:|---:|")
    for path in args.paths:
        base = median([r["psg_per_s"] for r in raw[path][args.modes[0]]])
        for mode in args.modes:
            rs = raw[path][mode]
            s = {"psg_per_s": median([r["psg_per_s"] for r in rs]), "minflt": median([r["minflt"] for r in rs]),
                 "maxrss_mib": median([r["maxrss_mib"] for r in rs])}
            s["vs_" + args.modes[0]] = s["psg_per_s"] / base
            summary.setdefault(path, {})[mode] = s
            print(f"| {path} | {mode} | {s['psg_per_s']:.1f} | {s['vs_' + args.modes[0]]:.2f}x | {s['minflt']:,.0f} | "
                  f"{s['maxrss_mib']:.0f} |")
    save("bench_heap", {"command": "python eval/bench_heap.py " + " ".join(sys.argv[1:]), "machine": machine(),
                        "args": vars(args), "raw": raw, "summary": summary})


if __name__ == "__main__":
    main()
