"""Bound the per-shape kernel caches of torch's CPU libraries, so resident memory stays flat.

On the CPU, a bfloat16 matmul (every linear layer of a bf16 model, the memory model's
attention) runs in oneDNN, which compiles a kernel (a "primitive") for each shape it
meets and keeps it in two caches: oneDNN's own primitive cache and the LRU cache of
ideep, the layer torch calls it through. Each keeps up to 1,024 kernels by default, and
a kernel holds a few hundred KB. A process that memorizes corpus after corpus meets
new shapes with every one (its last, partial window; its prompts' lengths; each
decoding step's attention over a memory of a new size), so its resident memory grew by
20 to 26 MB per corpus until both caches were full, hundreds of MB later
(`benchmarks/memory_bound.py`, `benchmarks/shape_cache.py`).

`import memorag` calls `bound_kernel_caches()`, which sets both capacities to
`KERNEL_CACHE_CAPACITY` (64) unless the environment already names them: a forward
pass reuses about ten kernels, so 64 keep every kernel it reuses, and compiling a
kernel again takes well under a millisecond. Results do not change: a cache decides
only whether a kernel is compiled again, not which kernel runs.

The libraries read the two variables once, when they first compile a kernel, so the
bound holds when memorag is imported before the process's first bf16 matmul on the
CPU. A program that runs one earlier sets them in its environment instead, e.g.
`ONEDNN_PRIMITIVE_CACHE_CAPACITY=64 LRU_CACHE_CAPACITY=64 python app.py`; setting them
to 1024 gives the libraries' own (unbounded in practice) behaviour back.
"""

from __future__ import annotations

import os

KERNEL_CACHE_CAPACITY = 64

# oneDNN's primitive cache, and ideep's (torch's oneDNN layer) LRU cache of primitives.
KERNEL_CACHE_VARIABLES = ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY")


def bound_kernel_caches(capacity: int = KERNEL_CACHE_CAPACITY) -> dict[str, str]:
    """Set the kernel caches' capacities to `capacity` where the environment does not already
    name them; returns the capacities in effect from now on (variable -> value).

    A capacity below 1 is refused: oneDNN and ideep read 0 differently (ideep crashes).
    """
    if capacity < 1:
        raise ValueError(f"kernel cache capacity {capacity}: give at least 1 (64 is the default)")
    for variable in KERNEL_CACHE_VARIABLES:
        os.environ.setdefault(variable, str(capacity))
    return {variable: os.environ[variable] for variable in KERNEL_CACHE_VARIABLES}
