"""``dpr-xrisk serve``: answers equal ``search``'s, dynamic batching, every bad-request class is
a one-line 4xx and the server keeps serving, the token, MCP in-process and over HTTP, the CLI in
a subprocess, and the search page in a headless browser (skipped without chromium).

One tiny index of the demo sample (random 2-layer BERT) and one BM25 index serve the module;
servers listen on free loopback ports and are stopped by each test."""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import pytest

from conftest import ROOT, SAMPLE, cli
from eval import page_shot
from dpr_xrisk.io.questions import read_questions


@pytest.fixture(scope="module")
def built(tiny_model_dir, tmp_path_factory):
    d = tmp_path_factory.mktemp("serve")
    cli("encode", "--model", tiny_model_dir, "--corpus", SAMPLE / "passages.tsv", "--out", d / "emb")
    cli("index", "--embeddings", d / "emb", "--out", d / "idx")
    cli("bm25", "index", "--corpus", SAMPLE / "passages.tsv", "--out", d / "bm25")
    return d


@pytest.fixture(scope="module")
def retriever(built):
    from dpr_xrisk.serve.engine import load_retriever

    return load_retriever([built / "idx"], bm25_index=built / "bm25", threads=1)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serving(retriever, **options):
    """A uvicorn server of ``create_app(retriever, **options)`` on a free loopback port, in a
    thread; yields its base URL; stops it on exit."""
    import uvicorn

    from dpr_xrisk.serve.app import create_app

    server = uvicorn.Server(uvicorn.Config(create_app(retriever, **options), host="127.0.0.1", port=free_port(),
                                           log_level="critical"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "server did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{server.config.port}"
    finally:
        server.should_exit = True
        thread.join(10)
        assert not thread.is_alive()


def call(base, method, path, body=None, raw: bytes | None = None, headers=None, chunked=False):
    """(status, headers, body text) of one request; ``raw`` is sent as is."""
    host, port = base.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    hdrs = {"Content-Type": "application/json", **(headers or {})}
    if chunked:
        conn.request(method, path, body=iter([data[i : i + 4096] for i in range(0, len(data), 4096)]), headers=hdrs,
                     encode_chunked=True)
    else:
        conn.request(method, path, body=data, headers=hdrs)
    resp = conn.getresponse()
    out = resp.status, dict(resp.getheaders()), resp.read().decode()
    conn.close()
    return out


def ok(base, body, **kw) -> dict:
    status, _, text = call(base, "POST", "/search", body, **kw)
    assert status == 200, text
    return json.loads(text)


def as_run(results) -> list[list[tuple[str, float]]]:
    return [[(h["id"], h["score"]) for h in r["hits"]] for r in results]


def same_ranking(a, b, tol=1e-4):
    """Two ranked lists agree: equal scores within ``tol`` rank by rank, and equal ids wherever no
    other score in either list comes within ``2 * tol`` and the rank is not the last (near-ties may
    swap, also across the cut: the random tiny model scores many passages alike, and a question
    alone is encoded without a batch's padding, which moves its scores by ~1e-6)."""
    assert len(a) == len(b)
    scale = 2 * tol * max(1.0, *(abs(s) for _, s in a))
    for i, ((da, sa), (db, sb)) in enumerate(zip(a, b)):
        assert abs(sa - sb) <= scale / 2, (i, a[i], b[i])
        others = [s for j, (_, s) in enumerate(a + b) if j % len(a) != i]
        if i < len(a) - 1 and all(abs(s - sa) > scale for s in others):
            assert da == db, (i, a[i], b[i])


# ---- answers equal `search` -----------------------------------------------------------------
@pytest.mark.parametrize("mode, options", [("dense", []), ("bm25", []), ("hybrid", ["--fusion", "rrf"]),
                                           ("hybrid", ["--fusion", "interpolation", "--alpha", "0.7"])])
def test_answers_equal_search(built, retriever, tmp_path, mode, options, monkeypatch):
    # FAISS's exact scan as `search` runs it for this many questions (one pass per question): the
    # batched matrix product rounds in the last digits (test_batched_exact_scan_rounds_in_the_last_digits)
    monkeypatch.setattr("dpr_xrisk.serve.engine.BLAS_FROM", 10**9)
    questions = read_questions(SAMPLE / "test.qa.tsv")
    out = tmp_path / "run.json"
    if mode == "bm25":
        cli("bm25", "search", "--index", built / "bm25", "--queries", SAMPLE / "test.qa.tsv", "--k", 7, "--out-json", out)
    else:
        cli("search", "--index", built / "idx", "--queries", SAMPLE / "test.qa.tsv", "--k", 7, "--out-json", out,
            *(["--bm25-index", built / "bm25", *options] if mode == "hybrid" else []))
    expected = json.loads(out.read_text())
    body = {"questions": [q.text for q in questions], "k": 7, "mode": mode, "answers": [list(q.answers) for q in questions]}
    if options:
        body["fusion"] = options[1]
        body["alpha"] = float(options[3]) if len(options) > 2 else 0.5
    with serving(retriever) as base:
        got = ok(base, body)["results"]
        # the same questions one request each, sent together: batched with each other
        with ThreadPoolExecutor(8) as pool:
            alone = list(pool.map(lambda q: ok(base, {**body, "questions": q.text, "answers": list(q.answers)})["results"][0],
                                  questions))
    for q, r, single in zip(questions, got, alone):
        contexts = expected[q.qid]["contexts"]
        # one request of all the questions is encoded as `search` encodes them: bit for bit
        assert [(c["docid"], c["score"], c["has_answer"]) for c in contexts] == [
            (h["id"], h["score"], h["has_answer"]) for h in r["hits"]]
        assert [c["text"] for c in contexts] == [f"{h['title']}\n{h['text']}" for h in r["hits"]]
        assert [h["rank"] for h in r["hits"]] == list(range(1, len(contexts) + 1))
        if mode != "hybrid":  # hybrid fuses 1,000-deep lists, where near-tied dense ranks swap
            same_ranking(as_run([single])[0], [(c["docid"], c["score"]) for c in contexts])


def test_batched_exact_scan_rounds_in_the_last_digits(built, retriever, tmp_path):
    """A batch of BLAS_FROM or more questions is scanned as one matrix product: the same ranking
    as `search` (near-ties aside), scores within 1e-6."""
    from dpr_xrisk.serve.engine import BLAS_FROM

    questions = read_questions(SAMPLE / "test.qa.tsv")
    assert len(questions) >= BLAS_FROM
    out = tmp_path / "run.json"
    cli("search", "--index", built / "idx", "--queries", SAMPLE / "test.qa.tsv", "--k", 7, "--out-json", out)
    expected = json.loads(out.read_text())
    with serving(retriever) as base:
        got = ok(base, {"questions": [q.text for q in questions], "k": 7})["results"]
    for q, r in zip(questions, got):
        same_ranking(as_run([r])[0], [(c["docid"], c["score"]) for c in expected[q.qid]["contexts"]], tol=1e-6)


def test_blas_from_sets_the_scan_for_the_batch_and_restores_it():
    import faiss

    from dpr_xrisk.serve.engine import BLAS_FROM, blas_from

    before = faiss.cvar.distance_compute_blas_threshold
    with blas_from(BLAS_FROM - 1, 384):
        assert faiss.cvar.distance_compute_blas_threshold == before  # small batches: one pass each
    with blas_from(BLAS_FROM, 384):
        assert faiss.cvar.distance_compute_blas_threshold == min(before, BLAS_FROM * 384)  # FAISS: BLAS when n*d >= it
    with pytest.raises(RuntimeError), blas_from(64, 384):
        raise RuntimeError
    assert faiss.cvar.distance_compute_blas_threshold == before


def test_the_worker_thread_runs_faiss_with_the_server_threads(retriever):
    """OpenMP's thread count is per thread: --threads must reach the thread that runs the batches."""
    import faiss

    from dpr_xrisk.serve.batcher import Batcher

    seen = []
    old = retriever.threads
    retriever.threads = 1
    try:
        b = Batcher(lambda payloads: [seen.append(faiss.omp_get_max_threads())] * len(payloads),
                    on_thread_start=retriever.on_worker_start)
        b.submit("x", 1).result(10)
        b.close()
    finally:
        retriever.threads = old
    assert seen == [1]


def test_answer_spans_mark_exactly_the_answer_bearing_hits(retriever):
    from dpr_xrisk.evaluation.answers import has_answer
    from dpr_xrisk.serve.engine import answer_spans

    for q in read_questions(SAMPLE / "test.qa.tsv"):
        for _, text in retriever.passages.values():
            spans = answer_spans(text, q.answers)
            assert bool(spans) == has_answer(text, q.answers)
            for s, e in spans:
                assert has_answer(text[s:e], q.answers)
    assert answer_spans("Born in Ulm, Württemberg.", ["württemberg"]) == [(13, 24)]


# ---- batching ---------------------------------------------------------------------------------
def test_batcher_batches_under_load_and_never_waits_when_idle():
    from dpr_xrisk.serve.batcher import Batcher

    gate, sizes = threading.Event(), []

    def run(payloads):
        gate.wait(5)
        sizes.append(len(payloads))
        return [ValueError("bad") if p == "bad" else p * 2 for p in payloads]

    b = Batcher(run, max_batch=4, max_wait_ms=2000)
    gate.set()
    t0 = time.perf_counter()
    assert b.submit(1, 1).result(5) == 2
    assert time.perf_counter() - t0 < 1.0  # idle: no 2 s wait for company
    gate.clear()
    first = b.submit(0, 1)  # holds the worker while the rest queue up
    time.sleep(0.1)
    futures = [b.submit(i, 1) for i in range(5)] + [b.submit("bad", 1)]
    assert b.queue_depth == 6
    gate.set()
    assert first.result(5) == 0 and [f.result(5) for f in futures[:5]] == [0, 2, 4, 6, 8]
    with pytest.raises(ValueError):
        futures[5].result(5)  # a failed job fails alone
    assert sizes[1:] == [1, 4, 2] and max(sizes) <= 4
    b.close()


def test_unbatchable_jobs_run_alone_and_keep_their_turn():
    """BM25-only queries gain nothing from a batch (Lucene takes one question at a time): each runs
    alone, right after the batch it was queued behind, and the others still batch together."""
    from dpr_xrisk.serve.batcher import Batcher
    from dpr_xrisk.serve.engine import Retriever, make_query

    gate, batches = threading.Event(), []

    def run(payloads):
        gate.wait(5)
        batches.append(list(payloads))
        return list(payloads)

    b = Batcher(run, max_batch=8, max_wait_ms=50, batchable=lambda p: not p.startswith("bm25"))
    first = b.submit("dense-0", 1)  # holds the worker while the rest queue up
    time.sleep(0.1)
    rest = [b.submit(p, 1) for p in ("dense-1", "bm25-a", "dense-2", "bm25-b", "dense-3")]
    gate.set()
    assert first.result(5) == "dense-0" and [f.result(5) for f in rest] == ["dense-1", "bm25-a", "dense-2", "bm25-b", "dense-3"]
    assert batches == [["dense-0"], ["dense-1", "dense-2", "dense-3"], ["bm25-a"], ["bm25-b"]]
    assert b.queue_depth == 0
    b.close()
    assert [Retriever.batchable(make_query("q", mode=m, has_bm25=True)) for m in ("dense", "bm25", "hybrid")] == [True, False, True]


def test_concurrent_requests_are_encoded_together(retriever):
    questions = [q.text for q in read_questions(SAMPLE / "dev.qa.tsv")]
    with serving(retriever, max_batch=64, max_wait_ms=20) as base:
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda q: ok(base, {"questions": q, "k": 3}), questions * 2))
        status = json.loads(call(base, "GET", "/status")[2])
    assert status["requests"]["searches"] == 2 * len(questions) == status["requests"]["questions"]
    assert status["batching"]["batches"] < 2 * len(questions)  # some batches held several requests
    assert status["batching"]["mean_batch"] > 1 and status["queue_depth"] == 0


