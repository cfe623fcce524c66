"""Give freed memory back to the operating system after a large piece of work.

A memorized corpus frees hundreds of megabytes of tensors when it is dropped, but
glibc's allocator keeps freed blocks in its arenas (one per thread that allocated
them, e.g. torch's worker threads) and returns them to the system only when the top
of an arena happens to be free. A long-lived process that memorizes corpora one after
another (a server, an evaluation loop) then grows its resident set with each one
although it holds nothing more. `malloc_trim(0)` releases the free pages of every
arena: `trim_heap()` calls it (`MemoRAG.memorize` does, when it is done), and
`release_memory()` collects garbage first (the server does, when it drops a corpus).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
import os


@functools.cache
def _malloc_trim():
    """glibc's `malloc_trim`, or None where the C library has none (musl, macOS, Windows)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


def can_trim() -> bool:
    """Whether this C library can hand freed heap memory back (glibc)."""
    return _malloc_trim() is not None


def trim_heap() -> bool:
    """Return the allocator's free pages to the system (glibc); False where the C library cannot."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


def release_memory() -> bool:
    """Collect garbage, then return the allocator's free pages to the system (`trim_heap`).

    Returns True when the C library could trim (glibc), False where only the garbage
    collection ran.
    """
    gc.collect()
    return trim_heap()


def resident_mb() -> float:
    """The process's resident set now, in MiB (Linux: `/proc/self/statm`); what a trim gives back shows here."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def slope_per_step(values: list[float], skip: int = 0) -> float:
    """Least-squares slope of `values` against their index, ignoring the first `skip` (e.g. MB of
    resident memory per corpus); NaN when fewer than two values remain."""
    points = list(enumerate(values))[skip:]
    if len(points) < 2:
        return float("nan")
    mean_x = sum(x for x, _ in points) / len(points)
    mean_y = sum(y for _, y in points) / len(points)
    spread = sum((x - mean_x) ** 2 for x, _ in points)
    return sum((x - mean_x) * (y - mean_y) for x, y in points) / spread
