"""Training speed of the memory model beside the lower bound the device allows, on the CPU or a GPU.

    python benchmarks/train.py --quick               # a smoke: bf16, window 256, batch 1, both stages, 512 tokens
    python benchmarks/train.py                       # the grid: bf16/fp32 x window 1024/256 x batch 1/2 x both stages
    python benchmarks/train.py --dtype bf16 --windows 256 --batches 1 --tokens 2048 --steps 3
    python benchmarks/train.py --quick --profile     # also the top operators of one step (torch.profiler)
    python benchmarks/train.py --device cuda --dtype bf16 --shape qwen2-7b --windows 1024 --batches 1 \
        --tokens 16384 --stages pretrain --memory-rank 0 --steps 2 --json $OUT/train-7b.json
    git worktree add /tmp/before REV && python benchmarks/train.py --quick --baseline /tmp/before --rounds 3 \
        --json /tmp/train-vs-before.json

One training step = forward with the loss (the trainer's `objective_forward`, LM loss),
backward, gradient clipping and an AdamW step, with gradient checkpointing per window, memory
parameters in fp32, one fixed ratio (`--ratio`, default 4) so the FLOPs are exact, and the
low-rank memory projections of the CPU recipe (`--memory-rank`, 0 for the full ones).
The model is the embedded SmolLM2-135M-Instruct (`--shape embedded`, the default) or
random weights of a named shape (memorag/benchmarking/shapes.py: no download; random
token ids then stand for the text). The device options (`--device`, `--dtype`, one or
more, `--threads`) are the shared ones of memorag/benchmarking/device.py; the step runs
under autocast in bf16 or fp16. `pretrain` steps read packed text (every token a label);
`sft` steps read a clue-SFT sample (context, instruction, a target; loss on the target
only) of the same length.

The bound (`train_step_flops`, checked call by call in tests/benchmarks/test_train_bound.py)
counts the work a step must do: the forward (every raw and memory row through each layer,
attention as `memorag.benchmarking.roofline` counts it, and the logits), the backward through the
frozen base (input gradients only; weight gradients for the memory projections alone),
the backward of attention (twice its forward: dQ, dK, dV and the score gradients) and,
under checkpointing, the recomputed forward. `bounds` from `memorag.benchmarking.roofline` turns it into
seconds at this machine's measured GEMM peak and fused attention rate; tokens/s of the
bound is the most a step could do. The logits are counted for the rows that have a label
(the least a step needs; for SFT this is the target only), so a step that computes more
shows it as a lower share of the bound. MFU is the usual model-FLOPs utilization: three
times the forward FLOPs of the step (the frozen base and the memory projections, attention
and the labelled rows' logits), as if every weight were trained, per second, over the GEMM
peak measured in the same run. Peak memory is that of the timed steps (CUDA:
torch.cuda.max_memory_allocated; CPU: peak RSS).

Prints a markdown table and writes JSON (`--json`, default results/benchmarks/train.json;
`--quick` writes train-quick.json).

`--baseline DIR` compares with another checkout of the project (memorag/benchmarking/baseline.py):
this script, with the other options as given, runs in both trees, each run a fresh process with
this interpreter, alternating for `--rounds` rounds; the options must be ones the baseline's own
train.py accepts (`--quick` is the same grid in every version), except `--dtype`, which goes to a
train.py that predates it as its earlier name `--precisions`. `--json` is then the comparison
(seconds per step of each cell in every run, medians, best, before / after), each run's own
output kept beside it.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

from memorag.benchmarking.baseline import (
    AFTER,
    BEFORE,
    compare_runs,
    options_for_tree,
    run_script,
    script_help,
    without_options,
)
from memorag.benchmarking.device import BenchDevice, add_device_options, short_dtype
from memorag.benchmarking.machine import cpu_model
from memorag.benchmarking.roofline import Shape, bounds, memorize_scores
from memorag.benchmarking.shapes import SHAPES, random_base

VOCAB = 49152  # SmolLM2's vocabulary
RESULTS = Path(__file__).resolve().parents[1] / "results" / "benchmarks"
# options this script renamed, with their earlier names: a baseline checkout whose train.py predates the
# shared device options (67f4846 and before) names the precisions `--precisions`
BASELINE_RENAMED = {"--dtype": "--precisions"}


def memory_projection_widths(shape: Shape, memory_params: str = "qkv") -> list[tuple[int, int]]:
    """(in, out) of each memory projection of one layer."""
    widths = [(shape.hidden, shape.heads * shape.head_dim), (shape.hidden, shape.kv_heads * shape.head_dim),
              (shape.hidden, shape.kv_heads * shape.head_dim)]
    if memory_params == "qkvo":
        widths.append((shape.heads * shape.head_dim, shape.hidden))
    return widths


def train_step_flops(num_tokens: int, window: int, ratio: int, shape: Shape = Shape(), batch: int = 1,
                     vocab: int = VOCAB, logit_rows: int | None = None, memory_rank: int = 0,
                     memory_params: str = "qkv", checkpointing: bool = True) -> dict[str, float]:
    """FLOPs of one training step on `batch` sequences of `num_tokens` (a whole number of windows).

    Returns `linear` and `attention` (totals, for `roofline.bounds`) and the parts:
    `forward_linear`, `logits` (forward), `backward_linear` (input gradients, logits included),
    `weight_gradients`, `forward_attention`, `backward_attention`, `recompute` (linear and
    attention of the recomputed forward). `logit_rows` per sequence defaults to every raw row with
    a next token to predict (all but the last): the forward computes logits for labelled rows only.
    """
    scores, memory_rows = memorize_scores(num_tokens, window, ratio)
    rows = num_tokens + memory_rows
    widths = memory_projection_widths(shape, memory_params)
    lora = sum(2 * memory_rank * (fan_in + fan_out) for fan_in, fan_out in widths)  # per memory row and layer
    forward_linear = batch * shape.layers * (rows * shape.linear_flops_per_row() + memory_rows * lora)
    logits = batch * 2 * shape.hidden * vocab * (num_tokens - 1 if logit_rows is None else logit_rows)
    if memory_rank:
        weight_gradients = batch * shape.layers * memory_rows * lora
    else:
        weight_gradients = batch * shape.layers * memory_rows * sum(2 * i * o for i, o in widths)
    forward_attention = batch * scores * shape.layers * shape.flops_per_score()
    parts = {
        "forward_linear": float(forward_linear),
        "logits": float(logits),
        "backward_linear": float(forward_linear + logits),
        "weight_gradients": float(weight_gradients),
        "forward_attention": float(forward_attention),
        "backward_attention": float(2 * forward_attention),
        "recompute": float(forward_linear + logits + forward_attention) if checkpointing else 0.0,
    }
    recompute_linear = float(forward_linear + logits) if checkpointing else 0.0
    recompute_attention = float(forward_attention) if checkpointing else 0.0
    linear = parts["forward_linear"] + logits + parts["backward_linear"] + weight_gradients + recompute_linear
    attention = 3 * forward_attention + recompute_attention
    return {"linear": linear, "attention": attention, **parts}


# -- measuring ------------------------------------------------------------------------------------
def _text_ids(tokenizer, count: int) -> list[int]:
    text = (Path(__file__).resolve().parents[1] / "examples" / "kjv_ruth_esther_jonah.txt").read_text()
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    while len(ids) < count:
        ids = ids + ids
    return ids[:count]


def _batch(stage: str, tokenizer, tokens: int, batch: int, target_tokens: int, vocab: int):
    """(input_ids [B, N], labels [B, N]) of one micro-batch of the stage; random ids without a tokenizer."""
    import torch

    if tokenizer is None:
        ids = torch.randint(2, vocab, (1, tokens), generator=torch.Generator().manual_seed(0)).repeat(batch, 1)
    else:
        ids = torch.tensor([_text_ids(tokenizer, tokens)] * batch)
    labels = ids.clone()
    if stage == "sft":
        labels[:, : tokens - target_tokens] = -100  # context and instruction: no loss
    return ids, labels


def build(precision: str, window: int, ratio: int, memory_rank: int, shape: str = "embedded", device: str = "cpu",
          compile_windows: str | None = None):
    """The memory model as training builds it: the base in `precision` (a torch dtype name), fp32 memory
    parameters; the embedded model, or random weights of a named shape, on `device`; with `compile_windows`
    (a torch.compile mode, "default" for its default) the window's layers compiled (MemoryModel.compile_windows)."""
    import torch

    from memorag.memory import MemoryConfig, MemoryModel
    from memorag.memory.lowrank import apply_lowrank

    config = MemoryConfig(window=window, ratios=[ratio])
    if shape == "embedded":
        model = MemoryModel.from_pretrained(memory_weights="untrained", config=config,
                                            dtype=getattr(torch, precision)).to(device)
    else:
        model = MemoryModel(random_base(shape, device, precision), config)
    if memory_rank:
        apply_lowrank(model, memory_rank)
    for parameter in model.memory_parameters().values():
        parameter.data = parameter.data.float()
    model.gradient_checkpointing = True
    if compile_windows:
        model.compile_windows(mode=None if compile_windows == "default" else compile_windows)
    return model.train()


