"""Memorize speed and memory on a model's shape (docs/memory-model.md), on the CPU or a GPU.

    python benchmarks/memorize.py                 # the full grid, random weights
    python benchmarks/memorize.py --quick         # 4K and 8K only
    python benchmarks/memorize.py --lengths 8192 --ratios 4 --dtype bf16
    python benchmarks/memorize.py --device cuda --dtype bf16 --shape qwen2-7b --lengths 16384 32768 --ratios 4
    git worktree add /tmp/before REV && python benchmarks/memorize.py --baseline /tmp/before \
        --lengths 8192 16384 32768 --ratios 4 16 --dtype bf16 --repeats 2

Each cell runs in a fresh process (so peak memory is the cell's own): memorize N
random tokens at ratio r with window `--window` (1024), full-coverage attention, memory
parameters qkv, SDPA; beside it a plain transformers forward (no memory, no logits)
over the same tokens where they fit in `--plain-max` (8192) tokens. Weights are
random with the dimensions of `--shape` (memorag/benchmarking/shapes.py; default
SmolLM2-135M's; `--embedded` uses the real embedded model); positions are raised to
65536 so that 32K tokens fit at r=4 (random weights: speed only, no quality). A
memorize cell times its context twice in its process: `seconds`, the first time (what
the first context a process reads costs, the device's per-shape state built on the
way: CUDA execution plans, allocator pools), and `seconds_again` (what each later
context of that length costs); `--profile` adds a third run under torch.profiler;
`--compile-windows [MODE]` memorizes through compiled layers (memory/compiled.py),
compiled first by one untimed window. The
device options (`--device`, `--dtype`, one or more, `--threads`) are the shared ones of
memorag/benchmarking/device.py. Peak memory is that of the first timed run (CUDA:
torch.cuda.max_memory_allocated; CPU: peak RSS). Prints a markdown table and writes
JSON to results/benchmarks/.

Beside each memorize cell: its lower bound from `benchmarks/roofline.py` (the cell's
exact FLOPs, linear layers at the device's GEMM peak and attention at the fused
attention kernel's rate, both measured in the same run), and the measured time as a
share of it.

`--baseline DIR` compares with another checkout of the project (e.g. the commit before a
change; memorag/benchmarking/baseline.py): every memorize cell runs in both trees, a fresh
process each, alternating (the baseline first in rounds 1, 3, ..., this tree first in rounds 2, 4, ...),
`--repeats` times each, and the table gives the best time of each and their ratio (before / after; above 1:
this tree is faster). Alternating keeps any load on the machine fair to both. Options
the baseline's own script may not know (`--device`, `--shape`, `--window`) are passed
to it only when they differ from their defaults.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
from pathlib import Path

from memorag.benchmarking.baseline import AFTER, BEFORE, alternate, compare_seconds, revision, run_script
from memorag.benchmarking.device import BenchDevice, add_device_options, dtype_option
from memorag.benchmarking.roofline import Shape, bounds, memorize_flops
from memorag.benchmarking.shapes import SHAPES, random_base, shape_config

DEFAULTS = {"device": "cpu", "shape": "smollm2-135m", "window": 1024}


def run_cell(mode: str, length: int, ratio: int, dtype_name: str, args: argparse.Namespace) -> dict:
    """One measurement, in this process."""
    import torch

    from memorag.memory import MemoryConfig, MemoryModel

    device = BenchDevice.from_args(args)
    dtype = getattr(torch, dtype_name)
    torch.manual_seed(0)
    if args.embedded:
        from transformers import AutoModelForCausalLM

        from memorag.generation.models import resolve_lm

        base = AutoModelForCausalLM.from_pretrained(resolve_lm(None), dtype=dtype).to(device.torch_device)
        base.config.max_position_embeddings = max(base.config.max_position_embeddings, 65536)
    else:
        base = random_base(args.shape, device.name, dtype_name)
    base.eval()
    ids = torch.randint(0, base.config.vocab_size, (1, length)).to(device.torch_device)
    result = {"mode": mode, "tokens": length, "ratio": ratio if mode == "memorize" else None, "dtype": dtype_name}
    if mode == "plain":
        with torch.no_grad():
            base.model(ids[:, :64])  # warm-up
            device.reset_peak_memory()
            seconds, _ = device.seconds(lambda: base.model(ids, use_cache=False))
        result["kv_bytes_per_token"] = 2 * base.config.num_hidden_layers * base.config.num_key_value_heads * (
            base.config.hidden_size // base.config.num_attention_heads) * torch.finfo(dtype).bits // 8
    else:
        model = MemoryModel(base, MemoryConfig(window=args.window, ratios=[ratio]))
        if args.compile_windows:  # warmed up by one whole window: its graphs serve every whole window after
            model.compile_windows(mode=None if args.compile_windows == "default" else args.compile_windows)
            result["compile_s"] = device.seconds(lambda: model.memorize(ids[0, : args.window].tolist(),
                                                                       show_progress=False))[0]
        model.memorize(ids[0, :64].tolist(), show_progress=False)  # warm-up
        device.reset_peak_memory()
        seconds, memory = device.seconds(lambda: model.memorize(ids[0].tolist(), show_progress=False))
        result["memory_entries"] = memory.num_entries
        result["memory_mb"] = memory.nbytes / 2**20
        result["kv_bytes_per_token"] = memory.nbytes / length
        result["peak_memory_mb"] = device.peak_memory_mb()  # the first run's
        # the same context again in the same process: what each later context of this length costs once the
        # first has built the device's per-shape state (CUDA execution plans, allocator pools)
        result["seconds_again"] = device.seconds(lambda: model.memorize(ids[0].tolist(), show_progress=False))[0]
        if args.profile:  # after the timing: one more run under torch.profiler, its table on stderr
            print(device.profile(lambda: model.memorize(ids[0].tolist(), show_progress=False)), file=sys.stderr)
    result.setdefault("peak_memory_mb", device.peak_memory_mb())
    result.update(seconds=seconds, tokens_per_s=length / seconds)
    return result


def _cell_options(args) -> list[str]:
    """The command-line options a cell's process needs (non-defaults only: see the docstring)."""
    options = ["--embedded"] if args.embedded else []
    options += ["--profile"] if args.profile else []
    options += ["--compile-windows", args.compile_windows] if args.compile_windows else []
    options += ["--threads", str(args.threads)] if args.threads else []
    for name, default in DEFAULTS.items():
        if getattr(args, name) != default:
            options += [f"--{name}", str(getattr(args, name))]
    return options


