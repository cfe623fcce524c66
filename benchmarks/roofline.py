"""The memorize roofline: FLOPs of reading N tokens and lower bounds on its time on this machine.

    python benchmarks/roofline.py                      # FLOPs and bounds for the memorize grid
    python benchmarks/roofline.py --lengths 32768 --ratios 4

The count and the measured rates are `memorag.benchmarking.roofline` (what is counted, and how,
is described there; tests/benchmarks/test_roofline.py checks the count against the
real calls).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from memorag.benchmarking.roofline import Shape, bounds, measure_peaks, memorize_flops


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", type=int, nargs="+", default=[4096, 8192, 16384, 32768])
    parser.add_argument("--ratios", type=int, nargs="+", default=[4, 16])
    parser.add_argument("--window", type=int, default=1024)
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--json", help="also write the rows here")
    args = parser.parse_args()
    peaks = measure_peaks(args.dtype)
    print(f"{args.dtype}: GEMM peak {peaks['gemm'] / 1e9:.0f} GFLOP/s, fused attention {peaks['attention'] / 1e9:.0f} "
          "GFLOP/s\n")
    print("| ratio | tokens | linear TFLOP | attention TFLOP | bound at GEMM peak s | bound at kernel rates s |")
    print("|---|---|---|---|---|---|")
    rows = []
    for ratio in args.ratios:
        for length in args.lengths:
            flops = memorize_flops(length, args.window, ratio)
            limit = bounds(flops, peaks)
            rows.append({"ratio": ratio, "tokens": length, **flops, **limit})
            print(f"| {ratio} | {length} | {flops['linear'] / 1e12:.2f} | {flops['attention'] / 1e12:.2f} | "
                  f"{limit['at_gemm_peak_s']:.1f} | {limit['at_kernel_rates_s']:.1f} |")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"dtype": args.dtype, "peaks": peaks, "shape": asdict(Shape()), "rows": rows}, handle, indent=2)


if __name__ == "__main__":
    main()
