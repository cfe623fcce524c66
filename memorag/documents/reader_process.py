"""The reader process: reads the files `memorag.documents.sandbox` sends it, one at a time,
under an address-space limit it sets on itself before any parser is imported (and a CPU-time
limit per file, for when the parent that times it has died), and answers
each with the text or a refusal. Nothing it reads can raise past it: a parser's own error,
MemoryError and RecursionError become answers too, and after a MemoryError it exits so the
next file starts in a fresh process.

    python -m memorag.documents.reader_process FD_JOBS FD_REPLIES MEMORY_MB
"""

from __future__ import annotations

import resource
import sys
from multiprocessing.connection import Connection
from typing import Any

from memorag.documents.errors import DocumentReadError


def answer(job: tuple[str, tuple]) -> tuple[Any, ...]:
    """("ok", (format, Extracted)), ("refused", problem, fix), ("memory",), ("recursion",) or ("failed", what)."""
    from memorag.documents.extraction import extract_bytes, extract_file

    kind, arguments = job
    _limit_cpu(arguments[-1].seconds)
    try:
        return "ok", (extract_file if kind == "file" else extract_bytes)(*arguments)
    except DocumentReadError as refusal:
        return "refused", refusal.problem, refusal.fix
    except MemoryError:
        return ("memory",)
    except RecursionError:
        return ("recursion",)
    except Exception as error:  # any parser's own exception type: reported by name, never raised
        return "failed", f"{type(error).__module__}.{type(error).__name__}: {error}"[:400]


def _limit_cpu(seconds: float) -> None:
    """Stop this process once this job has used `seconds` of CPU time (and a margin): the parent's
    clock stops a job first, this stops one whose parent has died."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    used = usage.ru_utime + usage.ru_stime
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    soft = int(used + seconds) + 5
    resource.setrlimit(resource.RLIMIT_CPU, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))


def serve(jobs: Connection, replies: Connection) -> None:
    while True:
        try:
            job = jobs.recv()
        except EOFError:
            return
        reply = answer(job)
        try:
            replies.send(reply)
        except MemoryError:
            reply = ("memory",)
            replies.send(reply)
        if reply[0] == "memory":
            return


def main(argv: list[str]) -> None:
    jobs_fd, replies_fd, memory_mb = (int(value) for value in argv)
    limit = memory_mb * 1_000_000
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    serve(Connection(jobs_fd, writable=False), Connection(replies_fd, readable=False))


if __name__ == "__main__":
    main(sys.argv[1:])