# ---- bad requests -----------------------------------------------------------------------------
BAD = [  # (what, request kwargs, status, words the one-line error holds)
    ("malformed JSON", {"raw": b'{"questions": "a", '}, 400, "malformed JSON"),
    ("not JSON at all", {"raw": b"\xff\xfe questions"}, 400, "malformed JSON"),
    ("body not an object", {"raw": b'["a"]'}, 422, "body"),
    ("no body", {"raw": b""}, 422, "body"),
    ("missing questions", {"body": {"k": 3}}, 422, "questions: Field required"),
    ("questions a number", {"body": {"questions": 5}}, 422, "questions"),
    ("k a string", {"body": {"questions": "a", "k": "3"}}, 422, "k: Input should be a valid integer"),
    ("k a float", {"body": {"questions": "a", "k": 2.5}}, 422, "k:"),
    ("k zero", {"body": {"questions": "a", "k": 0}}, 422, "k: must be an integer from 1 to 50"),
    ("k negative", {"body": {"questions": "a", "k": -3}}, 422, "k: must be"),
    ("k over the cap", {"body": {"questions": "a", "k": 51}}, 422, "from 1 to 50, got 51"),
    ("unknown mode", {"body": {"questions": "a", "mode": "sparse"}}, 422, "mode:"),
    ("unknown fusion", {"body": {"questions": "a", "fusion": "max"}}, 422, "fusion:"),
    ("negative alpha", {"body": {"questions": "a", "alpha": -1.0}}, 422, "alpha: must be"),
    ("unknown field", {"body": {"questions": "a", "top_k": 3}}, 422, "top_k: Extra inputs are not permitted"),
    ("empty question", {"body": {"questions": "   "}}, 422, "questions: empty question"),
    ("empty list", {"body": {"questions": []}}, 422, "at least one question"),
    ("one empty of many", {"body": {"questions": ["a", ""]}}, 422, "questions[1]: empty question"),
    ("too many questions", {"body": {"questions": ["a"] * 9}}, 422, "9 in one request, the limit is 8"),
    ("answers of the wrong shape", {"body": {"questions": ["a", "b"], "answers": ["x", "y"]}}, 422, "answers"),
    ("answers per question miscounted", {"body": {"questions": ["a", "b"], "answers": [["x"]]}}, 422, "answers: give one list"),
    ("body over the limit", {"body": {"questions": "a " * 3000}}, 413, "over the limit of 4096 bytes"),
    ("chunked body over the limit", {"body": {"questions": "a " * 3000}, "chunked": True}, 413, "over the limit"),
]


