"""Dynamic batching: one worker thread runs every search, taking concurrent requests together.

A request is a *job* of one or more questions. The worker takes the oldest job, then every job
already waiting, up to ``max_batch`` questions, and runs them as one batch (one encoder pass,
one FAISS search). It waits up to ``max_wait_ms`` for more only when jobs were already queued
behind the first one -- the sign of load; an idle server runs a lone question at once, so the
single-question path pays no wait. While a batch runs, new jobs queue up and form the next
batch (continuous batching), so under load batches grow by themselves. A job that gains nothing
from company (``batchable(payload)`` false: BM25 alone, which Lucene searches one question at a
time anyway) runs alone, before the next batch, instead of holding a batch's answers back.

This module owns the queue and the thread; what a batch *does* is the ``run_batch`` callable
(:meth:`dpr_xrisk.serve.engine.Retriever.run_batch`). It knows nothing of HTTP.
"""

from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

_STOP = object()


@dataclass
class Job:
    """One request's questions and where its answer goes."""

    payload: Any
    size: int  # questions in it: what max_batch counts
    future: Future = field(default_factory=Future)


class Batcher:
    """``submit(payload, size) -> Future``; ``run_batch(payloads) -> results`` (one per payload, an
    Exception instance standing for that payload's failure) runs on the worker thread."""

    def __init__(self, run_batch: Callable[[Sequence[Any]], list], max_batch: int = 64, max_wait_ms: float = 5.0,
                 on_thread_start: Callable[[], None] | None = None, batchable: Callable[[Any], bool] | None = None):
        if max_batch < 1 or max_wait_ms < 0:
            raise ValueError("max_batch must be >= 1 and max_wait_ms >= 0")
        self.run_batch, self.max_batch, self.max_wait = run_batch, max_batch, max_wait_ms / 1000.0
        self._queue: queue.Queue = queue.Queue()
        self._waiting = 0  # questions queued, not yet taken (the status page's queue depth)
        self._lock = threading.Lock()
        self.jobs = 0  # requests submitted (HTTP and MCP)
        self.questions = 0
        self.batches = 0
        self.batched_questions = 0
        self.busy_seconds = 0.0  # time spent running batches: / uptime = how saturated the worker is
        self._on_thread_start = on_thread_start
        self._batchable = batchable or (lambda payload: True)
        self._solo: list[Job] = []  # unbatchable jobs met while filling a batch: each runs next, alone
        self._thread = threading.Thread(target=self._loop, name="dpr-xrisk-batcher", daemon=True)
        self._thread.start()

    @property
    def queue_depth(self) -> int:
        return self._waiting

    def submit(self, payload: Any, size: int) -> Future:
        job = Job(payload, size)
        with self._lock:
            self._waiting += size
            self.jobs += 1
            self.questions += size
        self._queue.put(job)
        return job.future

    def close(self, timeout: float = 10.0) -> None:
        """Finish the queued jobs, then stop the thread."""
        self._queue.put(_STOP)
        self._thread.join(timeout)

    # ---- the worker ------------------------------------------------------------------------
    def _take(self, carry: Job | None) -> tuple[list[Job], Job | None, bool]:
        """The next batch, a job that did not fit (first of the next batch), and whether to stop."""
        if carry is None and self._solo:
            return [self._solo.pop(0)], None, False
        first = carry if carry is not None else self._queue.get()
        if first is _STOP:
            return [], None, True
        batch, n = [first], first.size
        if not self._batchable(first.payload):
            return batch, None, False
        loaded = not self._queue.empty()  # jobs were waiting behind the first: worth waiting for more
        deadline = time.monotonic() + self.max_wait
        while n < self.max_batch:
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                left = deadline - time.monotonic()
                if not loaded or left <= 0:
                    break
                try:
                    job = self._queue.get(timeout=left)
                except queue.Empty:
                    break
            if job is _STOP:
                self._queue.put(_STOP)  # seen again once this batch is done
                break
            if not self._batchable(job.payload):
                self._solo.append(job)
                continue
            if n + job.size > self.max_batch:
                return batch, job, False
            batch.append(job)
            n += job.size
        return batch, None, False

    def _loop(self) -> None:
        if self._on_thread_start is not None:
            self._on_thread_start()
        carry = None
        while True:
            batch, carry, stop = self._take(carry)
            if stop:
                return
            with self._lock:
                self._waiting -= sum(j.size for j in batch)
            live = [j for j in batch if j.future.set_running_or_notify_cancel()]
            if not live:
                continue
            t0 = time.perf_counter()
            try:
                results = self.run_batch([j.payload for j in live])
            except BaseException as e:  # noqa: BLE001 - a failed batch fails its jobs, never the thread
                results = [e] * len(live)
            self.busy_seconds += time.perf_counter() - t0
            self.batches += 1
            self.batched_questions += sum(j.size for j in live)
            for job, result in zip(live, results):
                if isinstance(result, BaseException):
                    job.future.set_exception(result)
                else:
                    job.future.set_result(result)
