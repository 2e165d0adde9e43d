"""Load test of ``dpr-xrisk serve`` on loopback: throughput and latency against in-process ceilings,
and a soak with malformed requests. Bounded: every cell stops after a fixed number of requests or
seconds, whichever comes first, and every server it starts is stopped.

    python eval/bench_serve.py --tiny            # demo sample + MiniLM, about three minutes on 2 busy cores
    python eval/bench_serve.py                   # MiniLM index of ../shared/data/wikipedia-100k (builds it
                                                # once into eval/work/serve-load/, ~30 min of CPU)

What it measures, in order:

1. in-process ceilings on the same questions and threads: dense = ``dense_search`` over every
   question at once (offline batched encoding + one FAISS search), BM25 = pyserini's
   ``LuceneSearcher.batch_search`` (and ``search`` question by question, what the server runs
   on one thread); hybrid's ceiling is both, one after the other;
2. closed-loop clients (each sends its next request when the last one is answered, over a
   kept-alive connection) at concurrency 1, 4, 16, 64, for dense, BM25 and hybrid, against a
   server with batching (``--max-batch 64``) and one without (``--max-batch 1``): QPS and
   p50/p95/p99 latency;
3. a soak of the batching server: 16 clients, 5 % of the requests malformed (bad JSON, wrong
   types, k 0, empty questions, unknown fields, bodies over the limit): counts failed good
   requests (must be 0), bad requests not answered 4xx (must be 0), and the server's RSS growth;
4. with ``--tiny``, a screenshot of the search page in a headless browser (chromium, or Qt WebEngine:
   the ``browser`` extra; ``eval/page_shot.py``).

Writes ``<out>/bench_serve.json`` and prints a Markdown table. The client is Python threads
(http.client): at the tiny model's rates the client's own CPU use is part of what is measured, and
it shares the 2 cores with the server -- read the numbers as a smoke result, not a capacity.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("DPR_XRISK_SHARED_DATA", ROOT.parent / "shared" / "data"))
CLI = [sys.executable, "-m", "dpr_xrisk"]
MODES = ("dense", "bm25", "hybrid")


# ---- the served index ------------------------------------------------------------------------
def build(corpus: Path, work: Path, threads: int) -> tuple[Path, Path]:
    """A MiniLM Flat index and a BM25 index of ``corpus`` in ``work`` (reused when there)."""
    idx, bm25 = work / "idx", work / "bm25"
    if not (idx / "meta.json").exists():
        subprocess.run([*CLI, "encode", "--model", "minilm", "--corpus", str(corpus), "--out", str(work / "emb")], check=True)
        subprocess.run([*CLI, "index", "--embeddings", str(work / "emb"), "--out", str(idx)], check=True)
    if not (bm25 / "meta.json").exists():
        subprocess.run([*CLI, "bm25", "index", "--corpus", str(corpus), "--out", str(bm25), "--threads", str(threads)],
                       check=True)
    return idx, bm25


class Server:
    """``dpr-xrisk serve`` in a subprocess on a free loopback port; ``stop()`` ends it."""

    def __init__(self, idx: Path, bm25: Path, threads: int, max_batch: int, max_wait_ms: float, bf16: bool,
                 timeout: float = 300):
        self.proc = subprocess.Popen([*CLI, "serve", "--index", str(idx), "--bm25-index", str(bm25), "--port", "0",
                                      "--bf16" if bf16 else "--fp32",
                                      "--threads", str(threads), "--max-batch", str(max_batch),
                                      "--max-wait-ms", str(max_wait_ms), "--max-body-bytes", str(64 << 10)],
                                     stderr=subprocess.PIPE, text=True, env={**os.environ, "DPR_XRISK_TOKEN": ""})
        deadline, self.port = time.monotonic() + timeout, None
        while self.port is None:
            line = self.proc.stderr.readline()
            if not line or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("server did not start")
            if line.startswith("serving on "):
                self.port = int(line.split()[2].rsplit(":", 1)[1])
        threading.Thread(target=self.proc.stderr.read, daemon=True).start()  # drain its log

    def batching(self) -> dict:
        """The server's batch counters (/status): batches run and seconds spent running them."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/status", timeout=30) as resp:
            return json.loads(resp.read())["batching"]

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


# ---- the clients -----------------------------------------------------------------------------
def post(conn: http.client.HTTPConnection, body: bytes, content_type="application/json") -> tuple[int, bytes]:
    conn.request("POST", "/search", body=body, headers={"Content-Type": content_type})
    resp = conn.getresponse()
    return resp.status, resp.read()


def percentile(values: list[float], p: float) -> float:
    """The ``p``-th percentile of latencies, cells and ceilings alike (the value at rank int(p/100 * n))."""
    v = sorted(values)
    return v[min(len(v) - 1, int(p / 100 * len(v)))]


