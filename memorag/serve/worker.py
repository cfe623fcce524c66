"""The jobs that run every piece of model work, and the lock that keeps the models to one caller at a time.

The models are shared by all requests and are not safe to call from two threads at
once (a generation holds per-call state; torch already uses every core). The server
therefore hands each memorize, ask, clues, load or delete to `ModelWorker.submit`, and
each job holds `ModelWorker.models` (a lock that goes to the oldest waiting job) while it runs, while
the event loop stays free to accept requests, stream tokens and answer /health.

With `batch_size` 1 (`memorag serve --batch-size 1`) one thread runs the jobs one after
another, first come first served. With a larger `batch_size` that many jobs run at once on
threads of their own, and a job that reaches a greedy decoding hands its prompts to the
`memorag.serve.batching.Batcher` and lets go of the models until its tokens are ready: the
batcher decodes the prompts of every waiting job together, one step at a time, between
the other jobs' model work (`docs/serving.md`, "Batching"). Jobs name the corpus they
read or write: a write (memorize, delete) waits until no job reads that corpus, and no
read of it starts while a write waits or runs.

Each call is a `Job` that can be cancelled: its client left, it ran past the time limit,
or the server is stopping. A job cancelled while queued never starts. A running job
stops at its next safe point, where `ModelWorker.check` raises `JobCancelled`: before
each forward pass of a model the worker was told about (`watch`: one per memorized
window, generated token or embedded batch), at each streamed piece of an answer, and
while it waits for its batched tokens. Saving is never a safe point, so a cancelled job
never leaves a save half-written (and saves are atomic besides).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from memorag.serve.turns import CorpusAccess, TurnLock

T = TypeVar("T")


class JobCancelled(Exception):
    """A job stopped before its end; the message says why (HTTP 503)."""


class Job:
    """One call for the worker, and why it was cancelled, if it was."""

    def __init__(self, function: Callable[..., Any], args: tuple, kwargs: dict, time_limit: float | None,
                 number: int = 0):
        self.function, self.args, self.kwargs = function, args, kwargs
        self.number = number  # its place in the order jobs came in (the models go to the oldest waiting)
        self.time_limit = time_limit
        self.deadline: float | None = None
        self.reason: str | None = None
        self.future: asyncio.Future | None = None

    def cancel(self, reason: str) -> None:
        """Stop the job before it starts, or at its next safe point (the first reason wins)."""
        if self.reason is None:
            self.reason = reason

    @property
    def cancelled(self) -> bool:
        return self.reason is not None

    def expired(self) -> bool:
        """Whether the job has run past its time limit."""
        return self.deadline is not None and time.monotonic() > self.deadline

    def check(self) -> None:
        """Raise `JobCancelled` if the job was cancelled or has run past its time limit."""
        if self.reason is None and self.expired():
            self.reason = (f"the job ran past the server's time limit ({self.time_limit:g} s, --job-timeout) and was "
                           "stopped; send less work at once")
        if self.reason is not None:
            raise JobCancelled(self.reason)

    def run(self) -> Any:
        self.check()  # cancelled while queued: never starts
        if self.time_limit is not None:
            self.deadline = time.monotonic() + self.time_limit
        return self.function(*self.args, **self.kwargs)


class ModelWorker:
    """Threads that run the jobs, `batch_size` of them at once (1: one after another); `pending`
    counts calls queued or running.

    `time_limit`: seconds a job may run (None: no limit)."""

    def __init__(self, time_limit: float | None = None, batch_size: int = 1) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size={batch_size} must be at least 1 (1: one job at a time)")
        self.time_limit = time_limit
        self.batch_size = batch_size
        self.models = TurnLock()  # held by the job (or the batcher's step) that uses the models
        self.corpora = CorpusAccess()
        self._executor = ThreadPoolExecutor(max_workers=batch_size, thread_name_prefix="memorag-models")
        self._lock = threading.Lock()
        self._pending = 0
        self._running: dict[int, Job] = {}  # thread id -> the job it runs
        self._numbers = itertools.count()  # jobs in the order they came: the older goes first
        self._stopping: str | None = None
        self._hooks: list[Any] = []

    @property
    def pending(self) -> int:
        with self._lock:
            return self._pending

    def _run(self, job: Job, reads: str | None, writes: str | None) -> Any:
        access = (self.corpora.writing(writes) if writes is not None else
                  self.corpora.reading(reads) if reads is not None else contextlib.nullcontext())
        try:
            with access, self.models.turn(job.number):
                with self._lock:
                    if self._stopping is not None:
                        job.cancel(self._stopping)
                    self._running[threading.get_ident()] = job
                return job.run()
        finally:
            with self._lock:
                self._running.pop(threading.get_ident(), None)
                self._pending -= 1

    def submit(self, function: Callable[..., T], *args: Any, reads: str | None = None, writes: str | None = None,
               **kwargs: Any) -> Job:
        """Queue `function(*args, **kwargs)` as a job that reads or writes the corpus named (or neither);
        `job.future` awaits its result on the running event loop."""
        with self._lock:
            if self._stopping is not None:
                raise JobCancelled(self._stopping)
            self._pending += 1
            job = Job(function, args, kwargs, self.time_limit, next(self._numbers))
        try:
            job.future = asyncio.wrap_future(self._executor.submit(self._run, job, reads, writes))
        except BaseException:
            with self._lock:
                self._pending -= 1
            raise
        job.future.add_done_callback(_retrieve)  # a client that left never awaits it
        return job

    async def run(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await self.submit(function, *args, **kwargs).future

    def current(self) -> Job | None:
        """The job this thread runs (None on a thread that runs none, such as the batcher's)."""
        return self._running.get(threading.get_ident())

    def check(self) -> None:
        """A safe point: raise `JobCancelled` if the job running on this thread was cancelled or is out of time."""
        job = self.current()
        if job is not None:
            job.check()

    def watch(self, module: Any) -> None:
        """Make every forward pass of `module` (a torch module) a safe point of the running job."""
        self._hooks.append(module.register_forward_pre_hook(lambda *_: self.check()))

    def stop(self, reason: str = "the server is shutting down") -> None:
        """Cancel the running jobs (at their next safe point) and every queued one; refuse new ones. Returns at once."""
        with self._lock:
            self._stopping = reason
            for job in self._running.values():
                job.cancel(reason)

    def shutdown(self) -> None:
        """Stop, then wait for the running jobs to reach their safe point (or finish their save)."""
        self.stop()
        self._executor.shutdown(wait=True)
        for hook in self._hooks:
            hook.remove()
        self._hooks.clear()


def _retrieve(future: asyncio.Future) -> None:
    if not future.cancelled():
        future.exception()
