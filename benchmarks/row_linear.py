"""A decoding step's linear layers on the CPU: plain `F.linear` against the split product of
memory/linear.py, over 1 to 6 rows (float32 unless told).

    python benchmarks/row_linear.py                        # the embedded model's shape, 2 threads
    python benchmarks/row_linear.py --threads 4 --out benchmarks/results/row-parallel-2026-11-26/row-linear.json
    python benchmarks/row_linear.py --dtypes float32 bfloat16   # the split applies to float32 only
    python benchmarks/row_linear.py --rows 1 --per-matrix       # also each weight shape alone

Every linear layer a decoding token passes through, in order (per layer q, k, v, o, gate, up,
down, then the LM head), with random weights of the shape's dimensions
(memorag/benchmarking/shapes.py): the weights exceed the CPU's caches, so each pass streams them
from memory, as a decoding step does. For each row count: the median of `--repeats` passes,
plain and split alternating, the weights' GB/s, and whether the split product's outputs equal
plain `F.linear`'s bit for bit on this machine. Rows above `MAX_ROWS` and dtypes other than
float32 are timed split anyway, to show why the memory model keeps them plain. Prints a
markdown table; `--out` writes JSON.
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
from memorag.memory.linear import MAX_ROWS, MIN_BLOCK_ELEMENTS, blocks_for, split_product


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


def measure(weights: list[torch.Tensor], rows: int, threads: int, repeats: int, every_matrix: bool = False) -> dict:
    """Plain against split over `weights`; `every_matrix`: split each one in as many blocks as threads
    divide its rows evenly, however small (to show where the memory model's size floor comes from)."""
    dtype = weights[0].dtype
    inputs = {n: torch.randn(1, rows, n, dtype=dtype) for n in {w.shape[1] for w in weights}}
    # with `every_matrix`, an input width of MIN_BLOCK_ELEMENTS lifts blocks_for's size floor
    blocks = [blocks_for(w.shape[0], w.shape[1] if not every_matrix else MIN_BLOCK_ELEMENTS, threads)
              for w in weights]

    def plain():
        return [F.linear(inputs[w.shape[1]], w) for w in weights]

    def split():
        return [split_product(inputs[w.shape[1]], w, None, b) if b > 1 else F.linear(inputs[w.shape[1]], w)
                for w, b in zip(weights, blocks, strict=True)]

    with torch.no_grad():
        expected, got = plain(), split()
        equal = all(torch.equal(a, b) for a, b in zip(expected, got, strict=True))
        difference = max((a.float() - b.float()).abs().max().item() for a, b in zip(expected, got, strict=True))
        times: dict[str, list[float]] = {"plain": [], "split": []}
        for _ in range(repeats):
            for name, run in (("plain", plain), ("split", split)):
                started = time.perf_counter()
                run()
                times[name].append(time.perf_counter() - started)
    nbytes = sum(w.numel() * w.element_size() for w in weights)
    medians = {name: statistics.median(values) for name, values in times.items()}
    return {"dtype": str(dtype).removeprefix("torch."), "rows": rows, "applies": rows <= MAX_ROWS and dtype == torch.float32,
            "plain_ms": medians["plain"] * 1e3, "split_ms": medians["split"] * 1e3,
            "plain_over_split": medians["plain"] / medians["split"],
            "plain_gb_s": nbytes / medians["plain"] / 1e9, "split_gb_s": nbytes / medians["split"] / 1e9,
            "bit_equal": equal, "max_abs_difference": difference}


def per_matrix(shape: str, threads: int, repeats: int) -> list[dict]:
    """One float32 row through each distinct weight shape of `shape`, plain and split (however small)."""
    print("\none float32 row, each weight shape alone (64 MB of copies), split whatever its size\n")
    print("| weight [out, in] | the memory model splits | plain us | split us | plain / split |\n|---|---|---:|---:|---:|")
    found = []
    for out_features, in_features in dict.fromkeys(layer_shapes(shape)):
        copies = max(2, 2**24 // (out_features * in_features))
        weights = [torch.randn(out_features, in_features) for _ in range(copies)]
        row = measure(weights, 1, threads, repeats, every_matrix=True)
        row.update(weight=[out_features, in_features], copies=copies,
                   memory_model_splits=blocks_for(out_features, in_features, threads) > 1)
        found.append(row)
        print(f"| {out_features} x {in_features} | {'yes' if row['memory_model_splits'] else 'no'} | "
              f"{row['plain_ms'] * 1e3 / copies:.0f} | {row['split_ms'] * 1e3 / copies:.0f} | "
              f"{row['plain_over_split']:.2f} |", flush=True)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", default="smollm2-135m", choices=list(SHAPES))
    parser.add_argument("--dtypes", nargs="+", default=["float32"], choices=["float32", "bfloat16", "float16"])
    parser.add_argument("--rows", nargs="+", type=int, default=list(range(1, MAX_ROWS + 1)) + [6])
    parser.add_argument("--threads", type=int, default=2, help="torch's CPU threads (default 2)")
    parser.add_argument("--repeats", type=int, default=7, help="timed passes per way (default 7)")
    parser.add_argument("--per-matrix", action="store_true",
                        help="also one row through each distinct weight shape alone (copies that exceed the caches), "
                             "split however small, beside whether the memory model splits it")
    parser.add_argument("--out", help="write the JSON here")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    results = []
    print(f"{args.shape}, {args.threads} threads: a decoding step's linear layers, plain F.linear against "
          "the split product\n")
    print("| dtype | rows | the memory model splits | plain ms | split ms | plain / split | plain GB/s | "
          "split GB/s | bit-equal |\n|---|---:|---|---:|---:|---:|---:|---:|---|")
    for dtype in args.dtypes:
        weights = layer_weights(args.shape, getattr(torch, dtype))
        for rows in args.rows:
            row = measure(weights, rows, args.threads, args.repeats)
            results.append(row)
            print(f"| {row['dtype']} | {rows} | {'yes' if row['applies'] else 'no'} | {row['plain_ms']:.1f} | "
                  f"{row['split_ms']:.1f} | {row['plain_over_split']:.2f} | {row['plain_gb_s']:.1f} | "
                  f"{row['split_gb_s']:.1f} | {row['bit_equal']} |", flush=True)
    matrices = per_matrix(args.shape, args.threads, args.repeats) if args.per_matrix else []
    if args.out:
        record = {"benchmark": "row_linear", "shape": args.shape, "threads": args.threads, "repeats": args.repeats,
                  "max_rows": MAX_ROWS, "min_block_elements": MIN_BLOCK_ELEMENTS, "rows": results,
                  "matrices": matrices, "machine": machine_record(None)}
        with open(args.out, "w") as handle:
            json.dump(record, handle, indent=2)
        print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
