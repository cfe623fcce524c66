"""Resident memory of one process that memorizes, asks and drops many corpora, one after another.

    python benchmarks/memory_bound.py                          # 50 corpora of 8,192 tokens (about 1 h on 2 busy cores)
    python benchmarks/memory_bound.py --corpora 8 --tokens 2048 --release   # as `memorag serve` does
    python benchmarks/memory_bound.py --tracemalloc            # also Python allocations per step (slower)

One set of models (the embedded ones) is loaded once and shared by every corpus, as
`memorag serve` does. Each step builds a new `MemoRAG` over those models, memorizes a
different stretch of KJV filler of `--tokens` tokens, asks one question (the memorag
mode: clues, retrieval, an answer; `--clue-tokens` and `--answer-tokens` bound the
generations), and drops the pipeline with `del`, as a plain Python loop would (no
explicit garbage collection; `--release` adds `memorag.runtime.memtrim.release_memory()` after
each step, as `memorag serve` does when it drops a corpus). After each step it records
the resident set (RSS, /proc/self/statm) and, with --tracemalloc, the bytes Python
itself holds. The slope is a least-squares fit of RSS over the steps after the first
two (the first steps fill caches and allocator pools once). Prints a table and writes
JSON to results/benchmarks/memory_bound.json (or --out), with the slope over the second
half of the steps (`slope_last_half_mb_per_corpus`) and the kernel cache capacities
the run had (memorag/runtime/kernel_caches.py). As the code before those caches were bounded
ran (the libraries' own capacities), for a comparison:

    ONEDNN_PRIMITIVE_CACHE_CAPACITY=1024 LRU_CACHE_CAPACITY=1024 python benchmarks/memory_bound.py
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QUESTION = "Who went up to the house of the Lord?"


def peak_rss_mb() -> float | None:
    """The process's peak resident set so far (VmHWM), in the middle of a memorize included."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return None


def slope_mb_per_step(values: list[float], skip: int = 2) -> float:
    """Least-squares slope of `values` against their index, ignoring the first `skip` (MB per step)."""
    from memorag.runtime.memtrim import slope_per_step

    return slope_per_step(values, skip)


def corpus_text(tokenizer, tokens: int, step: int) -> str:
    """About `tokens` tokens of KJV filler, a different stretch for every step."""
    from memorag.evaluation.datasets.filler import filler_text

    words = int(tokens / 1.35)
    text = filler_text(words, start_unit=step * 997)
    while len(tokenizer(text, add_special_tokens=False).input_ids) > tokens:
        text = text[: int(len(text) * 0.97)].rsplit(" ", 1)[0]
    return text


def kernel_caches_in_effect() -> dict[str, str | None]:
    """The kernel cache capacities this process runs with (`import memorag` sets them unless the
    environment does; see memorag/runtime/kernel_caches.py)."""
    from memorag.runtime.kernel_caches import KERNEL_CACHE_VARIABLES

    return {variable: os.environ.get(variable) for variable in KERNEL_CACHE_VARIABLES}


