"""Reading a large corpus: a DPR TSV read into Python lists (what holding a corpus in memory
costs) vs the same corpus as a 🤗 datasets folder (memory-mapped Arrow), streamed by
``read_passages`` and accessed at random rows (issue #14 item 1). Synthetic passages (60 words),
each measurement in its own process (peak RSS = that process's maximum resident set, and its
anonymous part, which excludes the memory-mapped file pages), at two corpus sizes so that growth
with the corpus shows.

    python eval/bench_datasets.py                 # 250k and 1M passages
    python eval/bench_datasets.py --sizes 20000   # quick check
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import EVAL, RESULTS, replace_section, WORK, machine  # noqa: E402

BASE = WORK / "datasets"

CHILD = r"""
import json, resource, sys, time
mode, src = sys.argv[1], sys.argv[2]
import datasets, numpy as np, pyarrow  # imported before the baseline: growth is the data's, not the libraries'
from dpr_xrisk.io.passages import read_passages
def anon_kib():
    for line in open("/proc/self/status"):
        if line.startswith("RssAnon:"):
            return int(line.split()[1])
    return 0
base_anon = anon_kib()
t0 = time.perf_counter()
peak_anon = 0
if mode == "tsv-lists":
    from dpr_xrisk.io.passages import read_passages
    ids, texts, titles = [], [], []
    for p in read_passages(src):
        ids.append(p.id); texts.append(p.text); titles.append(p.title)
    n = len(ids)
    peak_anon = anon_kib()
elif mode == "arrow-stream":
    from dpr_xrisk.io.passages import read_passages
    n = 0
    for i, p in enumerate(read_passages(src, check_duplicates=False)):
        n += 1
        if i % 50000 == 0:
            peak_anon = max(peak_anon, anon_kib())
    peak_anon = max(peak_anon, anon_kib())
elif mode == "arrow-random":
    import datasets, numpy as np
    ds = datasets.load_from_disk(src)
    n = len(ds)
    rows = np.random.default_rng(0).choice(n, size=10000, replace=False)
    got = ds.select(sorted(rows.tolist()))["text"]
    assert len(got) == 10000
    peak_anon = anon_kib()
print(json.dumps({"mode": mode, "passages": n, "seconds": round(time.perf_counter() - t0, 2),
                  "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                  "anon_rss_growth_mib": round((peak_anon - base_anon) / 1024, 1)}))
"""


def make_corpus(n: int) -> Path:
    import numpy as np

    out = BASE / f"synthetic-{n}.tsv"
    if out.exists():
        return out
    BASE.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    vocab = [f"w{i}" for i in range(5000)]
    with open(out.with_suffix(".tmp"), "w", encoding="utf-8") as f:
        f.write("id\ttext\ttitle\n")
        for i in range(n):
            words = rng.integers(0, len(vocab), size=60)
            f.write(f"p{i}\t{' '.join(vocab[w] for w in words)}\tTitle {i % 1000}\n")
    out.with_suffix(".tmp").rename(out)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[250_000, 1_000_000])
    args = ap.parse_args()
    rows = []
    for n in args.sizes:
        tsv = make_corpus(n)
        arrow = BASE / f"synthetic-{n}-arrow"
        if not (arrow / "state.json").exists():
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "dpr_xrisk", "convert", "dataset", "--input", str(tsv), "--out", str(arrow),
                            "--overwrite"], check=True, capture_output=True)
            print(f"converted {n:,} passages in {time.perf_counter() - t0:.0f} s", flush=True)
        for mode, src in (("tsv-lists", tsv), ("arrow-stream", arrow), ("arrow-random", arrow)):
            r = subprocess.run([sys.executable, "-c", CHILD, mode, str(src)], check=True, capture_output=True, text=True)
            rec = json.loads(r.stdout.strip().splitlines()[-1])
            rows.append(rec)
            print(rec, flush=True)
    res = {"command": "python eval/bench_datasets.py " + " ".join(sys.argv[1:]), "machine": machine(), "rows": rows}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "bench_datasets.json").write_text(json.dumps(res, indent=2) + "\n")
    table = "\n".join(f"| {r['passages']:,} | {r['mode']} | {r['seconds']:.1f} | {r['peak_rss_mib']:.0f} | {r['anon_rss_growth_mib']:.0f} |"
                      for r in rows)
    section = ("## Reading a large corpus: TSV into lists vs 🤗 datasets (issue #14)\n\n"
               f"Command: `{res['command'].strip()}`  \nDate: {res['machine']['date']}; one process per row.\n\n"
               "| passages | how | seconds | peak RSS MiB | anonymous RSS growth MiB |\n|---:|---|---:|---:|---:|\n" + table + "\n\n"
               "tsv-lists: `read_passages` of the TSV into three Python lists (the corpus in memory); arrow-stream: "
               "`read_passages` of the datasets folder, one record batch at a time (without the duplicate-id check, whose set "
               "of ids grows with any corpus; `encode` keeps 8 bytes per id for it); arrow-random: `load_from_disk` "
               "and 10,000 random rows. Anonymous RSS excludes the memory-mapped Arrow pages, which the OS can drop.\n")
    print(section)
    replace_section(EVAL / "RESULTS.md", "## Reading a large corpus: TSV into lists vs", section)


if __name__ == "__main__":
    main()