@pytest.mark.parametrize("what, kwargs, status, words", BAD, ids=[b[0] for b in BAD])
def test_bad_request_is_a_one_line_4xx(server_limited, what, kwargs, status, words):
    got, headers, text = call(server_limited, "POST", "/search", **kwargs)
    assert got == status, text
    assert headers["content-type"] == "application/json" and "\n" not in text and "Traceback" not in text
    assert words in json.loads(text)["error"]
    assert ok(server_limited, {"questions": "Where does the Danube start?", "k": 2})["results"][0]["hits"]  # still serving


@pytest.fixture(scope="module")
def server_limited(retriever):
    from dpr_xrisk.serve.engine import Limits

    with serving(retriever, limits=Limits(max_k=50, max_questions=8, max_body_bytes=4096)) as base:
        yield base


def test_broken_http_is_refused_and_the_server_goes_on(server_limited):
    try:
        got = call(server_limited, "POST", "/search", raw=b"{}", headers={"Content-Length": "x"})[0]
    except (ConnectionResetError, http.client.RemoteDisconnected):
        got = "reset"  # the parser may hang up before its 400 is read
    assert got in (400, "reset")  # uvicorn's HTTP parser refuses it (plain text: the app never sees the request)
    host, port = server_limited.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:  # garbage, then a hang-up
        s.sendall(b"\x00\x01 NOT HTTP\r\n\r\n")
        try:
            s.recv(1024)  # a 400 and a close, or a reset: both refuse it
        except ConnectionResetError:
            pass
    assert ok(server_limited, {"questions": "Where does the Danube start?", "k": 2})["results"][0]["hits"]


