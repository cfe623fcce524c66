"""A decoding step's linear layers on the CPU for a few rows: one `F.linear` per row (how an exact
batch rounds each sequence alone with plain products), one `F.linear` over all rows, and the
fixed-shape product of memory/linear.py (`ROWS` rows, the weight as the left operand), which
gives each row its own rounding and so lets an exact batch share it (float32 unless told).

    python benchmarks/row_linear.py                        # the embedded model's shape, 2 threads
    python benchmarks/row_linear.py --threads 4 --out benchmarks/results/<dir>/row-linear.json
    python benchmarks/row_linear.py --dtypes float32 bfloat16   # the fixed-shape product applies to float32 only

Every linear layer a decoding token passes through, in order (per layer q, k, v, o, gate, up,
down, then the LM head), with random weights of the shape's dimensions
(memorag/benchmarking/shapes.py): the weights exceed the CPU's caches, so each pass streams them
from memory, as a decoding step does. For each row count: the median of `--repeats` passes, the
three ways alternating, the weights' GB/s through the fixed-shape product, and whether each row's
fixed-shape result equals that row's alone bit for bit on this machine (what an exact batch rests
on). Dtypes other than float32 are timed through it anyway, to show why the memory model keeps
them plain. Prints a markdown table; `--out` writes JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
from torch.nn import functional as F

from memorag.benchmarking.shapes import SHAPES, shape_config
from memorag.machine import machine_record
from memorag.memory.linear import ROWS, fixed_rows_product


def layer_shapes(shape: str) -> list[tuple[int, int]]:
    """A decoding step's weight shapes [out, in] in the order a token meets them."""
    config = shape_config(shape)
    hidden, heads, kv_heads = config.hidden_size, config.num_attention_heads, config.num_key_value_heads
    head_dim = getattr(config, "head_dim", None) or hidden // heads
    layer = [(heads * head_dim, hidden), (kv_heads * head_dim, hidden), (kv_heads * head_dim, hidden),
             (hidden, heads * head_dim), (config.intermediate_size, hidden), (config.intermediate_size, hidden),
             (hidden, config.intermediate_size)]
    return layer * config.num_hidden_layers + [(config.vocab_size, hidden)]


def layer_weights(shape: str, dtype: torch.dtype) -> list[torch.Tensor]:
    """A decoding step's weight matrices, random, in the order a token meets them."""
    return [torch.randn(out, inp, dtype=dtype) * inp**-0.5 for out, inp in layer_shapes(shape)]


def measure(weights: list[torch.Tensor], rows: int, repeats: int) -> dict:
    """The three ways over `weights` for `rows` rows; whether the fixed-shape product rounds each row as alone."""
    dtype = weights[0].dtype
    inputs = {n: torch.randn(rows, n, dtype=dtype) for n in {w.shape[1] for w in weights}}
    ways = {
        "per_row": lambda: [[F.linear(inputs[w.shape[1]][i : i + 1], w) for i in range(rows)] for w in weights],
        "together": lambda: [F.linear(inputs[w.shape[1]], w) for w in weights],
        "fixed": lambda: [fixed_rows_product(inputs[w.shape[1]], w, None) for w in weights],
    }
    with torch.no_grad():
        fixed = ways["fixed"]()
        alone = [torch.cat([fixed_rows_product(inputs[w.shape[1]][i : i + 1], w, None) for i in range(rows)])
                 for w in weights]
        rows_own = all(torch.equal(a, b) for a, b in zip(fixed, alone, strict=True))
        plain = ways["together"]()
        difference = max((a.float() - b.float()).abs().max().item() for a, b in zip(plain, fixed, strict=True))
        times: dict[str, list[float]] = {name: [] for name in ways}
        for _ in range(repeats):
            for name, run in ways.items():
                started = time.perf_counter()
                run()
                times[name].append(time.perf_counter() - started)
    nbytes = sum(w.numel() * w.element_size() for w in weights)
    ms = {name: statistics.median(values) * 1e3 for name, values in times.items()}
    return {"dtype": str(dtype).removeprefix("torch."), "rows": rows,
            "applies": dtype == torch.float32,
            "per_row_ms": ms["per_row"], "together_ms": ms["together"], "fixed_ms": ms["fixed"],
            "per_row_over_fixed": ms["per_row"] / ms["fixed"], "together_over_fixed": ms["together"] / ms["fixed"],
            "fixed_gb_s": nbytes / ms["fixed"] / 1e6,
            "each_row_its_own": rows_own, "max_abs_difference_from_together": difference}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", default="smollm2-135m", choices=list(SHAPES))
    parser.add_argument("--dtypes", nargs="+", default=["float32"], choices=["float32", "bfloat16", "float16"])
    parser.add_argument("--rows", nargs="+", type=int, default=list(range(1, ROWS + 1)) + [6, 8],
                        help=f"row counts (default 1 to {ROWS}, 6 and 8: above {ROWS}, groups of {ROWS})")
    parser.add_argument("--threads", type=int, default=2, help="torch's CPU threads (default 2)")
    parser.add_argument("--repeats", type=int, default=7, help="timed passes per way (default 7)")
    parser.add_argument("--out", help="write the JSON here")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    results = []
    print(f"{args.shape}, {args.threads} threads: a decoding step's linear layers over a few rows: F.linear per "
          f"row, F.linear over all rows, and the fixed-shape product ({ROWS} rows)\n")
    print("| dtype | rows | the memory model uses it | per row ms | together ms | fixed ms | per row / fixed | "
          "fixed GB/s | each row its own |\n|---|---:|---|---:|---:|---:|---:|---:|---|")
    for dtype in args.dtypes:
        weights = layer_weights(args.shape, getattr(torch, dtype))
        for rows in args.rows:
            row = measure(weights, rows, args.repeats)
            results.append(row)
            print(f"| {row['dtype']} | {rows} | {'yes' if row['applies'] else 'no'} | {row['per_row_ms']:.1f} | "
                  f"{row['together_ms']:.1f} | {row['fixed_ms']:.1f} | {row['per_row_over_fixed']:.2f} | "
                  f"{row['fixed_gb_s']:.1f} | {row['each_row_its_own']} |", flush=True)
    if args.out:
        record = {"benchmark": "row_linear", "shape": args.shape, "threads": args.threads, "repeats": args.repeats,
                  "fixed_rows": ROWS, "rows": results, "machine": machine_record(None)}
        with open(args.out, "w") as handle:
            json.dump(record, handle, indent=2)
        print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
