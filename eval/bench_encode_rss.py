"""Peak RSS of ``dpr-xrisk encode`` on 10k vs 100k passages: memory must not grow with the corpus.

What: the peak resident set size of the ``dpr-xrisk encode`` process on the first 10,000 and on
all 100,000 passages of ../shared/data/wikipedia-100k/psgs.tsv, with a TINY model (2-layer,
32-wide random BertModel + a WordPiece vocabulary trained with ``tokenizers`` on the first 5,000
passages, as tests/conftest.py's ``tiny_model_dir``; saved to eval/work/tiny-bert), so that the
model is small and any per-passage growth shows. encode streams 8,192-passage chunks into a
memory-mapped .npy, so the two peaks should differ by at most about the output buffer
(the .npy size, reported for scale).

How: each run is a fresh Python wrapper that starts the command as a subprocess and reads the
child's peak from ``resource.getrusage(RUSAGE_CHILDREN).ru_maxrss`` (KiB on Linux); runs are
interleaved (10k, 100k, 10k, ...) into fresh output folders under eval/work/. The wrapper also
samples the child's VmRSS every 2 s together with the chunks finished so far (encode's progress
file), so the table "RSS by chunk" shows whether memory plateaus or keeps growing.

    python eval/bench_encode_rss.py [--reps 1] [--sizes 10000 100000] [--mmap-threshold BYTES]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import WIKI, WORK, median, save  # noqa: E402

TINY = WORK / "tiny-bert"
CLI = Path(sys.executable).parent / "dpr-xrisk"
WRAPPER = """
import json, resource, subprocess, sys, time
progress = sys.argv[1]
child = subprocess.Popen(sys.argv[2:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
trace, t0, done = [], time.time(), 0
while child.poll() is None:
    try:
        with open(f"/proc/{child.pid}/status") as f:
            rss = next(int(line.split()[1]) for line in f if line.startswith("VmRSS"))
        with open(progress) as f:
            done = json.load(f)["chunks_done"]
    except (OSError, StopIteration, ValueError, KeyError):
        pass
    else:
        trace.append((round(time.time() - t0, 1), rss, done))
    time.sleep(2)
print(json.dumps({"rc": child.wait(), "maxrss_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
                  "trace": trace}))
"""


def tiny_model(path: Path) -> Path:
    """2 layers, hidden 32, WordPiece vocab of 2,000 trained on the first 5,000 passages."""
    if (path / "config.json").exists():
        return path
    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import BertConfig, BertModel, BertTokenizerFast

    from dpr_xrisk.io.passages import read_passages

    texts = [f"{p.title} {p.text}" for p in itertools.islice(read_passages(WIKI), 5000)]
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok.train_from_iterator(texts, trainers.WordPieceTrainer(vocab_size=2000, special_tokens=special))
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[(t, tok.token_to_id(t)) for t in ("[CLS]", "[SEP]")])
    BertTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]",
                      mask_token="[MASK]").save_pretrained(path)
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=tok.get_vocab_size(), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=512)
    BertModel(cfg).save_pretrained(path)
    return path


def corpus_of(n: int) -> Path:
    """The first n passages (header kept) under eval/work/; the whole file for n = 100k."""
    with open(WIKI, encoding="utf-8") as f:
        total = sum(1 for _ in f) - 1
    if n >= total:
        return WIKI
    out = WORK / "rss" / f"psgs-{n}.tsv"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        with open(WIKI, encoding="utf-8") as f, open(out, "w", encoding="utf-8") as g:
            g.writelines(itertools.islice(f, n + 1))
    return out


def peak_rss(cmd: list[str], progress: Path) -> tuple[int, float, list]:
    """(peak RSS in KiB of cmd, wall seconds, [(s, VmRSS KiB, chunks done)]), by a fresh wrapper."""
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-c", WRAPPER, str(progress), *cmd], capture_output=True, text=True,
                         check=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    out = json.loads(res.stdout)
    if out["rc"] != 0:
        raise SystemExit(f"{' '.join(cmd)} failed with exit code {out['rc']}")
    return out["maxrss_kib"], time.perf_counter() - t0, out["trace"]


def by_chunk(trace: list) -> dict[int, float]:
    """Max sampled RSS (MiB) while chunk i+1 was being encoded (i = chunks done)."""
    out: dict[int, float] = {}
    for _, kib, done in trace:
        out[done] = max(out.get(done, 0.0), kib / 1024)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--mmap-threshold", type=int, default=None,
                    help="bytes: encode's fixed glibc mmap threshold (DPR_XRISK_MMAP_THRESHOLD; 0: glibc's dynamic one); "
                         "default: encode's own")
    args = ap.parse_args()
    if args.mmap_threshold is not None:
        os.environ["DPR_XRISK_MMAP_THRESHOLD"] = str(args.mmap_threshold)

    model = tiny_model(TINY)
    corpora = {n: corpus_of(n) for n in args.sizes}
    raw = {n: [] for n in args.sizes}
    npy = {}
    for rep in range(args.reps):
        for n in args.sizes:
            out = WORK / "rss" / f"emb-{n}"
            shutil.rmtree(out, ignore_errors=True)
            cmd = [str(CLI), "encode", "--model", str(model), "--corpus", str(corpora[n]), "--out", str(out),
                   "--batch-size", str(args.batch_size), "--threads", "2"]
            kib, wall, trace = peak_rss(cmd, out / "progress-00000-of-00001.json")
            npy[n] = (out / "embeddings-00000-of-00001.npy").stat().st_size
            chunks = by_chunk(trace)
            raw[n].append({"peak_rss_mib": kib / 1024, "wall_s": wall, "rss_mib_by_chunks_done": chunks,
                           "trace_s_kib_chunks": trace})
            print(f"rep {rep} {n:7d} passages: peak RSS {kib / 1024:8.1f} MiB  wall {wall:6.1f} s  "
                  f".npy {npy[n] / 2**20:6.1f} MiB", flush=True)
            print("  RSS by chunk (max MiB sampled while encoding chunk i): "
                  + "  ".join(f"{i + 1}:{v:.0f}" for i, v in sorted(chunks.items())), flush=True)
    peaks = {n: median([r["peak_rss_mib"] for r in raw[n]]) for n in args.sizes}
    lo, hi = min(args.sizes), max(args.sizes)
    growth = peaks[hi] - peaks[lo]
    buffer = (npy[hi] - npy[lo]) / 2**20
    print(f"\n{'passages':>9s} {'peak RSS MiB':>13s} {'.npy MiB':>9s}")
    for n in args.sizes:
        print(f"{n:9d} {peaks[n]:13.1f} {npy[n] / 2**20:9.1f}")
    print(f"growth {lo} -> {hi}: {growth:+.1f} MiB (output buffer grows by {buffer:.1f} MiB; "
          f"{growth - buffer:+.1f} MiB beyond it)")
    meta = json.loads((WORK / "rss" / f"emb-{hi}" / "meta-00000-of-00001.json").read_text())
    save("bench_encode_rss", {"args": vars(args), "model": "tiny random BERT (2 layers, hidden 32, vocab 2000)",
                              "dim": meta["dim"], "raw": {str(n): raw[n] for n in args.sizes},
                              "peak_rss_mib": {str(n): peaks[n] for n in args.sizes},
                              "npy_bytes": {str(n): npy[n] for n in args.sizes},
                              "growth_mib": growth, "growth_beyond_buffer_mib": growth - buffer})


if __name__ == "__main__":
    main()