def test_odd_questions_are_answered(server_limited):
    odd = ["???", "\x00", "AND OR NOT", "title:foo", '"unbalanced', "\\", "🦀 a\nb", "the the the"]  # 8, the limit
    for mode in ("dense", "bm25", "hybrid"):
        results = ok(server_limited, {"questions": odd, "k": 3, "mode": mode})["results"]
        assert [r["question"] for r in results] == odd  # BM25 may find nothing for a stop word or a symbol
    status, _, page = call(server_limited, "GET", "/?q=Where&k=abc")
    assert status == 422 and "k: must be an integer" in page and "<form" in page
    status, _, page = call(server_limited, "GET", "/?q=%3Cscript%3Ealert(1)%3C/script%3E&k=2")
    assert status == 200 and "<script>" not in page and "&lt;script&gt;" in page


def test_other_refusals_and_lookups(server_limited):
    for method, path, status in (("GET", "/documents/nope", 404), ("GET", "/documents/s1/../s2", 404),
                                 ("GET", "/nowhere", 404), ("GET", "/search", 405), ("DELETE", "/documents/s1", 405)):
        got, _, text = call(server_limited, method, path)
        assert got == status and list(json.loads(text)) == ["error"] and "\n" not in text, (path, text)
    got, _, text = call(server_limited, "GET", "/documents/s1")
    assert got == 200 and json.loads(text)["title"] == "Nile" and json.loads(text)["text"].startswith("The Nile is")
    status = json.loads(call(server_limited, "GET", "/status")[2])
    assert status["index"]["factory"] == "Flat" and status["index"]["size"] == 335
    assert status["corpus"]["fingerprint"] and status["settings"]["encoder"]["query_max_length"] == 64
    assert {"uptime_s", "requests", "queue_depth", "limits", "batching", "model"} <= status.keys()
    assert call(server_limited, "GET", "/health")[0] == 200
    got, _, text = call(server_limited, "GET", "/openapi.json")
    assert got == 200 and "/search" in json.loads(text)["paths"]
    assert call(server_limited, "GET", "/docs")[0] == 200