def _peaks(args, device: BenchDevice) -> dict[str, dict[str, float]]:
    """The device's GEMM and attention peaks per dtype, measured now (attention at this window)."""
    return {dtype: device.peaks(args, dtype, _shape(args), args.window, 4 * args.window) for dtype in args.dtype}


def _shape(args) -> Shape:
    return Shape.of(shape_config("smollm2-135m" if args.embedded else args.shape))


def compare(args, lengths: list[int]) -> None:
    """Memorize cells in this tree and in `args.baseline`, alternating; best of `args.repeats` each."""
    here, there = Path(__file__).resolve().parents[1], Path(args.baseline).resolve()
    trees = {BEFORE: there, AFTER: here}
    device = BenchDevice.from_args(args)
    peaks = _peaks(args, device)
    rows = []
    for dtype in args.dtype:
        for ratio in args.ratios:
            for length in lengths:
                options = ["--cell", ",".join(map(str, ("memorize", length, ratio, dtype))), *_cell_options(args)]
                times = alternate(args.repeats, lambda label, _round, options=options: run_script(
                    trees[label], "benchmarks/memorize.py", options)["seconds"])
                best = compare_seconds(times)["best_s"]
                bound = bounds(memorize_flops(length, args.window, ratio, _shape(args)), peaks[dtype])["at_kernel_rates_s"]
                rows.append({"dtype": dtype, "ratio": ratio, "tokens": length, "runs": times, **best,
                             "before_over_after": best["before"] / best["after"], "after_bound_s": bound})
                print(f"{dtype} r={ratio} {length} tok: before {best['before']:.2f} s, after {best['after']:.2f} s, "
                      f"ratio {best['before'] / best['after']:.3f}", flush=True)
    print(f"\nbefore = {there} ({revision(there)}), after = {here} ({revision(here)})")
    for dtype, peak in peaks.items():
        print(f"{dtype}: GEMM peak {peak['gemm'] / 1e9:.0f} GFLOP/s, fused attention {peak['attention'] / 1e9:.0f} GFLOP/s")
    print("| dtype | ratio | tokens | before s | after s | before / after | after's bound s | bound / after |")
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['dtype']} | {row['ratio']} | {row['tokens']} | {row['before']:.2f} | {row['after']:.2f} | "
              f"{row['before_over_after']:.3f} | {row['after_bound_s']:.1f} | {row['after_bound_s'] / row['after']:.0%} |")
    out = Path(args.out) if args.out else Path(__file__).resolve().parents[1] / "results" / "benchmarks" / f"memorize-compare-{platform.node()}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    from memorag.benchmarking.machine import cpu_model

    machine = {"host": platform.node(), "cpus": __import__("os").cpu_count(), "processor": cpu_model(),
               "before": revision(there), "after": revision(here), "repeats": args.repeats, **device.record()}
    out.write_text(json.dumps({"machine": machine, "peaks_flop_per_s": peaks, "rows": rows}, indent=2))
    print(f"\nwrote {out}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_device_options(parser, ["bf16", "fp32"], several_dtypes=True)
    parser.add_argument("--shape", default=DEFAULTS["shape"], choices=list(SHAPES), help="random weights of this shape")
    parser.add_argument("--window", type=int, default=DEFAULTS["window"])
    parser.add_argument("--lengths", type=int, nargs="+", default=[4096, 8192, 16384, 32768])
    parser.add_argument("--ratios", type=int, nargs="+", default=[4, 16])
    parser.add_argument("--plain-max", type=int, default=8192, help="longest plain forward (model positions)")
    parser.add_argument("--quick", action="store_true", help="4K and 8K only")
    parser.add_argument("--embedded", action="store_true", help="real embedded weights instead of random ones")
    parser.add_argument("--out", default=None, help="JSON path (default results/benchmarks/memorize-HOST.json)")
    parser.add_argument("--baseline", help="another checkout of the project to compare memorize cells with")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each cell (the best time counts)")
    parser.add_argument("--profile", action="store_true",
                        help="print the top operators of one more memorize per cell (on CUDA: kernels by device time too)")
    parser.add_argument("--compile-windows", nargs="?", const="default", choices=["default", "max-autotune-no-cudagraphs"],
                        help="memorize through compiled layers (MemoryModel.compile_windows), compiled by one "
                             "untimed window first (its seconds: compile_s)")
    parser.add_argument("--cell", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.cell:
        mode, length, ratio, dtype = args.cell.split(",")
        print(json.dumps(run_cell(mode, int(length), int(ratio), dtype_option(dtype), args)))
        return
    lengths = [n for n in args.lengths if n <= 8192] if args.quick else args.lengths
    if args.baseline:
        compare(args, lengths)
        return
    cells = []
    for dtype in args.dtype:
        for ratio in args.ratios:
            cells += [("memorize", n, ratio, dtype) for n in lengths]
        cells += [("plain", n, 0, dtype) for n in lengths if n <= args.plain_max]
    device = BenchDevice.from_args(args)
    peaks = _peaks(args, device)
    results = []
    for cell in cells:
        command = [sys.executable, __file__, "--cell", ",".join(map(str, cell))] + _cell_options(args)
        completed = subprocess.run(command, capture_output=True, text=True, check=False)
        if completed.returncode != 0:
            print(completed.stderr[-2000:], file=sys.stderr)
            raise SystemExit(f"cell {cell} failed")
        row = json.loads(completed.stdout.strip().splitlines()[-1])
        if args.profile:
            print(completed.stderr, flush=True)
        if row["mode"] == "memorize":
            row["flops"] = memorize_flops(row["tokens"], args.window, row["ratio"], _shape(args))
            row["bound_s"] = bounds(row["flops"], peaks[row["dtype"]])["at_kernel_rates_s"]
            row["share_of_bound"] = row["bound_s"] / row["seconds"]
        results.append(row)
        label = f"{row['mode']:8s} {row['dtype']:8s} r={row['ratio'] or '-':<3} {row['tokens']:>6} tok"
        again = f" (again {row['seconds_again']:.2f} s)" if "seconds_again" in row else ""
        again += f" (compiled in {row['compile_s']:.1f} s)" if "compile_s" in row else ""
        print(f"{label}  {row['seconds']:7.2f} s{again}  {row['tokens_per_s']:7.0f} tok/s  "
              f"peak {row['peak_memory_mb']:6.0f} MB", flush=True)
    print()
    for dtype, peak in peaks.items():
        print(f"{dtype}: GEMM peak {peak['gemm'] / 1e9:,.0f} GFLOP/s, fused attention {peak['attention'] / 1e9:,.0f} "
              f"GFLOP/s ({device.name})")
    print("| mode | dtype | ratio | tokens | seconds | again s | tokens/s | bound s | bound/time | bound/again "
          "| peak MB | memory MB | KV bytes/token |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for row in results:
        bound = row.get("bound_s")
        bound_text = "-" if bound is None else f"{bound:.2f}"
        share = "-" if bound is None else f"{bound / row['seconds']:.0%}"
        again = row.get("seconds_again")
        again_text = "-" if again is None else f"{again:.2f}"
        share_again = "-" if bound is None or again is None else f"{bound / again:.0%}"
        print(f"| {row['mode']} | {row['dtype']} | {row['ratio'] or '-'} | {row['tokens']} | {row['seconds']:.2f} | "
              f"{again_text} | {row['tokens_per_s']:.0f} | {bound_text} | {share} | {share_again} | "
              f"{row['peak_memory_mb']:.0f} | "
              f"{row.get('memory_mb', float('nan')):.1f} | {row['kv_bytes_per_token']:.0f} |")
    out = Path(args.out) if args.out else Path(__file__).resolve().parents[1] / "results" / "benchmarks" / f"memorize-{platform.node()}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    import torch

    from memorag.benchmarking.machine import cpu_model

    machine = {"host": platform.node(), "cpus": __import__("os").cpu_count(), "processor": cpu_model(),
               "torch": torch.__version__, **device.record(),
               "weights": "embedded" if args.embedded else f"random ({args.shape} shape)"}
    settings = {"window": args.window, "shape": "smollm2-135m" if args.embedded else args.shape,
                "compile_windows": args.compile_windows}
    out.write_text(json.dumps({"machine": machine, "settings": settings, "peaks_flop_per_s": peaks,
                               "results": results}, indent=2))
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
