"""Memorize speed and memory on the embedded model's shape (docs/memory-model.md).

    python benchmarks/memorize.py                 # the full grid, random weights
    python benchmarks/memorize.py --quick         # 4K and 8K only
    python benchmarks/memorize.py --lengths 8192 --ratios 4 --dtypes bfloat16
    git worktree add /tmp/before REV && python benchmarks/memorize.py --baseline /tmp/before \
        --lengths 8192 16384 32768 --ratios 4 16 --dtypes bfloat16 --repeats 2

Each cell runs in a fresh process (so peak memory is the cell's own): memorize N
random tokens at ratio r with window 1024, full-coverage attention, memory
parameters qkv, SDPA; beside it a plain transformers forward (no memory, no logits)
over the same tokens where they fit in the model's 8192 positions. Weights are
random with SmolLM2-135M's dimensions (`--embedded` uses the real embedded model);
positions are raised to 65536 so that 32K tokens fit at r=4 (random weights: speed
only, no quality). Prints a markdown table and writes JSON to benchmarks/results/.

Beside each memorize cell: its lower bound from `benchmarks/roofline.py` (the cell's
exact FLOPs, linear layers at this machine's measured GEMM peak and attention at the
fused attention kernel's measured rate), and the measured time as a share of it.

`--baseline DIR` compares with another checkout of the project (e.g. the commit before a
change): every memorize cell runs in both trees, alternating, `--repeats` times each,
and the table gives the best time of each and their ratio (before / after; above 1:
this tree is faster). Alternating keeps any load on the machine fair to both.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

# SmolLM2-135M's architecture (the embedded model), for random-weight runs.
SMOLLM2_SHAPE = dict(
    vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
    num_key_value_heads=3, rope_theta=100000.0, rms_norm_eps=1e-5, tie_word_embeddings=True,
)


def _peak_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def run_cell(mode: str, length: int, ratio: int, dtype_name: str, embedded: bool, threads: int | None) -> dict:
    """One measurement, in this process."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from memorag.memory import MemoryConfig, MemoryModel

    if threads:
        torch.set_num_threads(threads)
    dtype = getattr(torch, dtype_name)
    torch.manual_seed(0)
    if embedded:
        from transformers import AutoModelForCausalLM

        from memorag.models import resolve_lm

        base = AutoModelForCausalLM.from_pretrained(resolve_lm(None), dtype=dtype)
        base.config.max_position_embeddings = max(base.config.max_position_embeddings, 65536)
    else:
        config = LlamaConfig(**SMOLLM2_SHAPE, max_position_embeddings=65536, attn_implementation="sdpa")
        base = LlamaForCausalLM(config).to(dtype)
    base.eval()
    ids = torch.randint(0, base.config.vocab_size, (1, length))
    result = {"mode": mode, "tokens": length, "ratio": ratio if mode == "memorize" else None, "dtype": dtype_name}
    if mode == "plain":
        with torch.no_grad():
            base.model(ids[:, :64])  # warm-up
            start = time.perf_counter()
            base.model(ids, use_cache=False)
            seconds = time.perf_counter() - start
        result["kv_bytes_per_token"] = 2 * base.config.num_hidden_layers * base.config.num_key_value_heads * (
            base.config.hidden_size // base.config.num_attention_heads) * torch.finfo(dtype).bits // 8
    else:
        model = MemoryModel(base, MemoryConfig(window=1024, ratios=[ratio]))
        model.memorize(ids[0, :64].tolist(), show_progress=False)  # warm-up
        start = time.perf_counter()
        memory = model.memorize(ids[0].tolist(), show_progress=False)
        seconds = time.perf_counter() - start
        result["memory_entries"] = memory.num_entries
        result["memory_mb"] = memory.nbytes / 2**20
        result["kv_bytes_per_token"] = memory.nbytes / length
    result.update(seconds=seconds, tokens_per_s=length / seconds, peak_rss_mb=_peak_rss_mb())
    return result


def _run_in(tree: Path, cell: tuple, args) -> dict:
    """One cell in a fresh process, importing `memorag` from `tree`."""
    import os

    command = [sys.executable, str(tree / "benchmarks" / "memorize.py"), "--cell", ",".join(map(str, cell))]
    command += ["--embedded"] if args.embedded else []
    command += ["--threads", str(args.threads)] if args.threads else []
    env = {**os.environ, "PYTHONPATH": str(tree)}
    completed = subprocess.run(command, capture_output=True, text=True, check=False, env=env, cwd=tree)
    if completed.returncode != 0:
        print(completed.stderr[-2000:], file=sys.stderr)
        raise SystemExit(f"cell {cell} failed in {tree}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def _revision(tree: Path) -> str:
    completed = subprocess.run(["git", "-C", str(tree), "describe", "--always", "--dirty"], capture_output=True,
                               text=True, check=False)
    return completed.stdout.strip() or "unknown"


def compare(args, lengths: list[int]) -> None:
    """Memorize cells in this tree and in `args.baseline`, alternating; best of `args.repeats` each."""
    from memorag.roofline import bounds, measure_peaks, memorize_flops

    here, there = Path(__file__).resolve().parents[1], Path(args.baseline).resolve()
    peaks = {dtype: measure_peaks(dtype) for dtype in args.dtypes}
    rows = []
    for dtype in args.dtypes:
        for ratio in args.ratios:
            for length in lengths:
                cell = ("memorize", length, ratio, dtype)
                times: dict[str, list[float]] = {"before": [], "after": []}
                for _ in range(args.repeats):
                    for label, tree in (("before", there), ("after", here)):
                        times[label].append(_run_in(tree, cell, args)["seconds"])
                best = {label: min(values) for label, values in times.items()}
                bound = bounds(memorize_flops(length, 1024, ratio), peaks[dtype])["at_kernel_rates_s"]
                rows.append({"dtype": dtype, "ratio": ratio, "tokens": length, "runs": times, **best,
                             "before_over_after": best["before"] / best["after"], "after_bound_s": bound})
                print(f"{dtype} r={ratio} {length} tok: before {best['before']:.2f} s, after {best['after']:.2f} s, "
                      f"ratio {best['before'] / best['after']:.3f}", flush=True)
    print(f"\nbefore = {there} ({_revision(there)}), after = {here} ({_revision(here)})")
    for dtype, peak in peaks.items():
        print(f"{dtype}: GEMM peak {peak['gemm'] / 1e9:.0f} GFLOP/s, fused attention {peak['attention'] / 1e9:.0f} GFLOP/s")
    print("| dtype | ratio | tokens | before s | after s | before / after | after's bound s | bound / after |")
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['dtype']} | {row['ratio']} | {row['tokens']} | {row['before']:.2f} | {row['after']:.2f} | "
              f"{row['before_over_after']:.3f} | {row['after_bound_s']:.1f} | {row['after_bound_s'] / row['after']:.0%} |")
    out = Path(args.out) if args.out else Path(__file__).parent / "results" / f"memorize-compare-{platform.node()}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    from memorag.machine import cpu_model

    machine = {"host": platform.node(), "cpus": __import__("os").cpu_count(), "processor": cpu_model(),
               "before": _revision(there), "after": _revision(here), "repeats": args.repeats}
    out.write_text(json.dumps({"machine": machine, "peaks_flop_per_s": peaks, "rows": rows}, indent=2))
    print(f"\nwrote {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", type=int, nargs="+", default=[4096, 8192, 16384, 32768])
    parser.add_argument("--ratios", type=int, nargs="+", default=[4, 16])
    parser.add_argument("--dtypes", nargs="+", default=["bfloat16", "float32"])
    parser.add_argument("--plain-max", type=int, default=8192, help="longest plain forward (model positions)")
    parser.add_argument("--quick", action="store_true", help="4K and 8K only")
    parser.add_argument("--embedded", action="store_true", help="real embedded weights instead of random ones")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--out", default=None, help="JSON path (default benchmarks/results/memorize-HOST.json)")
    parser.add_argument("--baseline", help="another checkout of the project to compare memorize cells with")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each cell (the best time counts)")
    parser.add_argument("--cell", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.cell:
        mode, length, ratio, dtype = args.cell.split(",")
        print(json.dumps(run_cell(mode, int(length), int(ratio), dtype, args.embedded, args.threads)))
        return
    lengths = [n for n in args.lengths if n <= 8192] if args.quick else args.lengths
    if args.baseline:
        compare(args, lengths)
        return
    cells = []
    for dtype in args.dtypes:
        for ratio in args.ratios:
            cells += [("memorize", n, ratio, dtype) for n in lengths]
        cells += [("plain", n, 0, dtype) for n in lengths if n <= args.plain_max]
    from memorag.roofline import bounds, measure_peaks, memorize_flops

    peaks = {dtype: measure_peaks(dtype) for dtype in args.dtypes}
    results = []
    for cell in cells:
        command = [sys.executable, __file__, "--cell", ",".join(map(str, cell))]
        command += ["--embedded"] if args.embedded else []
        command += ["--threads", str(args.threads)] if args.threads else []
        completed = subprocess.run(command, capture_output=True, text=True, check=False)
        if completed.returncode != 0:
            print(completed.stderr[-2000:], file=sys.stderr)
            raise SystemExit(f"cell {cell} failed")
        row = json.loads(completed.stdout.strip().splitlines()[-1])
        if row["mode"] == "memorize":
            row["flops"] = memorize_flops(row["tokens"], 1024, row["ratio"])
            row["bound_s"] = bounds(row["flops"], peaks[row["dtype"]])["at_kernel_rates_s"]
        results.append(row)
        label = f"{row['mode']:8s} {row['dtype']:8s} r={row['ratio'] or '-':<3} {row['tokens']:>6} tok"
        print(f"{label}  {row['seconds']:7.2f} s  {row['tokens_per_s']:7.0f} tok/s  peak {row['peak_rss_mb']:6.0f} MB",
              flush=True)
    print()
    for dtype, peak in peaks.items():
        print(f"{dtype}: GEMM peak {peak['gemm'] / 1e9:.0f} GFLOP/s, fused attention {peak['attention'] / 1e9:.0f} GFLOP/s")
    print("| mode | dtype | ratio | tokens | seconds | tokens/s | bound s | bound/time | peak RSS MB | memory MB "
          "| KV bytes/token |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for row in results:
        bound = row.get("bound_s")
        bound_text = "-" if bound is None else f"{bound:.1f}"
        share = "-" if bound is None else f"{bound / row['seconds']:.0%}"
        print(f"| {row['mode']} | {row['dtype']} | {row['ratio'] or '-'} | {row['tokens']} | {row['seconds']:.2f} | "
              f"{row['tokens_per_s']:.0f} | {bound_text} | {share} | {row['peak_rss_mb']:.0f} | "
              f"{row.get('memory_mb', float('nan')):.1f} | {row['kv_bytes_per_token']:.0f} |")
    out = Path(args.out) if args.out else Path(__file__).parent / "results" / f"memorize-{platform.node()}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    import torch

    from memorag.machine import cpu_model

    machine = {"host": platform.node(), "cpus": __import__("os").cpu_count(), "processor": cpu_model(),
               "torch": torch.__version__,
               "weights": "embedded" if args.embedded else "random (SmolLM2-135M shape)"}
    out.write_text(json.dumps({"machine": machine, "peaks_flop_per_s": peaks, "results": results}, indent=2))
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