def test_long_question_is_cut_at_the_model_length_and_says_so(retriever):
    question = " ".join(f"river{i % 50}" for i in range(400))
    with serving(retriever) as base:
        r = ok(base, {"questions": [question, "Where does the Danube start?"], "k": 3, "mode": "hybrid"})["results"]
    assert r[0]["truncated"] is True and r[0]["tokens"] > 64 and "read the first 64" in r[0]["note"]
    assert r[1]["truncated"] is False and "note" not in r[1]
    assert len(r[0]["hits"]) == 3


def test_internal_error_is_a_500_without_details_and_the_server_goes_on(retriever, monkeypatch):
    with serving(retriever) as base:
        original = retriever._run
        monkeypatch.setattr(retriever, "_run", lambda queries: (_ for _ in ()).throw(RuntimeError("secret detail")))
        monkeypatch.setattr(retriever, "document", lambda i: 1 / 0)
        for method, path, body in (("POST", "/search", {"questions": "a"}), ("GET", "/documents/s1", None)):
            got, _, text = call(base, method, path, body)
            assert got == 500 and "secret" not in text and "Traceback" not in text and "division" not in text
            assert json.loads(text)["error"].startswith("internal error")
        monkeypatch.setattr(retriever, "_run", original)
        assert ok(base, {"questions": "Where does the Danube start?", "k": 2})["results"][0]["hits"]


def test_lucene_refusal_fails_only_its_own_request(retriever):
    huge = " ".join(f"w{i}" for i in range(2000))  # over Lucene's 1,024 clauses
    with serving(retriever) as base:
        with ThreadPoolExecutor(4) as pool:
            bad = pool.submit(call, base, "POST", "/search", {"questions": huge, "mode": "bm25"})
            good = [pool.submit(ok, base, {"questions": "Where does the Danube start?", "mode": "bm25"}) for _ in range(6)]
            status, _, text = bad.result()
            assert all(g.result()["results"][0]["hits"] for g in good)
    assert status in (200, 422), text  # 422 where Lucene refuses, never a 500
    if status == 422:
        assert "BM25 (Lucene)" in json.loads(text)["error"]