def closed_loop(port: int, make_request, concurrency: int, requests: int, seconds: float, check=None) -> dict:
    """``concurrency`` clients, each sending ``make_request(i) -> (body, is_good)`` and waiting for
    the answer, until ``requests`` were sent or ``seconds`` passed. Latencies of good answers;
    ``check(i, body) -> None | str`` (what is wrong) judges each good answer's content."""
    lock, counter = threading.Lock(), [0]
    latencies, failures, bad_not_4xx, bad_sent, wrong = [], [], [], [0], []
    stop_at = time.monotonic() + seconds

    def client():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        while time.monotonic() < stop_at:
            with lock:
                i = counter[0]
                if i >= requests:
                    break
                counter[0] += 1
            body, good = make_request(i)
            t0 = time.perf_counter()
            try:
                status, text = post(conn, body)
            except (OSError, http.client.HTTPException) as e:
                status, text = None, str(e).encode()
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            took = time.perf_counter() - t0
            with lock:
                if good:
                    (latencies.append(took) if status == 200 else failures.append((status, text[:200])))
                    problem = check(i, text) if check is not None and status == 200 else None
                    if problem:
                        wrong.append(problem)
                else:
                    bad_sent[0] += 1
                    if status is None or not 400 <= status < 500:
                        bad_not_4xx.append((status, text[:200]))
            if status == 413:  # the server hangs up on a body it refused unread
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        conn.close()

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    lat = sorted(latencies)

    def pct(p):
        return round(1000 * percentile(lat, p), 2) if lat else None

    return {"concurrency": concurrency, "requests": len(lat) + len(failures) + bad_sent[0], "ok": len(lat),
            "failed_good": len(failures), "bad_sent": bad_sent[0], "bad_not_4xx": len(bad_not_4xx),
            **({"checked": len(latencies), "wrong": len(wrong)} if check is not None else {}),
            "examples": [str(x) for x in (failures + bad_not_4xx + wrong)[:3]], "seconds": round(wall, 2),
            "qps": round(len(lat) / wall, 1) if wall else None, "p50_ms": pct(50), "p95_ms": pct(95), "p99_ms": pct(99)}


BAD_REQUESTS = [  # each must be answered 4xx
    b'{"questions": "where is', b'not json at all', b'["a list"]', b'{"k": 3}', b'{"questions": 7}',
    b'{"questions": "a", "k": 0}', b'{"questions": "a", "k": "ten"}', b'{"questions": "   "}',
    b'{"questions": "a", "shots": 1}', b'{"questions": "a", "mode": "magic"}',
    json.dumps({"questions": "x " * 40000}).encode(),  # over the 64 KiB body limit
]


def good_request(questions, mode):
    def make(i):
        return json.dumps({"questions": questions[i % len(questions)], "k": 10, "mode": mode}).encode(), True
    return make


def expected_answers(r, questions: list[str], mode: str):
    """``check`` for closed_loop: each answer's ranked ids against the in-process retriever ``r``'s
    answer for all the questions as one batch (what ``dpr-xrisk search`` computes for them,
    tests/test_serve.py). An answer is wrong when its ids differ at a rank where its score differs
    by more than 1e-4: a batch's rounding (~1e-6) may swap near-tied passages, nothing else may change."""
    from dpr_xrisk.serve.engine import Limits, make_query

    q = make_query(questions, k=10, mode=mode, limits=Limits(max_questions=len(questions)), has_bm25=True)
    want = [[(h["id"], h["score"]) for h in res["hits"]] for res in r.run_batch([q])[0]]

    def check(i: int, text: bytes):
        got = [(h["id"], h["score"]) for h in json.loads(text)["results"][0]["hits"]]
        exp = want[i % len(questions)]
        if len(got) != len(exp) or any(g[0] != e[0] and abs(g[1] - e[1]) > 1e-4 for g, e in zip(got, exp)):
            return f"question {i % len(questions)}: ids {[g[0] for g in got]} != {[e[0] for e in exp]}"
        return None

    return check


