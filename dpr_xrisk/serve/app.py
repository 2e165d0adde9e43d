"""The HTTP front: a FastAPI app over a :class:`~dpr_xrisk.serve.engine.Retriever`.

Routes: ``POST /search``, ``GET /documents/{id}``, ``GET /status``, ``GET /health``, the search
page at ``/``, OpenAPI docs at ``/docs``, and the MCP tools (streamable HTTP) under ``/mcp``.
Every search goes through one :class:`~dpr_xrisk.serve.batcher.Batcher`, so concurrent requests
are encoded together.

Bad requests never hurt the server: every refusal is a 4xx with a one-line JSON body
``{"error": "..."}`` -- 400 malformed JSON, 401 missing/wrong token, 404 unknown route or id,
405 wrong method, 413 body over the limit, 422 a field missing, mistyped or out of range -- and
an internal error is a 500 whose body names no code (the traceback goes to the server's log).
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
from contextlib import asynccontextmanager
from dataclasses import asdict
from typing import Literal, Optional, Union

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException

from dpr_xrisk.serve.batcher import Batcher
from dpr_xrisk.serve.engine import MODES, BadRequest, Limits, Retriever, make_query

log = logging.getLogger("dpr_xrisk.serve")


# ---- the schema (what /docs shows) ---------------------------------------------------------
class SearchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={
        "examples": [{"questions": "Where does the Danube start?", "k": 5, "answers": ["Black Forest"]},
                     {"questions": ["Where does the Danube start?", "Who painted the Mona Lisa?"], "k": 3,
                      "mode": "hybrid", "fusion": "interpolation", "alpha": 0.5}]})

    questions: Union[str, list[str]] = Field(description="One question, or a list of them.")
    k: int = Field(10, description="Passages per question (1 to the server's --max-k).")
    mode: Literal["dense", "bm25", "hybrid"] = Field("dense", description="hybrid and bm25 need --bm25-index.")
    fusion: Literal["rrf", "interpolation"] = Field("rrf", description="Hybrid fusion, as `search --fusion`.")
    alpha: float = Field(0.5, description="BM25 weight of interpolation, as `search --alpha`.")
    answers: Optional[Union[list[str], list[list[str]]]] = Field(
        None, description="Answers to mark hits by (DPR has_answer): a list for one question, one list per question for several.")


class Hit(BaseModel):
    rank: int
    id: str
    score: float
    title: str
    text: str
    has_answer: Optional[bool] = Field(None, description="Only when answers were given.")
    answer_spans: Optional[list[list[int]]] = Field(None, description="[start, end) characters of text matching an answer.")


class Result(BaseModel):
    question: str
    hits: list[Hit]
    tokens: Optional[int] = Field(None, description="The question's length in the query encoder's tokens.")
    truncated: Optional[bool] = Field(None, description="True when the encoder read only the first max-length tokens.")
    note: Optional[str] = None


class SearchResponse(BaseModel):
    mode: str
    k: int
    results: list[Result]
    took_ms: float


class Document(BaseModel):
    id: str
    title: str
    text: str


class Error(BaseModel):
    error: str


ERRORS = {s: {"model": Error} for s in (400, 401, 404, 413, 422, 500)}


# ---- guard: token and body size, before anything reads the request -------------------------
class _Guard:
    """Pure ASGI middleware: a bearer token on every route but ``/health``; bodies over
    ``max_body`` refused by their Content-Length, or while they stream in when they have none;
    responses counted by status class."""

    def __init__(self, app, max_body: int, token: str | None, counts: dict):
        self.app, self.max_body, self.token, self.counts = app, max_body, token, counts

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        if self.token and scope["path"] != "/health":
            given = headers.get(b"authorization", b"").decode("latin-1")
            if not hmac.compare_digest(given.encode(), f"Bearer {self.token}".encode()):
                return await self._refuse(send, 401, "missing or wrong bearer token (Authorization: Bearer <token>)",
                                          [(b"www-authenticate", b"Bearer")])
        length = headers.get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_body):
            return await self._refuse(send, 413 if length.isdigit() else 400,
                                      f"request body over the limit of {self.max_body} bytes" if length.isdigit()
                                      else "bad Content-Length")
        seen = 0

        async def limited():
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.max_body:  # FastAPI passes an HTTPException raised here through
                raise HTTPException(413, f"request body over the limit of {self.max_body} bytes")
            return message

        async def counted(message):
            if message["type"] == "http.response.start":
                key = f"{message['status'] // 100}xx"
                self.counts[key] = self.counts.get(key, 0) + 1
            await send(message)

        await self.app(scope, limited, counted)

    async def _refuse(self, send, status: int, message: str, extra=()):
        key = f"{status // 100}xx"
        self.counts[key] = self.counts.get(key, 0) + 1
        body = JSONResponse({"error": message}).body
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *extra]})
        await send({"type": "http.response.body", "body": body})


def _field_error(exc: RequestValidationError) -> tuple[int, str]:
    """The first validation error as (status, one line): 400 for unparsable JSON, else 422."""
    errors = exc.errors()
    first = errors[0] if errors else {}
    if first.get("type") == "json_invalid":
        return 400, f"malformed JSON: {first.get('ctx', {}).get('error', 'cannot parse the body')}"
    loc = ".".join(str(x) for x in first.get("loc", ()) if x != "body") or "body"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return 422, f"{loc}: {first.get('msg', 'invalid')}{more}".replace("\n", " ")


# ---- the app ------------------------------------------------------------------------------
def create_app(retriever: Retriever, limits: Limits = Limits(), max_batch: int = 64, max_wait_ms: float = 2.0,
               token: str | None = None, mcp: bool = True) -> FastAPI:
    """The FastAPI app; its batcher thread starts now and stops with the app's lifespan."""
    batcher = retriever.batcher(max_batch, max_wait_ms)
    started = time.time()
    counts: dict = {}
    mcp_app = None
    if mcp:
        from dpr_xrisk.serve.mcp import build_mcp

        mcp_app = build_mcp(retriever, batcher, limits).http_app(path="/")

    app = FastAPI(title="dpr-xrisk", lifespan=_lifespan(batcher, mcp_app), responses=ERRORS,
                  description="Dense passage retrieval: dense, BM25 and hybrid search over one loaded index. "
                              "Errors are `{\"error\": \"...\"}` with a 4xx status (500 for a bug).")
    app.state.batcher, app.state.retriever, app.state.limits = batcher, retriever, limits
    for exc_class, handler in _ERROR_HANDLERS:
        app.add_exception_handler(exc_class, handler)
    routes = _Routes(retriever, batcher, limits, started, counts, mcp=mcp_app is not None)
    app.post("/search", response_model=SearchResponse, response_model_exclude_none=True)(routes.search)
    app.get("/documents/{doc_id:path}", response_model=Document)(routes.document)
    app.get("/status")(routes.status)
    app.get("/health")(routes.health)
    app.get("/", response_class=HTMLResponse, include_in_schema=False)(routes.page)
    if mcp_app is not None:
        app.mount("/mcp", mcp_app)
    app.add_middleware(_Guard, max_body=limits.max_body_bytes, token=token, counts=counts)
    return app


