"""Turns between the server's jobs: who may use the models now, and who may read or write a corpus.

`TurnLock` hands the models to the waiting thread of the oldest job (Python's own lock lets
the thread that just released it take it again at once, which would let the batcher's step
loop shut the other jobs out, and a job that gave the models up while its tokens decoded
would queue behind every job that came after it). `CorpusAccess` lets any number of jobs read a
corpus at once and one write it alone; a waiting write goes before reads that come after
it, so a steady stream of asks never shuts a memorize out.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import math
import threading
from collections import Counter
from collections.abc import Iterator


class TurnLock:
    """A lock handed to the waiting thread with the lowest priority number (the oldest job first), and
    among equals in the order they asked."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._held = False
        self._waiting: list[tuple[float, int]] = []  # a heap of (priority, ticket)
        self._tickets = itertools.count()

    def acquire(self, priority: float = math.inf) -> None:
        with self._changed:
            turn = (priority, next(self._tickets))
            heapq.heappush(self._waiting, turn)
            while self._held or self._waiting[0] != turn:
                self._changed.wait()
            heapq.heappop(self._waiting)
            self._held = True

    def release(self) -> None:
        with self._changed:
            self._held = False
            self._changed.notify_all()

    @contextlib.contextmanager
    def turn(self, priority: float = math.inf) -> Iterator[None]:
        """Hold the lock for the block."""
        self.acquire(priority)
        try:
            yield
        finally:
            self.release()

    @contextlib.contextmanager
    def released(self, priority: float = math.inf) -> Iterator[None]:
        """Let go of the lock (held by this thread) for the block, and wait for a new turn after it."""
        self.release()
        try:
            yield
        finally:
            self.acquire(priority)


class CorpusAccess:
    """Readers-writer turns per corpus name; a waiting writer goes first."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._readers: Counter[str] = Counter()
        self._writing: set[str] = set()
        self._waiting_writers: Counter[str] = Counter()

    @contextlib.contextmanager
    def reading(self, name: str) -> Iterator[None]:
        with self._changed:
            while name in self._writing or self._waiting_writers[name]:
                self._changed.wait()
            self._readers[name] += 1
        try:
            yield
        finally:
            with self._changed:
                self._readers[name] -= 1
                if not self._readers[name]:
                    del self._readers[name]  # no count kept for a corpus nobody reads
                self._changed.notify_all()

    @contextlib.contextmanager
    def writing(self, name: str) -> Iterator[None]:
        with self._changed:
            self._waiting_writers[name] += 1
            try:
                while name in self._writing or self._readers[name]:
                    self._changed.wait()
            finally:
                self._waiting_writers[name] -= 1
                if not self._waiting_writers[name]:
                    del self._waiting_writers[name]
            self._writing.add(name)
        try:
            yield
        finally:
            with self._changed:
                self._writing.discard(name)
                self._changed.notify_all()