# ---- ceilings ---------------------------------------------------------------------------------
def ceilings(r, questions: list[str], repeat: int = 3) -> dict:
    """Offline throughput of the loaded retriever ``r`` (its threads and precision) on the same
    questions (repeated to at least 200, best of ``repeat``): dense batched search, Lucene
    ``batch_search``, and Lucene ``search`` one question at a time; and the in-process single-question dense time (``dense_search`` on one question, top 10, as
    ``search`` runs it: p50 and p99 over the first 200 questions), what latency at one client is
    held against."""
    from dpr_xrisk.io.questions import Question
    from dpr_xrisk.retrieval.bm25 import bm25_search
    from dpr_xrisk.retrieval.search import dense_search, fuse

    texts = (questions * (200 // len(questions) + 1))[: max(200, len(questions))]
    qs = [Question(str(i), q) for i, q in enumerate(texts)]
    index, ids, meta = r.loaded[0]

    def best(run) -> float:
        run(texts[:8], qs[:8])  # warm-up (Lucene's JIT, torch's first pass)
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            run(texts, qs)
            times.append(time.perf_counter() - t0)
        return min(times)

    dense_s = best(lambda t, q: dense_search(r.encoder, index, ids, meta, q, k=10, batch_size=r.batch_size, bf16=r.bf16,
                                             progress=False))
    single = []
    for q in qs[:200]:
        t0 = time.perf_counter()
        dense_search(r.encoder, index, ids, meta, [q], k=10, batch_size=r.batch_size, bf16=r.bf16, progress=False)
        single.append((time.perf_counter() - t0) * 1000)
    batch_s = best(lambda t, q: r.searcher.batch_search(t, [x.qid for x in q], k=10, threads=r.threads))
    # hybrid as `search --bm25-index` runs it, and as the server does: both lists 1,000 deep, fused
    t0 = time.perf_counter()
    deep = {"dense": dense_search(r.encoder, index, ids, meta, qs, k=r.depth, batch_size=r.batch_size, bf16=r.bf16,
                                  progress=False),
            "bm25": bm25_search(None, qs, k=r.depth, threads=r.threads, progress=False, searcher=r.searcher)}
    fuse(deep["dense"], deep["bm25"], k=10)
    deep_s = time.perf_counter() - t0
    loop_s = best(lambda t, q: [r.searcher.search(x, k=10) for x in t])
    n = len(texts)
    return {"questions": n, "dense_qps": round(n / dense_s, 1), "bm25_qps": round(n / batch_s, 1),
            "bm25_search_loop_qps": round(n / loop_s, 1), "hybrid_qps": round(n / (dense_s + min(batch_s, loop_s)), 1),
            "hybrid_deep_qps": round(n / deep_s, 1), "depth": r.depth,
            "dense_single_p50_ms": round(percentile(single, 50), 2), "dense_single_p99_ms": round(percentile(single, 99), 2)}


def screenshot(port: int, out: Path) -> Path | None:
    """The search page in a real headless browser (eval/page_shot.py); None where there is none."""
    from urllib.parse import urlencode

    url = f"http://127.0.0.1:{port}/?" + urlencode({"q": "Where does the Danube start?", "k": 5, "mode": "hybrid",
                                                     "answers": "Black Forest"})
    shot = subprocess.run([sys.executable, str(Path(__file__).with_name("page_shot.py")), url, str(out), "--size", "1100x1000"],
                          capture_output=True, timeout=300)
    return out if shot.returncode == 0 and out.exists() else None


# ---- main ------------------------------------------------------------------------------------
def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tiny", action="store_true", help="The demo sample (data/sample): seconds per cell, a smoke test.")
    p.add_argument("--corpus", type=Path, help="Default: data/sample/passages.tsv (--tiny), else ../shared/data/wikipedia-100k/psgs.tsv.")
    p.add_argument("--queries", type=Path, help="Default: data/sample/test+dev questions (--tiny), else nq-open-train/train.json.")
    p.add_argument("--work", type=Path, help="Where the indexes are built (reused); default eval/work/serve-load[-tiny].")
    p.add_argument("--out", type=Path, help="Where bench_serve.json goes; default: --work.")
    p.add_argument("--threads", type=int, default=1, help="Server threads (torch, FAISS, Lucene); the ceilings use the same.")
    p.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16, 64])
    p.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    p.add_argument("--requests", type=int, help="Requests per cell (default 200 with --tiny, 2000).")
    p.add_argument("--seconds", type=float, help="Longest a cell runs (default 4 with --tiny, 60).")
    p.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                   help="The query tower's precision, server and ceilings alike (pinned: the server's default is auto).")
    p.add_argument("--soak-requests", type=int, help="Requests of the soak (default 600 with --tiny, 10000).")
    args = p.parse_args(argv)

    from dpr_xrisk.io.questions import read_questions
    from harness import cpu_kind  # eval/ is on sys.path: this file runs as a script

    tiny = args.tiny
    sample = ROOT / "data" / "sample"
    corpus = args.corpus or (sample / "passages.tsv" if tiny else SHARED / "wikipedia-100k" / "psgs.tsv")
    work = args.work or ROOT / "eval" / "work" / ("serve-load-tiny" if tiny else "serve-load")
    out = args.out or work
    requests = args.requests or (200 if tiny else 2000)
    seconds = args.seconds or (4.0 if tiny else 60.0)
    soak_n = args.soak_requests or (600 if tiny else 10000)
    if args.queries:
        questions = [q.text for q in read_questions(args.queries)]
    elif tiny:
        questions = [q.text for f in ("test.qa.tsv", "dev.qa.tsv") for q in read_questions(sample / f)]
    else:
        questions = [q.text for q in read_questions(SHARED / "nq-open-train" / "train.json")][:1000]
    work.mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    idx, bm25 = build(corpus, work, args.threads)
    report = {"tiny": tiny, "corpus": str(corpus), "questions": len(questions), "threads": args.threads,
              "precision": args.precision, "cpu": cpu_kind(),
              "requests_per_cell": requests, "seconds_per_cell": seconds, "cpus": os.cpu_count(),
              "load_average": os.getloadavg(), "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    print("ceilings (in-process) ...", file=sys.stderr)
    from dpr_xrisk.serve.engine import load_retriever

    bf16 = args.precision == "bf16"
    local = load_retriever([idx], bm25_index=bm25, threads=args.threads, bf16=bf16)  # what the server loads
    report["ceilings"] = ceilings(local, questions)
    report["cells"] = []
    for label, max_batch, wait in (("batching", 64, 2.0), ("no batching", 1, 0.0)):
        server = Server(idx, bm25, args.threads, max_batch, wait, bf16)
        try:
            for mode in args.modes:
                for c in args.concurrency:
                    print(f"{label} {mode} c={c} ...", file=sys.stderr)
                    before = server.batching()
                    cell = closed_loop(server.port, good_request(questions, mode), c, requests, seconds)
                    after = server.batching()
                    batches = after["batches"] - before["batches"]
                    report["cells"].append({"server": label, "mode": mode, **cell,  # the worker's share of the cell
                                            "mean_batch": round(cell["requests"] / batches, 2) if batches else None,
                                            "busy": round((after["busy_s"] - before["busy_s"]) / cell["seconds"], 2)})
            if label == "batching":
                print("soak ...", file=sys.stderr)
                rng = random.Random(0)
                bad = set(rng.sample(range(soak_n), soak_n // 20))  # 5 %
                good = good_request(questions, "hybrid")

                def soak_request(i):
                    return (BAD_REQUESTS[i % len(BAD_REQUESTS)], False) if i in bad else good(i)

                check = expected_answers(local, questions, "hybrid")
                rss0 = server.rss_mb()
                soak = closed_loop(server.port, soak_request, 16, soak_n, seconds * 10, check=check)
                report["soak"] = {**soak, "rss_before_mb": round(rss0, 1), "rss_after_mb": round(server.rss_mb(), 1)}
                if tiny:
                    shot = screenshot(server.port, out / "serve-page.png")
                    report["screenshot"] = str(shot) if shot else None
        finally:
            server.stop()
    (out / "bench_serve.json").write_text(json.dumps(report, indent=2) + "\n")
    print(table(report))
    print(f"wrote {out / 'bench_serve.json'}", file=sys.stderr)
    soak = report["soak"]
    return 0 if soak["failed_good"] == 0 and soak["bad_not_4xx"] == 0 and soak["wrong"] == 0 else 1


def table(report: dict) -> str:
    c = report["ceilings"]
    lines = [f"in-process ceilings ({c['questions']} questions, {report['threads']} thread(s)): dense {c['dense_qps']} q/s, "
             f"BM25 batch_search {c['bm25_qps']} q/s (search per question {c['bm25_search_loop_qps']} q/s), "
             f"hybrid {c['hybrid_qps']} q/s (at the server's depth {c.get('depth')}: {c.get('hybrid_deep_qps')} q/s); one question in-process: dense p50 {c['dense_single_p50_ms']} ms, "
             f"p99 {c['dense_single_p99_ms']} ms ({report['precision']}, {report['cpu']['cpu_model']} {' '.join(report['cpu']['cpu_flags'])})", "",
             "| server | mode | clients | requests | QPS | p50 ms | p95 ms | p99 ms | failed | mean batch | worker busy |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in report["cells"]:
        lines.append(f"| {r['server']} | {r['mode']} | {r['concurrency']} | {r['ok']} | {r['qps']} | {r['p50_ms']} | "
                     f"{r['p95_ms']} | {r['p99_ms']} | {r['failed_good']} | {r.get('mean_batch', '')} | {r.get('busy', '')} |")
    s = report["soak"]
    lines += ["", f"soak: {s['requests']} requests ({s['bad_sent']} malformed) by 16 clients in {s['seconds']} s: "
              f"{s['failed_good']} failed good requests, {s.get('wrong', 'unchecked')} of {s.get('checked', '?')} answers "
              f"with ids other than the in-process search's, {s['bad_not_4xx']} malformed not answered 4xx; "
              f"RSS {s['rss_before_mb']} -> {s['rss_after_mb']} MB"]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
