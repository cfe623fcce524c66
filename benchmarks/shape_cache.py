"""Resident memory per new input length: the memory model's base forward over 24 token counts, then 8 again.

    python benchmarks/shape_cache.py                                     # RSS after every 4 new lengths
    ONEDNN_PRIMITIVE_CACHE_CAPACITY=0 python benchmarks/shape_cache.py   # with oneDNN's kernel cache off
    ONEDNN_PRIMITIVE_CACHE_CAPACITY=1024 LRU_CACHE_CAPACITY=1024 python benchmarks/shape_cache.py  # unbounded

A diagnostic for the growth `benchmarks/memory_bound.py` shows: every forward runs
over a length not seen before (101, 114, ... tokens), with garbage collection and
`malloc_trim` after each; then 8 of the same lengths run again. Growth that stops on
repeated lengths is a per-shape cache in the native libraries: oneDNN's primitive
cache and ideep's LRU cache, which `import memorag` now bounds to 64 kernels each
(memorag/runtime/kernel_caches.py), so resident memory stops growing once they are full.
Prints RSS lines (the raw output with the bound: results/benchmarks/serving_logs.txt, its
`shape_cache_bounded.log` part; the runs before the bound are in the repository's history).
"""

from __future__ import annotations

import gc
import sys
import time


def main() -> int:
    import torch

    from memorag.commands.main import _quiet_libraries
    from memorag.memory import MemoryModel
    from memorag.runtime.memtrim import resident_mb, trim_heap

    torch.set_num_threads(1)
    _quiet_libraries()
    base = MemoryModel.from_pretrained(memory_weights="untrained").base_model
    print("dtype", next(base.parameters()).dtype, flush=True)

    def forward(length: int) -> None:
        with torch.no_grad():
            base(torch.randint(0, 1000, (1, length)))

    forward(64)
    gc.collect()
    trim_heap()
    print("start", round(resident_mb()), flush=True)
    started = time.time()
    lengths = range(101, 101 + 24 * 13, 13)
    for number, length in enumerate(lengths, start=1):
        forward(length)
        gc.collect()
        trim_heap()
        if number % 4 == 0:
            print(number, "shapes", round(resident_mb()), round(time.time() - started), flush=True)
    for length in lengths[:8]:
        forward(length)
    gc.collect()
    trim_heap()
    print("same shapes again", round(resident_mb()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