def _lifespan(batcher: Batcher, mcp_app):
    """The app's lifespan: the MCP session manager's (when MCP is served) around the app's life,
    then the batcher closed."""
    @asynccontextmanager
    async def lifespan(app):
        if mcp_app is not None:
            async with mcp_app.lifespan(app):  # the MCP session manager
                yield
        else:
            yield
        await asyncio.get_running_loop().run_in_executor(None, batcher.close)

    return lifespan


# ---- errors: every refusal a one-line {"error": ...} ----------------------------------------
async def _bad(request, exc: BadRequest):
    return JSONResponse({"error": exc.message}, status_code=exc.status)


async def _invalid(request, exc: RequestValidationError):
    status, message = _field_error(exc)
    return JSONResponse({"error": message}, status_code=status)


async def _http(request, exc: HTTPException):
    message = exc.detail if isinstance(exc.detail, str) else str(exc.status_code)
    return JSONResponse({"error": message.splitlines()[0]}, status_code=exc.status_code, headers=exc.headers)


async def _internal(request, exc: Exception):
    log.error("internal error on %s %s", request.method, request.url.path, exc_info=exc)
    return JSONResponse({"error": "internal error (a bug; the server log has the traceback)"}, status_code=500)


_ERROR_HANDLERS = ((BadRequest, _bad), (RequestValidationError, _invalid), (HTTPException, _http), (Exception, _internal))


