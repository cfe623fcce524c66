"""One thread that runs every piece of model work, in the order it was asked for.

The models are shared by all requests and are not safe to call from two threads at
once (a generation holds per-call state; torch already uses every core). The server
therefore hands each memorize, ask, clues, load or delete to `ModelWorker.submit`:
calls queue up and run one at a time, first come first served, while the event loop
stays free to accept requests, stream tokens and answer /health.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


class ModelWorker:
    """A single worker thread with a queue; `pending` counts calls queued or running."""

    def __init__(self) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memorag-models")
        self._lock = threading.Lock()
        self._pending = 0

    @property
    def pending(self) -> int:
        with self._lock:
            return self._pending

    def _run(self, function: Callable[..., T], args: tuple, kwargs: dict) -> T:
        try:
            return function(*args, **kwargs)
        finally:
            with self._lock:
                self._pending -= 1

    def submit(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> asyncio.Future:
        """Queue `function(*args, **kwargs)`; an awaitable for its result, on the running event loop."""
        with self._lock:
            self._pending += 1
        try:
            future = self._executor.submit(self._run, function, args, kwargs)
        except BaseException:
            with self._lock:
                self._pending -= 1
            raise
        return asyncio.wrap_future(future)

    async def run(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await self.submit(function, *args, **kwargs)

    def shutdown(self) -> None:
        """Finish the running call, drop the queued ones."""
        self._executor.shutdown(wait=True, cancel_futures=True)