def summary(steps: list[dict], corpora: int, tokens: int, release: bool, settings: dict, baseline: float,
            started: float) -> dict:
    rss = [row["rss_mb"] for row in steps]
    return {
        "corpora": corpora, "completed": len(steps), "tokens_per_corpus": tokens, "release": release,
        "settings": settings, "kernel_caches": kernel_caches_in_effect(), "baseline_rss_mb": round(baseline, 1), "first_rss_mb": rss[0] if rss else None,
        "last_rss_mb": rss[-1] if rss else None, "max_rss_mb": max(rss, default=None), "peak_rss_mb": peak_rss_mb(),
        "slope_mb_per_corpus": round(slope_mb_per_step(rss), 2),
        "slope_last_half_mb_per_corpus": round(slope_mb_per_step(rss, skip=len(rss) // 2), 2), "steps": steps,
        "seconds": round(time.perf_counter() - started, 1),
    }


def run(corpora: int, tokens: int, release: bool, trace: bool, show_progress: bool = True,
        clue_tokens: int = 64, answer_tokens: int = 128, max_seconds: float | None = None,
        on_step=None) -> dict:
    """Memorize, ask and drop `corpora` corpora; stops early (with what it measured) after `max_seconds`.
    `on_step(partial_result)` is called after every corpus."""
    from memorag.commands.main import _quiet_libraries
    from memorag.pipeline import MemoRAG
    from memorag.runtime.memtrim import release_memory, resident_mb

    _quiet_libraries()
    if trace:
        import tracemalloc

        tracemalloc.start()
    started = time.perf_counter()
    settings = {"clue_max_new_tokens": clue_tokens, "answer_max_new_tokens": answer_tokens}
    models = MemoRAG(**settings)
    shared = {"memory_model": models.memory_model, "embedder": models.embedder,
              "embedder_name": models.embedder_name, "generator": models.generator}
    texts = [corpus_text(models.tokenizer, tokens, step) for step in range(corpora)]
    gc.collect()
    if release:
        release_memory()
    baseline = resident_mb()
    steps = []
    for step, text in enumerate(texts):
        step_started = time.perf_counter()
        rag = MemoRAG(**shared, **settings)
        rag.memorize(text, show_progress=False)
        answer = rag.ask(QUESTION)
        memory_tokens = rag.memory.num_tokens
        del rag, answer
        if release:
            release_memory()
        row = {"step": step, "rss_mb": round(resident_mb(), 1), "memory_tokens": memory_tokens,
               "seconds": round(time.perf_counter() - step_started, 2)}
        if trace:
            import tracemalloc

            row["python_mb"] = round(tracemalloc.get_traced_memory()[0] / 2**20, 1)
        steps.append(row)
        if show_progress:
            print(f"step {step + 1}/{corpora}: RSS {row['rss_mb']:.0f} MB ({row['seconds']:.1f} s)",
                  file=sys.stderr, flush=True)
        if on_step is not None:
            on_step(summary(steps, corpora, tokens, release, settings, baseline, started))
        if max_seconds is not None and time.perf_counter() - started > max_seconds and step + 1 < corpora:
            print(f"stopping after {step + 1} corpora: --max-seconds {max_seconds:.0f} reached", file=sys.stderr)
            break
    return summary(steps, corpora, tokens, release, settings, baseline, started)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpora", type=int, default=50, help="corpora memorized one after another (default 50)")
    parser.add_argument("--tokens", type=int, default=8192, help="tokens per corpus (default 8192)")
    parser.add_argument("--release", action="store_true", help="call release_memory() after each corpus")
    parser.add_argument("--clue-tokens", type=int, default=64, help="clue_max_new_tokens (default 64)")
    parser.add_argument("--answer-tokens", type=int, default=128, help="answer_max_new_tokens (default 128)")
    parser.add_argument("--tracemalloc", action="store_true", help="also record Python's own allocations")
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's own choice)")
    parser.add_argument("--max-seconds", type=float, help="stop after the corpus that passes this many seconds")
    parser.add_argument("--out", default=str(ROOT / "results" / "benchmarks" / "memory_bound.json"))
    args = parser.parse_args()
    if args.corpora < 3 or args.tokens < 64:
        parser.error("give at least 3 corpora of at least 64 tokens")
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    environment = {key: value for key, value in os.environ.items()  # as given, before `import memorag` sets any
                   if key.startswith(("MALLOC_", "ONEDNN_", "DNNL_", "OMP_", "LRU_"))}
    from memorag.benchmarking.machine import load_average, machine_record

    load_before = load_average()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)

    def write(result: dict) -> None:  # after every corpus, so a stopped run leaves what it measured
        result["machine"] = {**machine_record(load_before), "environment": environment}
        out.write_text(json.dumps(result, indent=2) + "\n")

    result = run(args.corpora, args.tokens, args.release, args.tracemalloc, clue_tokens=args.clue_tokens,
                 answer_tokens=args.answer_tokens, max_seconds=args.max_seconds, on_step=write)
    write(result)
    print("\n| corpus | RSS MB | memory tokens | seconds |")
    print("|---:|---:|---:|---:|")
    for row in result["steps"]:
        print(f"| {row['step'] + 1} | {row['rss_mb']:.0f} | {row['memory_tokens']:,} | {row['seconds']:.1f} |")
    print("\n| corpora | tokens each | release | RSS before | first | last | max | slope MB/corpus | last half |")
    print("|---:|---:|---|---:|---:|---:|---:|---:|---:|")
    print(f"| {result['completed']} of {result['corpora']} | {result['tokens_per_corpus']:,} "
          f"| {'yes' if result['release'] else 'no'} "
          f"| {result['baseline_rss_mb']:.0f} | {result['first_rss_mb']:.0f} | {result['last_rss_mb']:.0f} "
          f"| {result['max_rss_mb']:.0f} | {result['slope_mb_per_corpus']:.2f} "
          f"| {result['slope_last_half_mb_per_corpus']:.2f} |")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