# ---- the routes ---------------------------------------------------------------------------
class _Routes:
    """The endpoints over one retriever; every search goes through its batcher. The method names
    are the routes' names in the OpenAPI schema, their docstrings its descriptions."""

    def __init__(self, retriever: Retriever, batcher: Batcher, limits: Limits, started: float, counts: dict,
                 mcp: bool) -> None:
        self.retriever, self.batcher, self.limits = retriever, batcher, limits
        self.started, self.counts, self.mcp = started, counts, mcp

    async def _search_query(self, query) -> list:
        return await asyncio.wrap_future(self.batcher.submit(query, len(query.questions)))

    async def search(self, body: SearchRequest):
        """Top-k passages for one or many questions: what `dpr-xrisk search` returns for the same
        question, k, mode, fusion and alpha (bm25: `dpr-xrisk bm25 search`)."""
        t0 = time.perf_counter()
        query = make_query(body.questions, body.k, body.mode, body.fusion, body.alpha, body.answers,
                           self.limits, self.retriever.has_bm25)
        results = await self._search_query(query)
        return {"mode": query.mode, "k": query.k, "results": results, "took_ms": round(1000 * (time.perf_counter() - t0), 3)}

    async def document(self, doc_id: str):
        """A passage by its id."""
        got = self.retriever.document(doc_id)
        if got is None:
            raise BadRequest(f"unknown passage id {doc_id[:200]!r}", 404)
        return got

    async def status(self):
        """Model, index kind and size, corpus fingerprint, settings, limits, uptime, traffic, queue."""
        batcher = self.batcher
        return {**self.retriever.status(), "limits": asdict(self.limits),
                "batching": {"max_batch": batcher.max_batch, "max_wait_ms": batcher.max_wait * 1000,
                             "batches": batcher.batches, "busy_s": round(batcher.busy_seconds, 2),
                             "mean_batch": round(batcher.batched_questions / batcher.batches, 2) if batcher.batches else None},
                "uptime_s": round(time.time() - self.started, 1),
                "requests": {"searches": batcher.jobs, "questions": batcher.questions, "http_responses": dict(self.counts)},
                "queue_depth": batcher.queue_depth, "mcp": "/mcp/" if self.mcp else None}

    async def health(self):
        """Liveness: no token needed."""
        return {"status": "ok"}

    async def page(self, request: Request):
        from dpr_xrisk.serve.page import render

        retriever = self.retriever
        form = {x: request.query_params.get(x, "") for x in ("q", "k", "mode", "answers")}
        modes = MODES if retriever.has_bm25 else ("dense",)
        form["mode"] = form["mode"] or "dense"
        if not form["q"].strip():
            return render(form, modes, status=retriever.status())
        try:
            k = int(form["k"] or 10)
            answers = [a.strip() for a in form["answers"].split("|") if a.strip()] or None
            query = make_query(form["q"], k, form["mode"], answers=answers, limits=self.limits,
                               has_bm25=retriever.has_bm25)
            result = (await self._search_query(query))[0]
        except (ValueError, BadRequest) as e:
            message = e.message if isinstance(e, BadRequest) else "k: must be an integer"
            return HTMLResponse(render(form, modes, error=message, status=retriever.status()), status_code=422)
        return render(form, modes, result=result, status=retriever.status())