def test_token_guards_every_route_but_health(retriever, monkeypatch):
    with serving(retriever, token="s3cret") as base:
        for method, path in (("GET", "/status"), ("GET", "/"), ("GET", "/docs"), ("GET", "/openapi.json"),
                             ("GET", "/documents/s1"), ("POST", "/search"), ("POST", "/mcp/")):
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"}):
                got, h, text = call(base, method, path, {"questions": "a"}, headers=headers)
                assert got == 401 and h.get("www-authenticate") == "Bearer" and "token" in json.loads(text)["error"]
        assert call(base, "GET", "/health")[0] == 200
        good = {"Authorization": "Bearer s3cret"}
        assert call(base, "GET", "/status", headers=good)[0] == 200
        assert ok(base, {"questions": "Where is the Nile?", "k": 1}, headers=good)["results"][0]["hits"]


# ---- MCP ------------------------------------------------------------------------------------
def test_mcp_tools_in_process_equal_rest(retriever):
    from fastmcp import Client
    from fastmcp.exceptions import ToolError

    from dpr_xrisk.serve.batcher import Batcher
    from dpr_xrisk.serve.engine import Limits
    from dpr_xrisk.serve.mcp import build_mcp

    batcher = Batcher(retriever.run_batch)
    body = {"questions": ["Where does the Danube start?", "Who painted the Mona Lisa?"], "k": 4, "mode": "hybrid",
            "answers": [["Black Forest"], ["Leonardo da Vinci"]]}

    async def main():
        async with Client(build_mcp(retriever, batcher, Limits(max_k=10))) as client:
            assert {t.name for t in await client.list_tools()} == {"search", "get_document"}
            found = (await client.call_tool("search", body)).data
            doc = (await client.call_tool("get_document", {"id": "s1"})).data
            with pytest.raises(ToolError, match="k: must be an integer from 1 to 10"):
                await client.call_tool("search", {"questions": "a", "k": 11})
            with pytest.raises(ToolError, match="unknown passage id"):
                await client.call_tool("get_document", {"id": "nope"})
            return found, doc

    found, doc = asyncio.run(main())
    batcher.close()
    with serving(retriever) as base:
        rest = ok(base, body)
    assert as_run(found["results"]) == as_run(rest["results"])  # one request, one batch: bit for bit
    assert [h.get("answer_spans") for r in found["results"] for h in r["hits"]] == [
        h.get("answer_spans") for r in rest["results"] for h in r["hits"]]
    assert doc == {"id": "s1", "title": "Nile", "text": retriever.passages["s1"][1]}


def test_mcp_over_streamable_http(retriever):
    from fastmcp import Client

    async def main(base):
        async with Client(f"{base}/mcp/", auth="tok") as client:
            found = (await client.call_tool("search", {"questions": "Where does the Danube start?", "k": 2, "mode": "bm25"})).data
            doc = (await client.call_tool("get_document", {"id": found["results"][0]["hits"][0]["id"]})).data
            return found, doc

    with serving(retriever, token="tok") as base:
        found, doc = asyncio.run(main(base))
        rest = ok(base, {"questions": "Where does the Danube start?", "k": 2, "mode": "bm25"},
                  headers={"Authorization": "Bearer tok"})
    assert as_run(found["results"]) == as_run(rest["results"])
    assert doc["id"] == rest["results"][0]["hits"][0]["id"]


# ---- the command and the page --------------------------------------------------------------
def test_cli_serve_starts_answers_and_stops(built, tmp_path):
    env = {**os.environ, "DPR_XRISK_TOKEN": "from-env", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "dpr_xrisk", "serve", "--index", str(built / "idx"), "--port", "0",
                             "--threads", "1", "--max-k", "5"], stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    try:
        base, lines = None, []
        deadline = time.monotonic() + 120
        while base is None and time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith("serving on "):
                base = line.split()[2]
        assert base and base.startswith("http://127.0.0.1:"), "".join(lines)
        token = {"Authorization": "Bearer from-env"}
        assert call(base, "GET", "/status")[0] == 401
        assert len(ok(base, {"questions": "Where is the Nile?", "k": 5}, headers=token)["results"][0]["hits"]) == 5
        assert call(base, "POST", "/search", {"questions": "a", "k": 6}, headers=token)[0] == 422
        assert call(base, "POST", "/search", {"questions": "a", "mode": "bm25"}, headers=token)[0] == 422  # no BM25
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    rest = proc.stderr.read()
    assert "Traceback" not in rest