def time_steps(model, ids, labels, precision: str, steps: int, warmup: int = 1, profile: bool = False,
               device: BenchDevice | None = None) -> dict:
    """Seconds per optimizer step (median of `steps` after `warmup`; the device synchronized around each),
    and the peak memory of the timed steps."""
    import contextlib

    import torch

    from memorag.training.config import LossSection
    from memorag.training.objectives import objective_forward

    device = device or BenchDevice(str(model.device))
    ids, labels = ids.to(model.device), labels.to(model.device)
    params = list(model.memory_parameters().values())
    optimizer = torch.optim.AdamW(params, lr=1e-5)
    half = {"bf16": torch.bfloat16, "bfloat16": torch.bfloat16, "fp16": torch.float16, "float16": torch.float16}
    autocast = ((lambda: torch.autocast(model.device.type, dtype=half[precision])) if precision in half
                else contextlib.nullcontext)

    def step():
        with autocast():
            output = objective_forward(model, ids, labels, LossSection(kind="lm"), ratio_seed=0)  # the trainer's
        output.loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    warmup_times = [device.seconds(step)[0] for _ in range(warmup)]  # compiled layers compile here
    device.reset_peak_memory()
    times = [device.seconds(step)[0] for _ in range(steps)]
    result = {"seconds": sorted(times)[len(times) // 2], "all_seconds": [round(t, 3) for t in times],
              "warmup_seconds": [round(t, 3) for t in warmup_times], "peak_memory_mb": device.peak_memory_mb()}
    if profile:
        table = device.profile(step)
        print(table, flush=True)
        result["profile"] = table
    return result


def run_grid(args) -> dict:
    import torch

    if args.shape == "embedded":
        from memorag.generation.models import resolve_lm  # noqa: F401  (fails early, with the install hint, if missing)

    device = BenchDevice.from_args(args)
    peaks = {}
    rows = []
    for precision in args.dtype:
        name = short_dtype(precision)
        for window in args.windows:
            model = build(precision, window, args.ratio, args.memory_rank, args.shape, device.name,
                          args.compile_windows)
            shape = Shape.of(model.base_model.config)
            vocab = model.base_model.config.vocab_size
            peaks.setdefault(name, device.peaks(args, precision, shape, window, 4 * window))
            tokens = args.tokens - args.tokens % window
            for batch in args.batches:
                for stage in args.stages:
                    ids, labels = _batch(stage, model.tokenizer, tokens, batch, args.target_tokens, vocab)
                    labelled = int((labels[0, 1:] != -100).sum())
                    flops = train_step_flops(tokens, window, args.ratio, shape, batch, vocab,
                                             logit_rows=labelled, memory_rank=args.memory_rank)
                    limit = bounds(flops, peaks[name])
                    measured = time_steps(model, ids, labels, precision, args.steps, profile=args.profile,
                                          device=device)
                    model_flops = 3 * (flops["forward_linear"] + flops["logits"] + flops["forward_attention"])
                    row = {"stage": stage, "precision": name, "window": window, "batch": batch, "tokens": tokens,
                           "ratio": args.ratio, "memory_rank": args.memory_rank, **measured,
                           "tokens_per_s": batch * tokens / measured["seconds"],
                           "bound_tokens_per_s": batch * tokens / limit["at_kernel_rates_s"],
                           "bound_at_gemm_peak_tokens_per_s": batch * tokens / limit["at_gemm_peak_s"],
                           "share_of_bound": limit["at_kernel_rates_s"] / measured["seconds"], **limit,
                           "model_flops": model_flops,
                           "mfu": model_flops / measured["seconds"] / peaks[name]["gemm"], "flops": flops}
                    rows.append(row)
                    print(_line(row), flush=True)
            del model
    return {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": platform.processor() or platform.machine(),
            "cpu": cpu_model(), "threads": torch.get_num_threads(), "device": device.record(), "shape": args.shape,
            "peaks": peaks, "quick": args.quick,
            "settings": {k: v for k, v in vars(args).items() if k not in ("json",)}, "rows": rows}


HEADER = ("| stage | precision | window | batch | tokens | s/step | tokens/s | bound tokens/s | share of bound | MFU "
          "| peak MB |\n|---|---|---|---|---|---|---|---|---|---|---|")


def _line(row: dict) -> str:
    return (f"| {row['stage']} | {row['precision']} | {row['window']} | {row['batch']} | {row['tokens']} | "
            f"{row['seconds']:.2f} | {row['tokens_per_s']:.0f} | {row['bound_tokens_per_s']:.0f} | "
            f"{row['share_of_bound']:.0%} | {row['mfu']:.1%} | {row['peak_memory_mb']:.0f} |")


def cell_seconds(result: dict) -> dict[str, float]:
    """Seconds per step of each cell of one run's JSON (this version's or an older one's)."""
    return {f"{row['stage']} {row['precision']} w{row['window']} b{row['batch']} {row['tokens']} tok": row["seconds"]
            for row in result["rows"]}


def compare_with_baseline(args, argv: list[str]) -> dict:
    """This script in `args.baseline` and in this checkout, alternating, `args.rounds` rounds."""
    options = without_options(argv, {"--baseline": 1, "--rounds": 1, "--json": 1})
    out = Path(args.json or RESULTS / "train-vs-baseline.json")
    trees = {BEFORE: Path(args.baseline), AFTER: Path(__file__).resolve().parents[1]}

    spelled = {tree: options_for_tree(options, script_help(tree, "benchmarks/train.py"), BASELINE_RENAMED)
               for tree in trees.values()}

    def measure(tree: Path, keep: Path) -> dict[str, float]:
        return cell_seconds(run_script(tree, "benchmarks/train.py", spelled[tree], json_option="--json", keep=keep))

    return compare_runs(trees, measure, args.rounds, out, {"script": "benchmarks/train.py", "options": options,
                                                           "baseline_options": spelled[trees[BEFORE]]})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_device_options(parser, ["bf16", "fp32"], several_dtypes=True)
    parser.add_argument("--shape", default="embedded", choices=["embedded", *SHAPES],
                        help="the embedded model's real weights, or random weights of a named shape")
    parser.add_argument("--quick", action="store_true", help="bf16, window 256, batch 1, 512 tokens, 1 step")
    parser.add_argument("--windows", type=int, nargs="+", default=[1024, 256])
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--stages", nargs="+", default=["pretrain", "sft"], choices=["pretrain", "sft"])
    parser.add_argument("--tokens", type=int, default=2048, help="tokens per sequence (cut to whole windows)")
    parser.add_argument("--target-tokens", type=int, default=64, help="SFT: target tokens (the loss) per sample")
    parser.add_argument("--ratio", type=int, default=4)
    parser.add_argument("--memory-rank", type=int, default=16, help="0: the full memory projections")
    parser.add_argument("--steps", type=int, default=3, help="timed steps per cell (after one warm-up step)")
    parser.add_argument("--profile", action="store_true",
                        help="print the top operators of one step per cell (on CUDA: kernels by device time too)")
    parser.add_argument("--compile-windows", nargs="?", const="default", choices=["default", "max-autotune-no-cudagraphs"],
                        help="train through compiled layers (MemoryModel.compile_windows); the warm-up step compiles "
                             "them (its seconds: warmup_seconds)")
    parser.add_argument("--json", help="where to write the rows (default results/benchmarks/train[-quick].json)")
    parser.add_argument("--baseline", help="another checkout of the project to compare with, alternating")
    parser.add_argument("--rounds", type=int, default=3, help="with --baseline: runs in each tree")
    args = parser.parse_args(argv)
    if args.baseline:
        compare_with_baseline(args, sys.argv[1:] if argv is None else argv)
        return 0
    if args.quick:
        args.dtype, args.windows, args.batches, args.tokens, args.steps = ["bfloat16"], [256], [1], 512, 1
    print(HEADER, flush=True)
    result = run_grid(args)
    out = Path(args.json or RESULTS / ("train-quick.json" if args.quick else "train.json"))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
