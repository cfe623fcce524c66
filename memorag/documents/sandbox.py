"""Reading files in a child process, within a memory and a time limit.

Every format check the parsers allow is made before parsing (docx.py, pdf.py, extraction.py),
but PDFium, lxml and lexbor still inflate and build what a file describes: a page whose stream
inflates to gigabytes, an HTML page that reopens thousands of tags in every paragraph. So the
parsers run in a reader process (`memorag.documents.reader_process`) whose address space is capped
(`ReadOptions.memory_mb`); the parent waits for each file at most `ReadOptions.seconds`, then
kills it. One reader process serves every file of a run, and of later runs in the same process
(one per memory limit); it is started again only after it was killed or ran out of memory.
Whatever happens to it, the caller gets a `DocumentReadError` naming the file.
"""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from multiprocessing.connection import Connection
from typing import Any

from memorag.documents.errors import DocumentReadError
from memorag.documents.extracted import Extracted

_SAMPLE_SECONDS = 0.1
_REOPEN = "save it again from the program that made it, or split it"


class ReaderPool:
    """One reader process under `memory_mb`, started on first use, reused, restarted after a failure.
    Safe to share between threads: files are read one at a time. `peak_mb` holds the most resident
    memory any of its processes took, sampled every `_SAMPLE_SECONDS` while a file is read."""

    def __init__(self, memory_mb: int):
        self.memory_mb = memory_mb
        self._lock = threading.Lock()
        self._process: subprocess.Popen | None = None
        self._jobs: Connection | None = None
        self._replies: Connection | None = None
        self._stderr = None
        self.peak_mb = 0.0

    def read(self, job: tuple[str, tuple], name: str, seconds: float) -> tuple[str, Extracted]:
        """The answer to `job` for the file `name`, or its refusal; waits at most `seconds`."""
        with self._lock:
            self._start()
            try:
                self._send(job)
                reply = self._reply(seconds)
            except (EOFError, OSError):
                raise self._died(name) from None
            if reply is None:
                self.close()
                raise DocumentReadError(name, f"cannot be read safely: reading it took over the time limit "
                                              f"({seconds:g} s)", "split it, or raise the limit (--read-seconds)")
            if reply[0] == "memory":
                self.close()
        return self._answer(reply, name)

    def _reply(self, seconds: float) -> tuple[Any, ...] | None:
        """The reader's reply, or None after `seconds`; its peak memory sampled meanwhile."""
        deadline = time.monotonic() + seconds
        while not self._replies.poll(min(_SAMPLE_SECONDS, max(0.0, deadline - time.monotonic()))):
            self._sample_peak()
            if time.monotonic() >= deadline:
                return None
        self._sample_peak()
        return self._replies.recv()

    def _sample_peak(self) -> None:
        """Record the reader's peak resident memory so far (VmHWM; gone once it has died)."""
        try:
            with open(f"/proc/{self._process.pid}/status", "rb") as status:
                for line in status:
                    if line.startswith(b"VmHWM:"):
                        self.peak_mb = max(self.peak_mb, int(line.split()[1]) * 1024 / 1e6)
        except (OSError, ValueError):
            pass  # not Linux, or the process has just ended

    def _send(self, job: tuple[str, tuple]) -> None:
        try:
            self._jobs.send(job)
        except BrokenPipeError:  # the reader process ended while idle: start another
            self.close()
            self._start()
            self._jobs.send(job)

    def close(self) -> int | None:
        """Stop the reader process (killed if it is busy); its exit status."""
        process, self._process = self._process, None
        if process is None:
            return None
        for connection in (self._jobs, self._replies):
            connection.close()
        process.kill()
        process.wait()
        self._stderr.close()
        return process.returncode

    def _start(self) -> None:
        if self._process is not None:
            return
        jobs_read, jobs_write = os.pipe()
        replies_read, replies_write = os.pipe()
        package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))}
        self._stderr = tempfile.TemporaryFile()
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "memorag.documents.reader_process", str(jobs_read), str(replies_write),
                 str(self.memory_mb)], pass_fds=(jobs_read, replies_write), stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=self._stderr, env=env)
        finally:
            os.close(jobs_read)
            os.close(replies_write)
        self._jobs = Connection(jobs_write, readable=False)
        self._replies = Connection(replies_read, writable=False)

    def _died(self, name: str) -> DocumentReadError:
        self._stderr.seek(0)
        last = self._stderr.read().decode(errors="replace").strip().splitlines()[-1:]
        code = self.close()
        if code is not None and code < 0:
            how = f"was killed by {signal.Signals(-code).name}, most likely on reaching the memory limit"
        else:
            how = f"stopped ({last[0][:200] if last else f'exit status {code}'}) under the memory limit"
        return DocumentReadError(name, f"cannot be read safely: its reader process {how} ({self.memory_mb:,} MB)",
                                 f"{_REOPEN}, or raise the limit (--read-memory-mb)")

    def _answer(self, reply: tuple[Any, ...], name: str) -> tuple[str, Extracted]:
        status = reply[0]
        if status == "ok":
            return reply[1]
        if status == "refused":
            return _raise(DocumentReadError(name, reply[1], reply[2]))
        if status == "memory":
            return _raise(DocumentReadError(name, f"cannot be read safely: reading it needs more memory than the "
                                                  f"limit ({self.memory_mb:,} MB)",
                                            f"{_REOPEN}, or raise the limit (--read-memory-mb)"))
        if status == "recursion":
            return _raise(DocumentReadError(name, "cannot be read safely: it is nested too deeply to read "
                                                  f"(limit {sys.getrecursionlimit():,} levels)", _REOPEN))
        return _raise(DocumentReadError(name, f"cannot be read safely: its parser failed ({reply[1]})", _REOPEN))


def _raise(error: DocumentReadError):
    raise error


_POOLS: dict[int, ReaderPool] = {}
_POOLS_LOCK = threading.Lock()


def pool_for(memory_mb: int) -> ReaderPool:
    """The reader pool of this process for `memory_mb` (made on first use)."""
    with _POOLS_LOCK:
        if memory_mb not in _POOLS:
            _POOLS[memory_mb] = ReaderPool(memory_mb)
        return _POOLS[memory_mb]


@atexit.register
def close_pools() -> None:
    """Stop every reader process of this process."""
    with _POOLS_LOCK:
        for pool in _POOLS.values():
            pool.close()