def test_mcp_over_stdio_from_the_command(built):
    from fastmcp import Client
    from fastmcp.client.transports import StdioTransport

    command = StdioTransport(command=sys.executable, args=["-m", "dpr_xrisk", "serve", "--index", str(built / "idx"),
                                                          "--mcp-stdio", "--threads", "1"],
                             env={**os.environ, "HF_HUB_OFFLINE": "1"})

    async def main():
        async with Client(command, timeout=180, init_timeout=180) as client:  # stdout carries nothing but MCP
            found = (await client.call_tool("search", {"questions": "Where does the Danube start?", "k": 3})).data
            return found, (await client.call_tool("get_document", {"id": "s10"})).data

    found, doc = asyncio.run(main())
    assert len(found["results"][0]["hits"]) == 3 and doc["title"] == "Danube"


def render(url: str, tmp_path, name: str, size: str = "1100x900") -> tuple[str, "os.PathLike"]:
    """The DOM and a PNG of ``url`` as a real headless browser rendered it (eval/page_shot.py)."""
    shot = tmp_path / f"{name}.png"
    subprocess.run([sys.executable, str(ROOT / "eval" / "page_shot.py"), url, str(shot), "--size", size],
                   capture_output=True, timeout=300, check=True)
    return (tmp_path / f"{name}.html").read_text(encoding="utf-8"), shot


@pytest.mark.skipif(page_shot.browser() is None,
                    reason="no headless browser (chromium, or pip install -e '.[browser]') for the page check")
def test_search_page_in_headless_browser(retriever, tmp_path):
    from urllib.parse import urlencode

    query = urlencode({"q": "Where does the Danube start?", "k": 5, "mode": "bm25", "answers": "Black Forest"})
    with serving(retriever) as base:
        dom, shot = render(f"{base}/?{query}", tmp_path, "page")
        empty, _ = render(f"{base}/", tmp_path, "empty")
    assert dom.count("<li") == 5 and "<mark>Black Forest</mark>" in dom and 'value="Where does the Danube start?"' in dom
    assert "<form" in empty and "<li" not in empty
    assert shot.exists() and shot.stat().st_size > 10_000 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    keep = os.environ.get("DPR_XRISK_SCREENSHOT")  # where to keep it for a look (tests never write the repository)
    if keep:
        shutil.copy(shot, keep)


def test_page_shot_refuses_a_page_it_could_not_have_rendered(retriever, tmp_path):
    """No screenshot of an error page: a bad size, a refused connection and a 404 each end in one line, exit != 0."""
    script = [sys.executable, str(ROOT / "eval" / "page_shot.py")]
    bad = subprocess.run([*script, "http://127.0.0.1:9/", str(tmp_path / "a.png"), "--size", "1100"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "is not WIDTHxHEIGHT" in bad.stderr.strip().splitlines()[-1]
    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    refused = subprocess.run([*script, f"http://127.0.0.1:{port}/", str(tmp_path / "b.png")],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1 and len(refused.stderr.strip().splitlines()) == 1 and "page_shot:" in refused.stderr
    with serving(retriever) as base:
        missing = subprocess.run([*script, f"{base}/no-such-page", str(tmp_path / "c.png")],
                                 capture_output=True, text=True, timeout=60)
    assert missing.returncode == 1 and missing.stderr.strip() == f"page_shot: {base}/no-such-page answered HTTP 404"
    assert not any(tmp_path.glob("*.png"))


def test_cli_serve_refuses_bad_start_up_inputs_in_one_line(built, tmp_path):
    out = cli("serve", "--index", tmp_path, code=2)
    assert "not an index folder" in out and len(out.strip().splitlines()) == 1
    out = cli("serve", "--index", built / "idx", "--bm25-index", tmp_path, code=2)
    assert "not a BM25 index folder" in out
    assert "--port" in cli("serve", "--index", built / "idx", "--port", "70000", code=2)


def test_serve_help_lists_the_options():
    out = cli("serve", "--help")
    for option in ("--index", "--bm25-index", "--host", "--port", "--token", "--max-batch", "--max-wait-ms", "--threads",
                   "--max-k", "--max-questions", "--max-body-bytes", "--mcp-stdio"):
        assert option in out
    assert ROOT.exists()
