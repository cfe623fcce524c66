"""One thread that runs every piece of model work, in the order it was asked for, and stops work nobody waits for.

The models are shared by all requests and are not safe to call from two threads at
once (a generation holds per-call state; torch already uses every core). The server
therefore hands each memorize, ask, clues, load or delete to `ModelWorker.submit`:
calls queue up and run one at a time, first come first served, while the event loop
stays free to accept requests, stream tokens and answer /health.

Each call is a `Job` that can be cancelled: its client left, it ran past the time limit,
or the server is stopping. A job cancelled while queued never starts. A running job
stops at its next safe point, where `ModelWorker.check` raises `JobCancelled`: before
each forward pass of a model the worker was told about (`watch`: one per memorized
window, generated token or embedded batch) and at each streamed piece of an answer.
Saving is never a safe point, so a cancelled job never leaves a save half-written (and
saves are atomic besides).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


class JobCancelled(Exception):
    """A job stopped before its end; the message says why (HTTP 503)."""


class Job:
    """One call for the worker, and why it was cancelled, if it was."""

    def __init__(self, function: Callable[..., Any], args: tuple, kwargs: dict, time_limit: float | None):
        self.function, self.args, self.kwargs = function, args, kwargs
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

    def check(self) -> None:
        """Raise `JobCancelled` if the job was cancelled or has run past its time limit."""
        if self.reason is None and self.deadline is not None and time.monotonic() > self.deadline:
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
    """A single worker thread with a queue; `pending` counts calls queued or running.

    `time_limit`: seconds a job may run (None: no limit)."""

    def __init__(self, time_limit: float | None = None) -> None:
        self.time_limit = time_limit
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memorag-models")
        self._lock = threading.Lock()
        self._pending = 0
        self._current: Job | None = None
        self._current_thread: int | None = None
        self._stopping: str | None = None
        self._hooks: list[Any] = []

    @property
    def pending(self) -> int:
        with self._lock:
            return self._pending

    def _run(self, job: Job) -> Any:
        try:
            with self._lock:
                if self._stopping is not None:
                    job.cancel(self._stopping)
                self._current, self._current_thread = job, threading.get_ident()
            return job.run()
        finally:
            with self._lock:
                self._current = self._current_thread = None
                self._pending -= 1

    def submit(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> Job:
        """Queue `function(*args, **kwargs)` as a job; `job.future` awaits its result on the running event loop."""
        job = Job(function, args, kwargs, self.time_limit)
        with self._lock:
            if self._stopping is not None:
                raise JobCancelled(self._stopping)
            self._pending += 1
        try:
            job.future = asyncio.wrap_future(self._executor.submit(self._run, job))
        except BaseException:
            with self._lock:
                self._pending -= 1
            raise
        job.future.add_done_callback(_retrieve)  # a client that left never awaits it
        return job

    async def run(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await self.submit(function, *args, **kwargs).future

    def check(self) -> None:
        """A safe point: raise `JobCancelled` if the job running on this thread was cancelled or is out of time."""
        job = self._current
        if job is not None and self._current_thread == threading.get_ident():
            job.check()

    def watch(self, module: Any) -> None:
        """Make every forward pass of `module` (a torch module) a safe point of the running job."""
        self._hooks.append(module.register_forward_pre_hook(lambda *_: self.check()))

    def stop(self, reason: str = "the server is shutting down") -> None:
        """Cancel the running job (at its next safe point) and every queued one; refuse new ones. Returns at once."""
        with self._lock:
            self._stopping = reason
            if self._current is not None:
                self._current.cancel(reason)

    def shutdown(self) -> None:
        """Stop, then wait for the running job to reach its safe point (or finish its save)."""
        self.stop()
        self._executor.shutdown(wait=True)
        for hook in self._hooks:
            hook.remove()
        self._hooks.clear()


def _retrieve(future: asyncio.Future) -> None:
    if not future.cancelled():
        future.exception()
