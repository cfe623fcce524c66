"""Time per decoded token over a memory of N tokens: the memory model beside transformers' own decoding.

    python benchmarks/decode.py --device cpu --dtype bf16 --shape smollm2-135m --memory-tokens 4096
    python benchmarks/decode.py --device cuda --dtype bf16 --shape qwen2-7b --memory-tokens 32768 --json $OUT/decode-7b.json
    python benchmarks/decode.py --device cpu --dtype fp32 --shape tiny --memory-tokens 256 --window 64 --new-tokens 8

One base with random weights of the named shape (memorag.benchmarking.shapes), one run:
1. the memory model memorizes N random tokens (window `--window`, ratio `--ratio`) and
   decodes `--new-tokens` greedy tokens after a prompt of `--prompt-tokens`;
2. transformers' `generate` on the same base, over a prompt as long as the memory's
   entries plus the same prompt, with its static cache and with its dynamic cache;
3. the memory model decoding three prompts as one batch over the memory (the clue
   stage writes its three clue kinds so; random prompts of 0, 8 and 16 tokens more);
4. the memory model decoding `--shared-prompts` prompts (default 24) as one round with shared
   matrix products (`exact=False`), as RLGF's pair builder samples a question's clue sets
   (8 sets of 3 clue kinds in the 7B configs);
5. with `--compile`, one prompt and then the three as one batch through the compiled
   step (the batch with shared matrix products, `exact=False`: memory/decoding.py),
   each compiled by an untimed decode first.
`--variants` picks the rows after the first (`static dynamic batch shared compiled
compiled-batch`, all by default), e.g. `--compile reduce-overhead --variants compiled-batch` for
the compiled batch alone.

Every decoding is forced to its full length (`min_new_tokens`); a step's time is between
two device synchronizations (memorag/benchmarking/clock.py); the first `--warmup-steps`
steps after prefill are left out. The bound of a step is every weight and every cached key
and value read once at the device's measured copy rate (`memorag.benchmarking.roofline.decode_bound_s`);
the GEMM and attention peaks are measured in the same run and recorded beside it. Peak
memory is per decoding (torch.cuda.max_memory_allocated on CUDA, peak RSS on the CPU).
Prints a markdown table and writes JSON (`--json`, default results/benchmarks/decode-HOST.json).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

from memorag.benchmarking.clock import TokenClock
from memorag.benchmarking.device import BenchDevice, add_device_options, short_dtype
from memorag.benchmarking.machine import load_average, machine_record
from memorag.benchmarking.roofline import Shape, decode_bound_s
from memorag.benchmarking.shapes import SHAPES, random_base

RESULTS = Path(__file__).resolve().parents[1] / "results" / "benchmarks"


def _random_ids(count: int, vocab: int, seed: int) -> list[int]:
    import torch

    generator = torch.Generator().manual_seed(seed)
    return torch.randint(2, vocab, (count,), generator=generator).tolist()


def _weight_bytes(base) -> int:
    """Bytes of the weights one step reads: all but the input embedding table (one row of it is read),
    unless the output head shares it."""
    total = sum(p.numel() * p.element_size() for p in base.parameters())
    embedding = base.get_input_embeddings().weight
    if embedding is not base.get_output_embeddings().weight:
        total -= embedding.numel() * embedding.element_size()
    return total


def _kv_bytes_per_token(shape: Shape, element_size: int) -> int:
    return 2 * shape.layers * shape.kv_heads * shape.head_dim * element_size


def run(args: argparse.Namespace) -> dict:
    import torch
    from transformers import GenerationConfig

    from memorag.memory import MemoryConfig, MemoryModel

    load_before = load_average()
    device = BenchDevice.from_args(args)
    base = random_base(args.shape, device.name, args.dtype)
    shape = Shape.of(base.config)
    vocab = base.config.vocab_size
    model = MemoryModel(base, MemoryConfig(window=args.window, ratios=[args.ratio])).eval()
    steps = 1 + args.warmup_steps + args.new_tokens  # the first token comes with the prefill
    element = torch.finfo(getattr(torch, args.dtype)).bits // 8
    kv_per_token = _kv_bytes_per_token(shape, element)
    weights = _weight_bytes(base)

    memorize_s, memory = device.seconds(lambda: model.memorize(_random_ids(args.memory_tokens, vocab, 0),
                                                               show_progress=False))
    peaks = device.peaks(args, args.dtype, shape, args.window, memory.num_entries)
    prompt = _random_ids(args.prompt_tokens, vocab, 1)
    rows = []

    def measure(variant: str, decode, sequences: int, cache_bytes: float) -> None:
        device.reset_peak_memory()
        clock = TokenClock(device)
        decode(clock)
        row = {"variant": variant, "sequences": sequences, **clock.summary(args.warmup_steps, sequences),
               "peak_memory_mb": device.peak_memory_mb()}
        bound = decode_bound_s(weights, cache_bytes, peaks)
        row.update(bound_ms_per_step=1e3 * bound, share_of_bound=bound / (row["ms_per_step"] / 1e3))
        rows.append(row)
        print(_line(row), flush=True)

    print(HEADER, flush=True)
    wanted = set(args.variants)
    with torch.no_grad():
        window_bytes = (args.prompt_tokens + args.warmup_steps) * kv_per_token
        measure("memory model", lambda clock: model.generate_ids(
            prompt, memory, max_new_tokens=steps, min_new_tokens=steps, streamer=clock), 1,
            memory.nbytes + window_bytes)
        long_prompt = _random_ids(memory.num_entries, vocab, 2) + prompt
        ids = torch.tensor([long_prompt], device=device.torch_device)
        for cache in [cache for cache in ("static", "dynamic") if cache in wanted]:
            config = GenerationConfig(max_new_tokens=steps, min_new_tokens=steps, do_sample=False,
                                      cache_implementation=cache, eos_token_id=base.config.eos_token_id,
                                      pad_token_id=base.config.eos_token_id)
            measure(f"transformers {cache} cache", lambda clock, config=config: base.generate(
                input_ids=ids, attention_mask=torch.ones_like(ids), generation_config=config, streamer=clock),
                1, (len(long_prompt) + args.warmup_steps) * kv_per_token)
        prompts = [prompt + _random_ids(extra, vocab, 3 + extra) for extra in (0, 8, 16)]
        if "batch" in wanted:
            measure("memory model, 3 prompts as one batch", lambda clock: model.generate_ids_batch(
                prompts, memory, max_new_tokens=steps, min_new_tokens=steps, streamer=clock), len(prompts),
                len(prompts) * (memory.nbytes + window_bytes))
        if "shared" in wanted:
            shared = [prompt + _random_ids(8 * (index % 3), vocab, 100 + index) for index in range(args.shared_prompts)]
            measure(f"memory model, {len(shared)} prompts as one shared round", lambda clock: model.generate_ids_batch(
                shared, memory, max_new_tokens=steps, min_new_tokens=steps, streamer=clock, exact=False),
                len(shared), len(shared) * (memory.nbytes + window_bytes))
        if args.compile is not None and "compiled" in wanted:
            compile_s = _compile(model, device, args.compile, prompt, memory, steps)
            measure(f"memory model, compiled step ({args.compile})", lambda clock: model.generate_ids(
                prompt, memory, max_new_tokens=steps, min_new_tokens=steps, streamer=clock), 1,
                memory.nbytes + window_bytes)
            rows[-1]["compile_s"] = compile_s
        if args.compile is not None and "compiled-batch" in wanted:
            # the three prompts as one batch through the compiled step (memory/decoding.py: shared products)
            if not model.decoding_compiled:
                model.compile_decoding(mode=None if args.compile == "default" else args.compile)
            batch_compile_s, _ = device.seconds(lambda: model.generate_ids_batch(
                prompts, memory, max_new_tokens=steps, min_new_tokens=steps, exact=False))
            measure(f"memory model, compiled step ({args.compile}), 3 prompts as one batch",
                    lambda clock: model.generate_ids_batch(prompts, memory, max_new_tokens=steps, min_new_tokens=steps,
                                                           streamer=clock, exact=False),
                    len(prompts), len(prompts) * (memory.nbytes + window_bytes))
            rows[-1]["compile_s"] = batch_compile_s
    by_variant = {row["variant"]: row for row in rows}
    compiled = [row for row in rows if row["variant"] == f"memory model, compiled step ({args.compile})"]
    ours = by_variant["memory model"]["ms_per_step"]

    def ours_over(variant: str) -> float | None:
        return ours / by_variant[variant]["ms_per_step"] if variant in by_variant else None

    result = {
        "benchmark": "decode",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "shape": args.shape, "dtype": short_dtype(args.dtype), "weights": "random",
        "settings": {"memory_tokens": args.memory_tokens, "window": args.window, "ratio": args.ratio,
                     "prompt_tokens": args.prompt_tokens, "new_tokens": args.new_tokens,
                     "warmup_steps": args.warmup_steps, "shared_prompts": args.shared_prompts},
        "memory_entries": memory.num_entries, "memory_mb": memory.nbytes / 2**20, "memorize_s": memorize_s,
        "baseline_prompt_tokens": memory.num_entries + args.prompt_tokens,
        "weight_bytes": weights, "peaks": peaks,
        "variants": args.variants,
        "memory_over_static": ours_over("transformers static cache"),
        "memory_over_dynamic": ours_over("transformers dynamic cache"),
        "compiled_over_eager": compiled[0]["ms_per_step"] / ours if compiled else None,
        "rows": rows, "device": device.record(), "machine": machine_record(load_before),
    }
    static = result["memory_over_static"]
    print(f"\nmemory model / transformers static cache: {'-' if static is None else f'{static:.2f}x'} per token; "
          f"peaks: GEMM {peaks['gemm'] / 1e9:,.0f} GFLOP/s, attention {peaks['attention'] / 1e9:,.0f} GFLOP/s, "
          f"copy {peaks['copy_bytes_per_s'] / 1e9:.1f} GB/s")
    if compiled:
        print(f"compiled step / eager step: {result['compiled_over_eager']:.2f}x per token "
              f"(compiling took {compiled[0]['compile_s']:.1f} s, before the timed decode)")
    return result


def _compile(model, device: BenchDevice, mode: str, prompt: list[int], memory, steps: int) -> float:
    """Switch `model` to the compiled decoding step and compile it by one decode of the timed length
    (the same buffer capacity, so the timed decode only replays); the seconds that took."""
    model.compile_decoding(mode=None if mode == "default" else mode)
    seconds, _ = device.seconds(lambda: model.generate_ids(prompt, memory, max_new_tokens=steps,
                                                           min_new_tokens=steps))
    return seconds


VARIANTS = ("static", "dynamic", "batch", "shared", "compiled", "compiled-batch")  # the rows after the memory model's own

HEADER = ("| decoding | ms/step | median ms/step | tokens/s | bound ms/step | share of bound | prefill s | "
          "peak MB |\n|---|---|---|---|---|---|---|---|")


def _line(row: dict) -> str:
    return (f"| {row['variant']} | {row['ms_per_step']:.2f} | {row['median_ms_per_step']:.2f} | "
            f"{row['tokens_per_s']:.1f} | {row['bound_ms_per_step']:.3f} | {row['share_of_bound']:.1%} | "
            f"{row['prefill_s']:.2f} | {row['peak_memory_mb']:.0f} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_device_options(parser)
    parser.add_argument("--shape", default="smollm2-135m", choices=list(SHAPES))
    parser.add_argument("--memory-tokens", type=int, default=8192, help="tokens memorized (N)")
    parser.add_argument("--window", type=int, default=1024)
    parser.add_argument("--ratio", type=int, default=4)
    parser.add_argument("--prompt-tokens", type=int, default=40)
    parser.add_argument("--new-tokens", type=int, default=32, help="timed decoding steps")
    parser.add_argument("--warmup-steps", type=int, default=4, help="steps after prefill left out of the timing")
    parser.add_argument("--shared-prompts", type=int, default=24,
                        help="prompts of the shared round (default 24: RLGF's 8 clue sets of 3 kinds)")
    parser.add_argument("--compile", choices=["default", "reduce-overhead", "max-autotune"],
                        help="also decode through the compiled step (MemoryModel.compile_decoding) in this "
                             "torch.compile mode; compiling is timed apart (reduce-overhead: CUDA graphs)")
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS),
                        help="which decodings to time beside the memory model's eager one (default: all; "
                             "the compiled ones need --compile)")
    parser.add_argument("--json", help="where to write the result (default results/benchmarks/decode-HOST.json)")
    args = parser.parse_args(argv)
    result = run(args)
    out = Path(args.json or RESULTS / f"decode-{platform.node()}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
