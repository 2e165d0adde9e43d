"""int8 inference (issue #13, torch backend): speed and quality against fp32 and bf16, side by side.

Speed: passages/s of ``encode_passages`` on the first ``--n`` passages of wikipedia-100k for ours
fp32, bf16 and int8 (``--quantize int8``) and sentence-transformers fp32 (``encode``), same
model (MiniLM), max length 256, batch 64 (``--batch-size N``, or ``best``: each path at its own best), ``--threads`` threads, repetitions interleaved (the
order rotates), medians reported; plus the machine's fp32 GEMM rate (2048^3 matmul on the same
threads) and each path's GFLOP/s as a share of it (FLOPs counted from the Linear layers and the
attention products at each passage's token count). Where the toolkit packs int8 weights for
another torch engine than ``x86`` (``onednn`` on a CPU with AMX-INT8, ``dpr_xrisk.runtime.quantize.int8_engine``),
the x86 engine's int8 runs beside it as ``ours int8 x86 engine``.

Quality: zero-shot MiniLM on the SQuAD held-out articles (``convert squad --test-fraction 0.25
--seed 0``; the 3,244 test questions against the test articles' paragraphs, bench_refresh's
``test-articles`` corpus), passages and questions encoded in fp32, bf16 and int8: DPR top-1/5/20,
RR@10 by answer, and the overlap of each top-20 with fp32's.

    python eval/bench_quantize.py [--n 1000 --reps 3 --threads 2]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from _common import EVAL, RESULTS, SHARED, WIKI, WORK, kind_suffix, machine, median, replace_section  # noqa: E402
from dpr_xrisk.runtime.device import cpu_has_native_bf16  # noqa: E402

BASE = WORK / "quantize"
# the bf16 rows need a CPU with native bfloat16; elsewhere they are left out (see device.py's warning)
NATIVE_BF16 = cpu_has_native_bf16()


def gemm_gflops(reps: int = 3) -> float:
    a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
    a @ b
    t0 = time.perf_counter()
    for _ in range(reps):
        a @ b
    return 2 * 2048 ** 3 * reps / (time.perf_counter() - t0) / 1e9


def flops_per_passage(encoder, n_tokens: np.ndarray) -> np.ndarray:
    linear = sum(m.in_features * m.out_features for m in encoder.passage_model.modules() if isinstance(m, torch.nn.Linear))
    cfg = encoder.passage_model.config
    attention = 4 * n_tokens.astype(np.float64) ** 2 * cfg.hidden_size * cfg.num_hidden_layers  # QK^T and AV
    return 2 * linear * n_tokens + attention


class StOnnx:
    """sentence-transformers' ONNX backend in its own Python (``_st_onnx_worker.py``)."""

    def __init__(self, python: str, model_dir: str, joined: list[str], threads: int, mode: str, batch: int = 64):
        import subprocess

        self.file = BASE / f"st-onnx-passages-{len(joined)}.json"
        BASE.mkdir(parents=True, exist_ok=True)
        self.file.write_text(json.dumps(joined))
        self.proc = subprocess.Popen([python, str(Path(__file__).parent / "_st_onnx_worker.py"), model_dir, str(self.file),
                                      str(threads), mode, str(batch)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline().strip()
        if line != "ready":
            raise SystemExit(f"sentence-transformers ONNX worker did not start ({line!r})")

    def run(self) -> float:
        self.proc.stdin.write("run\n")
        self.proc.stdin.flush()
        return float(self.proc.stdout.readline())

    def embeddings(self) -> np.ndarray:
        out = BASE / "st-onnx-emb.npy"
        self.proc.stdin.write(f"dump {out}\n")
        self.proc.stdin.flush()
        self.proc.stdout.readline()
        return np.load(out)


# each path's best batch on a CPU: ours = the toolkit's measured default (encode_batch_size, from
# eval/bench_batch.py: fp32 and int8 peak at 16, bf16 at 64); sentence-transformers' paths get ours
# fp32's batch
def _best() -> dict:
    from dpr_xrisk.runtime.device import encode_batch_size

    cpu = torch.device("cpu")
    fp32, bf16 = encode_batch_size(cpu), encode_batch_size(cpu, bf16=True)
    return {"ours fp32": fp32, "ours bf16": bf16, "ours int8": fp32, "ours int8 x86 engine": fp32, "ours onnx fp32": fp32, "ours onnx int8": fp32,
            "st fp32": fp32, "st onnx fp32": fp32, "st onnx qint8": fp32}


def batches(spec: str) -> dict:
    """--batch-size: one number for every path, or ``best`` (each path at its best, :func:`_best`)."""
    best = _best()
    return best if spec == "best" else dict.fromkeys(best, int(spec))


def speed(args, fp32, int8, onnx32=None, onnx8=None, int8_x86=None) -> dict:
    from sentence_transformers import SentenceTransformer

    from dpr_xrisk.retrieval.encoder import resolve_model_path
    from dpr_xrisk.io.passages import read_passages

    ps = [p for _, p in zip(range(args.n), read_passages(WIKI, check_duplicates=False))]
    titles, texts = [p.title for p in ps], [p.text for p in ps]
    st = SentenceTransformer(str(resolve_model_path("minilm")), device="cpu")
    st.max_seq_length = 256
    joined = [f"{t} {x}" for t, x in zip(titles, texts)]
    b = batches(args.batch_size)
    paths = {"ours fp32": lambda: fp32.encode_passages(titles, texts, batch_size=b["ours fp32"]),
             # (bf16 is ~10x slower than fp32 without AVX512-BF16/AMX: minutes per repetition, nothing to learn)
             **({"ours bf16": lambda: fp32.encode_passages(titles, texts, batch_size=b["ours bf16"], bf16=True)}
                if NATIVE_BF16 else {}),
             "ours int8": lambda: int8.encode_passages(titles, texts, batch_size=b["ours int8"]),
             # where the default int8 engine is not x86 (onednn on AMX-INT8): x86's kernels beside it
             **({"ours int8 x86 engine": lambda: int8_x86.encode_passages(titles, texts, batch_size=b["ours int8 x86 engine"])}
                if int8_x86 is not None else {}),
             "st fp32": lambda: st.encode(joined, batch_size=b["st fp32"], convert_to_numpy=True)}
    if onnx32 is not None:
        paths["ours onnx fp32"] = lambda: onnx32.encode_passages(titles, texts, batch_size=b["ours onnx fp32"])
        paths["ours onnx int8"] = lambda: onnx8.encode_passages(titles, texts, batch_size=b["ours onnx int8"])
    workers = {}
    if args.st_python:  # each timed inside its worker (the encode call only), interleaved with the rest
        for mode in ("fp32", "qint8"):
            workers[f"st onnx {mode}"] = StOnnx(args.st_python, str(resolve_model_path("minilm")), joined, args.threads,
                                                mode, b[f"st onnx {mode}"])
    emb = {}
    for name, fn in paths.items():  # warm-up, and the vectors each path gives
        emb[name] = fn()
    times: dict[str, list] = {k: [] for k in list(paths) + list(workers)}
    names = list(times)
    for r in range(args.reps):
        for name in names[r % len(names):] + names[: r % len(names)]:
            if name in workers:
                times[name].append(workers[name].run())
                continue
            t0 = time.perf_counter()
            paths[name]()
            times[name].append(time.perf_counter() - t0)
    for name, w in workers.items():
        emb[name] = w.embeddings()
        w.proc.stdin.close()
        w.proc.wait()
    ref_v = emb["ours fp32"]
    cos = {k: float(((v * ref_v).sum(1) / np.linalg.norm(v, axis=1) / np.linalg.norm(ref_v, axis=1)).min())
           for k, v in emb.items()}
    tokens = np.array([len(x) for x in fp32.tokenize_passages(titles, texts, padding=False, return_tensors=None)["input_ids"]])
    gflop = float(flops_per_passage(fp32, tokens).sum()) / 1e9
    peak = gemm_gflops()
    out = {"passages": len(ps), "mean_tokens": round(float(tokens.mean()), 1), "gemm_fp32_gflops": round(peak, 1), "paths": {}}
    ref = args.n / median(times["st fp32"])
    for name, ts in times.items():
        rate = args.n / median(ts)
        out["paths"][name] = {"batch_size": b[name], "seconds": [round(t, 2) for t in ts], "psg_per_s": round(rate, 1),
                              "vs_st_fp32": round(rate / ref, 3), "gflops": round(gflop / median(ts), 1),
                              "share_of_fp32_gemm": round(gflop / median(ts) / peak, 3),
                              "min_cosine_vs_ours_fp32": round(cos[name], 4)}
    return out


def quality(fp32, int8, onnx8=None) -> dict:
    from dpr_xrisk.evaluation.answers import has_answer
    from dpr_xrisk.io.convert import squad_to_dpr
    from dpr_xrisk.io.passages import read_passages
    from dpr_xrisk.io.questions import read_questions

    squad = BASE / "squad"
    if not (squad / "test.qa.tsv").exists():
        squad_to_dpr(SHARED / "squad-v1.1-dev" / "dev-v1.1.json", squad, test_fraction=0.25, seed=0)
    test_articles = set(json.loads((squad / "convert-meta.json").read_text())["test_articles"])
    ps = [p for p in read_passages(squad / "passages.tsv") if int(p.id.split("-")[1]) in test_articles]
    qs = read_questions(squad / "test.qa.tsv")
    out, tops, hit1 = {"passages": len(ps), "questions": len(qs)}, {}, {}
    runs = [("fp32", fp32, False), *([("bf16", fp32, True)] if NATIVE_BF16 else []), ("int8", int8, False)]
    if onnx8 is not None:
        runs.append(("onnx int8", onnx8, False))
    for name, enc, bf16 in runs:
        p = enc.encode_passages([x.title for x in ps], [x.text for x in ps], bf16=bf16)
        q = enc.encode_queries([x.text for x in qs], bf16=bf16)
        top = np.argsort(-(q @ p.T), axis=1)[:, :20]
        tops[name] = top
        hit1[name] = np.array([has_answer(ps[row[0]].text, qq.answers) for row, qq in zip(top, qs)])
        first = np.array([next((r for r, i in enumerate(row) if has_answer(ps[i].text, qq.answers)), 99)
                          for row, qq in zip(top, qs)])
        out[name] = {"top1": round(float((first < 1).mean()), 4), "top5": round(float((first < 5).mean()), 4),
                     "top20": round(float((first < 20).mean()), 4),
                     "rr@10": round(float(np.where(first < 10, 1.0 / (first + 1), 0.0).mean()), 4)}
    for name in [r[0] for r in runs[1:]]:
        # questions this encoding gets right at rank 1 and fp32 does not, and the reverse
        out[name]["top1_won_lost_vs_fp32"] = [int((hit1[name] & ~hit1["fp32"]).sum()), int((~hit1[name] & hit1["fp32"]).sum())]
        out[name]["top20_overlap_with_fp32"] = round(float(np.mean([len(set(a) & set(b)) / 20 for a, b in
                                                                    zip(tops["fp32"], tops[name])])), 4)
    return out


def quality_table(qu: dict) -> str:
    """The markdown table of :func:`quality`'s result."""
    return ("| encoding | top-1 | top-5 | top-20 | RR@10 | top-20 overlap with fp32 | top-1 won / lost vs fp32 |\n"
            "|---|---:|---:|---:|---:|---:|---:|\n"
            + "\n".join(f"| {k} | {qu[k]['top1']:.4f} | {qu[k]['top5']:.4f} | {qu[k]['top20']:.4f} | {qu[k]['rr@10']:.4f} | "
                         f"{qu[k].get('top20_overlap_with_fp32', 1.0):.4f} | "
                         f"{' / '.join(map(str, qu[k].get('top1_won_lost_vs_fp32', ['—'])))} |"
                         for k in qu if isinstance(qu[k], dict)) + "\n")


def full_section(res: dict, batch_size: str) -> tuple[str, str]:
    """(heading, Markdown section) of a full run's result (``res``, as saved in its JSON)."""
    sp, qu = res["speed"], res["quality"]
    rows = "\n".join(f"| {k} | {v.get('batch_size', 64)} | {v['psg_per_s']} | {v['vs_st_fp32']} | {v['gflops']} | {v['share_of_fp32_gemm']:.0%} | "
                     f"{v['min_cosine_vs_ours_fp32']:.4f} | {', '.join(map(str, v['seconds']))} |" for k, v in sp["paths"].items())
    sfx = "" if batch_size == "64" else f"-batch-{batch_size}"
    title = "## int8 inference (issue #13)" + ("" if not sfx else
                                                ", each path at its best batch" if batch_size == "best" else
                                                f", batch {batch_size}") + kind_suffix()[0]
    cpu = f"CPU {res['machine'].get('cpu_model', '?')} ({', '.join(res['machine'].get('cpu_flags', []))}); "
    section = (f"{title}\n\nCommand: `{res['command'].strip()}`  \nDate: {res['machine']['date']}; {cpu}"
               f"{res['threads']} threads; fp32 GEMM {sp['gemm_fp32_gflops']} GFLOP/s; ONNX export seconds {res['onnx_export_seconds'] or '—'}; "
               f"torch int8: per-channel weights, {res['int8_activation_bits']}-bit activations, "
               f"{res.get('int8_engine', 'x86')} engine; torch and ONNX int8: "
               f"{res.get('int8_smoothed_channels', 0)} outlier channels smoothed per FFN Linear."
               + ("" if "ours bf16" in sp["paths"] else " No bf16 rows: this CPU has no native bfloat16 (~10x slower than fp32).")
               + "\n\n"
               f"Speed, {sp['passages']:,} Wikipedia passages (mean {sp['mean_tokens']} tokens), repetitions interleaved:\n\n"
               "| path | batch | psg/s (median) | vs ST fp32 | GFLOP/s | share of fp32 GEMM | min cosine vs ours fp32 | seconds per rep |\n|---|---:|---:|---:|---:|---:|---:|---|\n"
               + rows + f"\n\nQuality, zero-shot MiniLM, {qu['questions']:,} SQuAD held-out questions x {qu['passages']} "
               "test-article paragraphs (DPR answer match):\n\n"
               + quality_table(qu))
    return title, section


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-onnx", action="store_true", help="skip our ONNX Runtime paths (no 'fast' extra)")
    ap.add_argument("--batch-size", default="64",
                    help="passages per forward pass for every path, or 'best': each path at its measured best (_best)")
    ap.add_argument("--st-python", default=None,
                    help="a Python with sentence-transformers + optimum-onnx (transformers 4.x) for ST's own ONNX "
                         "fp32/qint8 paths, e.g. a venv made by eval/st_onnx_venv.sh")
    ap.add_argument("--quality-only", action="store_true",
                    help="the quality half alone (load-independent: it can run beside another job); its own JSON and section")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    from dpr_xrisk.retrieval.encoder import DualEncoder
    from dpr_xrisk.runtime.quantize import quantized

    fp32 = DualEncoder.load("minilm").eval()
    int8 = quantized(fp32, "int8")
    int8_x86 = quantized(fp32, "int8", engine="x86") if int8.int8_engine != "x86" else None
    onnx32 = onnx8 = None
    export = {}
    if not args.no_onnx:
        from dpr_xrisk.runtime.onnx_backend import onnx_encoder

        cache = BASE / "onnx-cache"
        onnx32, export["fp32_s"] = onnx_encoder(fp32, "none", cache, threads=args.threads)
        onnx8, export["int8_s"] = onnx_encoder(fp32, "int8", cache, threads=args.threads)
    if args.quality_only:
        from dpr_xrisk.runtime.quantize import cpu_has_vnni

        qu = {"command": "python eval/bench_quantize.py " + " ".join(sys.argv[1:]), "machine": machine(),
              "int8_activation_bits": int8.activation_bits, "int8_smoothed_channels": int8.smoothed_channels,
              "vnni": cpu_has_vnni(), "quality": quality(fp32, int8, onnx8)}
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / f"bench_quantize-quality{kind_suffix()[1]}.json").write_text(json.dumps(qu, indent=2) + "\n")
        q = qu["quality"]
        title = "## int8 inference (issue #13), quality only" + kind_suffix()[0]
        section = (f"{title}\n\nCommand: `{qu['command'].strip()}`  \nDate: {qu['machine']['date']}; torch int8 with "
                   f"{int8.activation_bits}-bit activations (VNNI: {qu['vnni']}), per-channel weights, "
                   f"{int8.smoothed_channels} outlier channels smoothed per FFN Linear (torch and ONNX int8).\n\n"
                   f"Zero-shot MiniLM, {q['questions']:,} SQuAD held-out questions x {q['passages']} test-article "
                   "paragraphs (DPR answer match):\n\n"
                   + quality_table(q))
        print(section)
        replace_section(EVAL / "RESULTS.md", title, section)
        return
    res = {"command": "python eval/bench_quantize.py " + " ".join(sys.argv[1:]), "machine": machine(),
           "threads": args.threads, "int8_activation_bits": int8.activation_bits, "int8_engine": int8.int8_engine,
           "int8_smoothed_channels": int8.smoothed_channels, "onnx_export_seconds": export,
           "speed": speed(args, fp32, int8, onnx32, onnx8, int8_x86),
           "quality": quality(fp32, int8, onnx8)}
    RESULTS.mkdir(exist_ok=True)
    sfx = ("" if args.batch_size == "64" else f"-batch-{args.batch_size}") + kind_suffix()[1]
    (RESULTS / f"bench_quantize{sfx}.json").write_text(json.dumps(res, indent=2) + "\n")
    title, section = full_section(res, args.batch_size)
    print(section)
    replace_section(EVAL / "RESULTS.md", title, section)


if __name__ == "__main__":
    main()
