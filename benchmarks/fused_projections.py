"""Would fusing q, k and v into one matrix product per row group pay when memorizing (CPU, no autograd)?

    python benchmarks/fused_projections.py --threads 2 --out results/benchmarks/fused-projections.json

One layer's projections of one whole window (`--window` raw rows, one memory row after every
`--ratio`-th), from the window's rows split into raw and memory rows to q, k and v in sequence order,
two ways: as `MemoryAttention._project` computes them (three base products over the raw rows, three
memory products over the memory rows, three merges back into sequence order) and fused (one product of
the raw rows with the concatenated base q/k/v weights, one of the memory rows with the concatenated
memory weights, one merge, then q, k and v as slices). Random weights of the shape's dimensions
(memorag/benchmarking/shapes.py); median of `--repeats` timed runs after warm-up, the two ways
alternating.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

import torch
from torch.nn import functional as F

from memorag.benchmarking.machine import cpu_model
from memorag.benchmarking.shapes import SHAPES, shape_config
from memorag.memory.schedule import RawMemoryRows, WindowPiece


def _weights(out_features: list[int], hidden: int, dtype: torch.dtype) -> list[torch.Tensor]:
    return [torch.randn(n, hidden, dtype=dtype) * hidden**-0.5 for n in out_features]


def measure(shape: str, dtype: torch.dtype, window: int, ratio: int, repeats: int) -> dict:
    config = shape_config(shape)
    hidden, heads, kv_heads = config.hidden_size, config.num_attention_heads, config.num_key_value_heads
    head_dim = hidden // heads
    sizes = [heads * head_dim, kv_heads * head_dim, kv_heads * head_dim]
    base, memory = _weights(sizes, hidden, dtype), _weights(sizes, hidden, dtype)
    fused_base, fused_memory = torch.cat(base), torch.cat(memory)  # [q + k + v, D]
    rows = RawMemoryRows.of(*WindowPiece(0, window, ratio, 0, 0, True).row_kinds(), device=torch.device("cpu"))
    states = torch.randn(1, window + window // ratio, hidden, dtype=dtype)  # [1, T, D]

    def separate():
        raw, mem = rows.split(states)
        return [rows.merge(F.linear(raw, b), F.linear(mem, m)) for b, m in zip(base, memory, strict=True)]

    def fused():
        raw, mem = rows.split(states)
        return rows.merge(F.linear(raw, fused_base), F.linear(mem, fused_memory)).split(sizes, dim=-1)

    with torch.no_grad():
        for got, expected in zip(fused(), separate(), strict=True):
            difference = (got.float() - expected.float()).abs().max().item()
        times: dict[str, list[float]] = {"separate": [], "fused": []}
        for _ in range(3):
            separate(), fused()
        for _ in range(repeats):
            for name, run in (("separate", separate), ("fused", fused)):
                start = time.perf_counter()
                run()
                times[name].append(time.perf_counter() - start)
    medians = {name: statistics.median(values) for name, values in times.items()}
    return {"shape": shape, "dtype": str(dtype).removeprefix("torch."), "window": window, "ratio": ratio,
            "separate_ms": medians["separate"] * 1e3, "fused_ms": medians["fused"] * 1e3,
            "separate_over_fused": medians["separate"] / medians["fused"], "max_abs_difference": difference}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", nargs="+", default=["tiny", "smollm2-135m"], choices=list(SHAPES))
    parser.add_argument("--dtypes", nargs="+", default=["bfloat16", "float32"])
    parser.add_argument("--window", type=int, default=1024)
    parser.add_argument("--ratio", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    rows = []
    for shape in args.shapes:
        for dtype in args.dtypes:
            row = measure(shape, getattr(torch, dtype), args.window, args.ratio, args.repeats)
            rows.append(row)
            print(f"{shape} {row['dtype']}: separate {row['separate_ms']:.3f} ms, fused {row['fused_ms']:.3f} ms, "
                  f"separate / fused {row['separate_over_fused']:.2f}, max |difference| {row['max_abs_difference']:.2e}",
                  flush=True)
    machine = {"host": platform.node(), "processor": cpu_model(), "threads": args.threads, "torch": torch.__version__}
    if args.out:
        with open(args.out, "w") as handle:
            json.dump({"machine": machine, "rows": rows}, handle, indent=2)
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
