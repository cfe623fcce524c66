"""Each CPU speed-up of the memory model against its removal, in one process, alternating: the
"speed-ups on probation" measurement of the memory core as it stood before its reshaping.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/results/probation-2026-11-28/ab.py
    PYTHONPATH=$PWD .venv/bin/python benchmarks/results/probation-2026-11-28/ab.py --only stacked,inference_mode
    PYTHONPATH=$PWD .venv/bin/python benchmarks/results/probation-2026-11-28/ab.py --rounds 1 \\
        --context-chars 3000 --memorize-chars 3000 --new-tokens 4 --out /tmp/ab-dry   # a dry run

Loads the embedded memory model (`MemoryModel.from_pretrained()`: SmolLM2-135M-Instruct with its
shipped memory weights, offline; float32 on a CPU through dtype "auto") and memorizes the first
`--context-chars` characters of the demo's text once: the memory every decoding workload reads.
Each speed-up is switched off from the outside, by patching the library's modules while side B
runs (nothing in the package changes):

- fixed_rows: `MemoryLinear`'s fixed-shape few-row products (memory/linear.py), off inside
  `plain_linears()`; an exact batch then rounds each sequence alone with a product per sequence.
- stacked: `StackedStep` over `stacked_caches` (memory/buffer_step.py, memory/shared_buffers.py),
  off by a `stacked_caches` in memory/decoding.py that returns None (each prompt its own cache).
- split_attention: `_split_attention` (memory/attention.py), replaced by what `attend` computes
  without it: one SDPA call over the full boolean mask (`_full_mask`), grouped heads by enable_gqa.
- folded_attention: `_folded_attention` (memory/attention.py), replaced by one SDPA call with the
  bias (if any) as an additive mask, as `attend_bucket` does off the CPU.
- inference_mode: `decode` (memory/decoding.py) under `torch.no_grad()` instead of
  `torch.inference_mode()` (its `__wrapped__`, decorated again).
- window_tables: the lru-cached per-piece tables of memory/window_tables.py replaced by their
  uncached functions (`__wrapped__`).

Workloads (each speed-up times the ones it targets):
- clue_batch: the demo's clue stage, the three clue prompts for the demo's question decoded as one
  exact batch over the memory, `--new-tokens` each (forced by min_new_tokens, so that both sides
  decode the same number of rounds whatever their replies).
- single_decode: the draft prompt alone, `--new-tokens` forced.
- prefill: the three clue prompts' prefill over the memory (one new token), `--prefill-repeats`
  times per timed run.
- memorize: `memorize` of the first `--memorize-chars` characters of the demo's text.

For each speed-up: one untimed run of each workload per side first (the warm-up), with probes that
count whether the patched path is taken (A) and left (B), and whose outputs are compared (A's
against B's: bit for bit, or the largest difference); then `--rounds` rounds, A then B in even
rounds, B then A in odd ones, each workload's two sides back to back. The host is shared: each pair
starts once other processes use under `--quiet-cores` cores (waiting at most `--max-wait` s), and a
pair during which they used more is run again (`--tries` in all; the summary takes each round's last).
Every timed run is a JSON line of raw.jsonl (speed-up, side, round, workload, seconds, the cores
other processes kept busy meanwhile, the machine with the load averages before and after that
run); the checks go to checks.json; a summary table is printed. A record of
one measurement, kept beside its output: it patches the memory core of main deb0415 by its names
and is not expected to run against a reshaped core.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from memorag.cli import _quiet_libraries
from memorag.machine import load_average, machine_record
from memorag.memory import MemoryModel, attention, buffer_step, decoding, linear, window_tables
from memorag.modes.memorag import MemoRAGMode, clue_requests
from memorag.pipeline.types import PipelineConfig

HERE = Path(__file__).resolve().parent
TEXT = HERE.parents[2] / "examples" / "kjv_ruth_esther_jonah.txt"
QUESTION = "Which city was Jonah sent to?"  # the demo's default question
THRESHOLD = 1.10  # the project's rule: a speed-up stays if removing it costs at least 10% on its target work
TABLES = ("_row_split", "_piece_mask", "_compaction_rows")
TICKS = os.sysconf("SC_CLK_TCK")


# -- the switches -------------------------------------------------------------------------------------------
@contextmanager
def patched(owner: Any, name: str, value: Any) -> Iterator[None]:
    """`owner.name` set to `value` inside (a module's or a class's own attribute), restored after."""
    before = vars(owner)[name]
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, before)


def one_sdpa_call(query, key, value, prefix: int, mask, scale: float) -> torch.Tensor:
    """`_split_attention`'s result as `attend` computes it without it: one SDPA call over the boolean
    mask of every prefix key and the tail's mask (None: causal aligned to the last key). [B, Tq, H, d]."""
    num_queries, tail = query.shape[2], key.shape[2] - prefix
    full = attention._full_mask(num_queries, prefix, tail, mask, query.device)  # [Tq, S]
    out = F.scaled_dot_product_attention(query, key, value, attn_mask=full, scale=scale,
                                         enable_gqa=query.shape[1] != key.shape[1])
    return out.transpose(1, 2)


def sdpa_rows(query, key, value, scale: float, bias: torch.Tensor | None = None) -> torch.Tensor:
    """`_folded_attention`'s result by one SDPA call: `query` [B, H, Tq, d] over `key`/`value`
    [B, H_kv, S, d], `bias` [Tq, S] or [B, Tq, S] added to the scores (None: every key seen). [B, Tq, H, d]."""
    if bias is not None and bias.dim() == 3:
        bias = bias[:, None]  # [B, 1, Tq, S]: every head of a sequence
    out = F.scaled_dot_product_attention(query, key, value, attn_mask=bias, scale=scale,
                                         enable_gqa=query.shape[1] != key.shape[1])
    return out.transpose(1, 2)


def _no_stacked_caches(*args, **kwargs) -> None:
    return None


def removed(name: str) -> ExitStack:
    """A context in which speed-up `name` is switched off."""
    stack = ExitStack()
    if name == "fixed_rows":
        stack.enter_context(linear.plain_linears())
    elif name == "stacked":
        stack.enter_context(patched(decoding, "stacked_caches", _no_stacked_caches))
    elif name == "split_attention":
        stack.enter_context(patched(attention, "_split_attention", one_sdpa_call))
    elif name == "folded_attention":
        stack.enter_context(patched(attention, "_folded_attention", sdpa_rows))
    elif name == "inference_mode":
        stack.enter_context(patched(decoding, "decode", torch.no_grad()(decoding.decode.__wrapped__)))
    elif name == "window_tables":
        for table in TABLES:
            stack.enter_context(patched(window_tables, table, getattr(window_tables, table).__wrapped__))
    else:
        raise ValueError(f"no speed-up named {name!r}")
    return stack


SPEEDUPS: dict[str, tuple[str, ...]] = {  # each speed-up's target work, in the order timed
    "fixed_rows": ("clue_batch", "single_decode"),
    "stacked": ("clue_batch",),
    "split_attention": ("memorize", "prefill"),
    "folded_attention": ("clue_batch", "single_decode"),
    "inference_mode": ("clue_batch",),
    "window_tables": ("memorize", "clue_batch"),
}


# -- probes: is the path taken in A and left in B? ----------------------------------------------------------
@contextmanager
def counted(owner: Any, name: str, counts: dict[str, int]) -> Iterator[None]:
    """Count the calls of `owner.name` (whatever it is at the time) and its results that are not None."""
    inner = getattr(owner, name)
    label = f"{name} as {getattr(inner, '__name__', type(inner).__name__)}"

    def counting(*args, **kwargs):
        result = inner(*args, **kwargs)
        counts[f"{label}: calls"] = counts.get(f"{label}: calls", 0) + 1
        if result is None:
            counts[f"{label}: returned None"] = counts.get(f"{label}: returned None", 0) + 1
        return result

    with patched(owner, name, counting):
        yield


@contextmanager
def probe(name: str, model: MemoryModel, counts: dict[str, int]) -> Iterator[None]:
    """Inside: `counts` records whether speed-up `name`'s path runs."""
    with ExitStack() as stack:
        if name == "fixed_rows":
            stack.enter_context(counted(linear, "fixed_rows_product", counts))
        elif name == "stacked":
            stack.enter_context(counted(buffer_step.StackedStep, "of", counts))
        elif name == "split_attention":
            stack.enter_context(counted(attention, "_split_attention", counts))
        elif name == "folded_attention":
            stack.enter_context(counted(attention, "_folded_attention", counts))
        elif name == "inference_mode":
            step = model.step

            def recording_step(*args, **kwargs):
                key = "steps under inference mode" if torch.is_inference_mode_enabled() else "steps outside it"
                counts[key] = counts.get(key, 0) + 1
                return step(*args, **kwargs)

            model.step = recording_step  # an instance attribute over the class's method, deleted below
            stack.callback(lambda: delattr(model, "step"))
        elif name == "window_tables":
            tables = {table: getattr(window_tables, table) for table in TABLES}  # lru-cached in A, plain in B
            before = {table: tables[table].cache_info().misses for table in TABLES if hasattr(tables[table], "cache_info")}
            for table in TABLES:
                stack.enter_context(counted(window_tables, table, counts))
            stack.callback(lambda: counts.update({f"{table}: lru misses": tables[table].cache_info().misses - misses
                                                  for table, misses in before.items()}))
        yield


# -- checks ----------------------------------------------------------------------------------------------
def replacement_agreement() -> dict[str, float]:
    """The largest difference between each attention kernel and its SDPA replacement on small random
    inputs of the embedded model's grouping (9 query heads over 3 key/value heads); raises where they
    do not agree to float32 rounding."""
    generator = torch.Generator().manual_seed(0)
    rand = lambda *shape: torch.randn(*shape, generator=generator)
    scale = 64 ** -0.5
    found = {}
    for tail_mask in (None, attention.causal_end_mask(5, 9, torch.device("cpu"))):  # causal, and an explicit mask
        query, key, value = rand(2, 9, 5, 64), rand(2, 3, 20, 64), rand(2, 3, 20, 64)  # prefix 11, tail 9
        if tail_mask is not None:  # a window's mask: some of the causal keys hidden (the prefix is always seen)
            tail_mask = tail_mask & (rand(5, 9) > -0.5)
        split = attention._split_attention(query, key, value, 11, tail_mask, scale)
        found[f"split vs one SDPA, mask {'given' if tail_mask is not None else 'causal'}"] = _agree(
            split, one_sdpa_call(query, key, value, 11, tail_mask, scale))
    for rows in (1, 2):
        query, key, value = rand(3, 9, rows, 64), rand(3, 3, 16, 64), rand(3, 3, 16, 64)
        bias2 = torch.zeros(rows, 16).masked_fill_(rand(rows, 16) > 0.8, float("-inf"))
        bias3 = torch.zeros(3, rows, 16).masked_fill_(rand(3, rows, 16) > 0.8, float("-inf"))
        bias2[:, 0] = bias3[:, :, 0] = 0.0  # every row sees a key
        for label, bias in (("no bias", None), ("bias [Tq, S]", bias2), ("bias [B, Tq, S]", bias3)):
            found[f"folded vs SDPA, {rows} row(s), {label}"] = _agree(
                attention._folded_attention(query, key, value, scale, bias), sdpa_rows(query, key, value, scale, bias))
    return found


def _agree(ours: torch.Tensor, theirs: torch.Tensor) -> float:
    if ours.shape != theirs.shape or not torch.allclose(ours, theirs, rtol=1e-5, atol=1e-5):
        raise SystemExit(f"a replacement kernel disagrees: shapes {tuple(ours.shape)} {tuple(theirs.shape)}, "
                         f"largest difference {(ours - theirs).abs().max().item():.3g}")
    return (ours - theirs).abs().max().item()


def compare(a: Any, b: Any) -> dict[str, Any]:
    """Whether two workloads' outputs are equal: token ids exactly; a memory's tensors bit for bit, else
    the largest difference."""
    if isinstance(a, list):
        rows_a, rows_b = (a, b) if a and isinstance(a[0], list) else ([a], [b])
        first = [next((i for i, (x, y) in enumerate(zip(ra, rb)) if x != y), None if len(ra) == len(rb)
                      else min(len(ra), len(rb))) for ra, rb in zip(rows_a, rows_b)]
        return {"equal": a == b, "first_differing_token_per_reply": first}
    tensors = list(zip([*a.keys, *a.values], [*b.keys, *b.values]))
    equal = all(torch.equal(x, y) for x, y in tensors) and a.state == b.state
    diff = max((x - y).abs().max().item() for x, y in tensors)
    return {"equal": equal, "max_abs_diff": diff,
            "max_abs": max(x.abs().max().item() for x, _ in tensors)}


# -- the machine ---------------------------------------------------------------------------------------------
def machine(model: MemoryModel) -> dict[str, Any]:
    flags = set()
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            flags.update(word for word in line.split(":", 1)[1].split() if word.startswith(("avx512", "amx")))
            break
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    model_name = next((line.split(":", 1)[1].strip() for line in lscpu.splitlines()
                       if line.startswith("Model name")), platform.processor())
    return {"lscpu_model_name": model_name, "avx512_amx_flags": sorted(flags),
            "cpu_capability": torch.backends.cpu.get_cpu_capability(), "model_dtype": str(model.dtype)}


# -- the other processes' load -------------------------------------------------------------------------------
def _cpu_ticks() -> tuple[int, int]:
    """(busy ticks of the whole machine, ticks of this process, all its threads) so far."""
    fields = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    busy = sum(fields) - fields[3] - fields[4]  # all but idle and iowait
    own = Path("/proc/self/stat").read_text()
    utime, stime = own[own.rfind(")") + 2 :].split()[11:13]
    return busy, int(utime) + int(stime)


class ForeignLoad:
    """The cores other processes kept busy since it was made (from /proc: the machine's busy time less
    this process's own)."""

    def __init__(self) -> None:
        self.started, (self.busy, self.own) = time.perf_counter(), _cpu_ticks()

    def cores(self) -> float:
        busy, own = _cpu_ticks()
        seconds = max(time.perf_counter() - self.started, 1e-3)
        return max((busy - self.busy) - (own - self.own), 0) / TICKS / seconds


def wait_for_quiet(threshold: float, limit_s: float) -> tuple[float, float]:
    """Wait (1 s samples) until other processes use less than `threshold` cores, at most `limit_s`;
    (seconds waited, the last sample's cores)."""
    started = time.perf_counter()
    while True:
        sample = ForeignLoad()
        time.sleep(1.0)
        cores = sample.cores()
        waited = time.perf_counter() - started
        if cores < threshold or waited >= limit_s:
            return waited, cores


# -- the workloads -------------------------------------------------------------------------------------------
def workloads(model: MemoryModel, memory, args) -> dict[str, Callable[[], Any]]:
    settings = MemoRAGMode.settings_of(PipelineConfig())
    requests = clue_requests(settings, QUESTION, "memorag", "en")
    prompts = [prompt for prompt, _ in requests.values()]
    forced = {"max_new_tokens": args.new_tokens, "min_new_tokens": args.new_tokens}
    memorize_text = TEXT.read_text(encoding="utf-8")[: args.memorize_chars]

    def prefill():
        for _ in range(args.prefill_repeats):
            out = model.generate_ids_batch(prompts, memory, max_new_tokens=1, exact=True)
        return out

    return {
        "clue_batch": lambda: model.generate_ids_batch(prompts, memory, exact=True, **forced),
        "single_decode": lambda: model.generate_ids(requests["draft"][0], memory, **forced),
        "prefill": prefill,
        "memorize": lambda: model.memorize(memorize_text, show_progress=False),
    }


def timed(run: Callable[[], Any]) -> tuple[float, Any, float]:
    """(seconds, output, cores other processes kept busy meanwhile)."""
    foreign = ForeignLoad()
    started = time.perf_counter()
    out = run()
    return time.perf_counter() - started, out, foreign.cores()


def measure(name: str, model: MemoryModel, work: dict[str, Callable[[], Any]], args,
            fixed: dict[str, Any], raw) -> dict[str, Any]:
    """Speed-up `name`: the probed warm-up of each side, then `rounds` alternating rounds (each a JSON line)."""
    sides = {"A": ExitStack, "B": lambda: removed(name)}
    outputs: dict[str, dict[str, Any]] = {"A": {}, "B": {}}
    probes: dict[str, dict[str, dict[str, int]]] = {"A": {}, "B": {}}
    for side, switch in sides.items():
        for workload in SPEEDUPS[name]:
            counts: dict[str, int] = {}
            with switch(), probe(name, model, counts):
                seconds, outputs[side][workload], foreign = timed(work[workload])
            probes[side][workload] = counts
            print(f"{name} warm-up {side} {workload}: {seconds:.2f} s (others {foreign:.2f} cores) {counts}", flush=True)
    for index in range(args.rounds):
        order = ("A", "B") if index % 2 == 0 else ("B", "A")
        for workload in SPEEDUPS[name]:
            for attempt in range(1, args.tries + 1):  # a pair that other processes disturbed is run again
                waited, _ = wait_for_quiet(args.quiet_cores, args.max_wait)  # each pair starts on a quiet machine
                quiet = True
                for side in order:
                    before = load_average()
                    with sides[side]():
                        seconds, _, foreign = timed(work[workload])
                    quiet = quiet and foreign < args.quiet_cores
                    record = {"speedup": name, "side": side, "round": index, "attempt": attempt, "workload": workload,
                              "seconds": seconds, "other_processes_cores": foreign,
                              "waited_for_quiet_s": waited if side == order[0] else 0.0,
                              **fixed, "machine": {**machine_record(before), **fixed["machine"]}}
                    raw.write(json.dumps(record) + "\n")
                    raw.flush()
                    print(f"{name} round {index} try {attempt} {workload} {side}: {seconds:.2f} s (others "
                          f"{foreign:.2f} cores, load {before[0]}, waited {waited:.0f} s)", flush=True)
                if quiet:
                    break
    return {"probes": probes, "outputs_equal": {workload: compare(outputs["A"][workload], outputs["B"][workload])
                                                for workload in SPEEDUPS[name]}}


# -- the summary ---------------------------------------------------------------------------------------------
def summary(records: list[dict[str, Any]], quiet_cores: float, quiet_only: bool = False) -> list[dict[str, Any]]:
    """Per speed-up and workload, over each round's last try (a round: its `run` and number): medians and spreads
    of each side, the ratio of the medians, the round-by-round ratios B/A, and those of the quiet rounds (both
    runs with other processes under `quiet_cores` cores). `quiet_only`: every figure over the quiet rounds."""
    rows = []
    for name, targets in SPEEDUPS.items():
        for workload in targets:
            runs = {side: {(r.get("run", 0), r["round"]): r for r in sorted(records, key=lambda r: r["attempt"])
                           if (r["speedup"], r["workload"], r["side"]) == (name, workload, side)} for side in "AB"}
            pairs = [(runs["A"][key], runs["B"][key]) for key in runs["A"] if key in runs["B"]]
            quiet_pairs = [(ra, rb) for ra, rb in pairs
                           if max(ra["other_processes_cores"], rb["other_processes_cores"]) < quiet_cores]
            if quiet_only:
                pairs = quiet_pairs
            if not pairs:
                continue
            a, b = [ra["seconds"] for ra, _ in pairs], [rb["seconds"] for _, rb in pairs]
            paired = [rb["seconds"] / ra["seconds"] for ra, rb in pairs]
            quiet = [rb["seconds"] / ra["seconds"] for ra, rb in quiet_pairs]
            rows.append({"speedup": name, "workload": workload, "rounds": len(a),
                         "median_a": statistics.median(a), "median_b": statistics.median(b),
                         "ratio": statistics.median(b) / statistics.median(a),
                         "min_a": min(a), "max_a": max(a), "min_b": min(b), "max_b": max(b),
                         "paired_min": min(paired), "paired_median": statistics.median(paired),
                         "paired_max": max(paired), "quiet_pairs": len(quiet),
                         "quiet_paired_median": statistics.median(quiet) if quiet else None})
    return rows


def summarize(files: list[Path], quiet_cores: float) -> int:
    """The summary of finished runs' raw.jsonl files, pooled, over their quiet rounds only."""
    records = []
    for run, file in enumerate(files):
        records += [{**json.loads(line), "run": run} for line in file.read_text(encoding="utf-8").splitlines()]
    rows = summary(records, quiet_cores, quiet_only=True)
    print(f"quiet rounds only (other processes under {quiet_cores} cores in both runs of a pair), pooled over "
          f"{', '.join(str(file) for file in files)}\n\n{table(rows)}\n")
    for name, verdict in verdicts(rows).items():
        print(f"{name}: {verdict}")
    return 0


def verdicts(rows: list[dict[str, Any]]) -> dict[str, str]:
    """Per speed-up: keep when removing it costs >= 10% (median B / median A) on any of its target work;
    "uncertain" where the round-by-round ratios of the deciding work straddle the threshold."""
    found = {}
    for name in dict.fromkeys(row["speedup"] for row in rows):
        mine = [row for row in rows if row["speedup"] == name]
        best = max(mine, key=lambda row: row["ratio"])
        verdict = "keep" if best["ratio"] >= THRESHOLD else "remove"
        if best["paired_min"] < THRESHOLD <= best["paired_max"]:
            verdict += " (uncertain: round-by-round ratios straddle 1.10)"
        found[name] = f"{verdict}, by {best['workload']}"
    return found


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| speed-up | target work | rounds | median A s | median B s | B/A | A min-max s | B min-max s "
             "| B/A per round min / median / max | quiet rounds: n, median B/A |",
             "|---|---|---:|---:|---:|---:|---|---|---|---|"]
    for row in rows:
        lines.append(f"| {row['speedup']} | {row['workload']} | {row['rounds']} | {row['median_a']:.2f} | "
                     f"{row['median_b']:.2f} | {row['ratio']:.3f} | {row['min_a']:.2f}-{row['max_a']:.2f} | "
                     f"{row['min_b']:.2f}-{row['max_b']:.2f} | {row['paired_min']:.3f} / "
                     f"{row['paired_median']:.3f} / {row['paired_max']:.3f} | {row['quiet_pairs']}, "
                     + (f"{row['quiet_paired_median']:.3f} |" if row["quiet_pairs"] else "- |"))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="speed-ups: " + ", ".join(SPEEDUPS))
    parser.add_argument("--rounds", type=int, default=6, help="timed rounds per side and workload (default 6)")
    parser.add_argument("--only", default=",".join(SPEEDUPS),
                        help="comma-separated speed-ups to measure (default: all, in the order listed below)")
    parser.add_argument("--context-chars", type=int, default=16000,
                        help="characters of the demo's text memorized for the decoding workloads (default 16000, "
                             "about 4.1K tokens)")
    parser.add_argument("--memorize-chars", type=int, default=16000,
                        help="characters of the demo's text the memorize workload reads (default 16000, "
                             "about 4.1K tokens)")
    parser.add_argument("--new-tokens", type=int, default=32,
                        help="tokens decoded per reply, forced (default 32; the demo's clue replies stop by 29)")
    parser.add_argument("--prefill-repeats", type=int, default=3, help="prefills per timed prefill run (default 3)")
    parser.add_argument("--quiet-cores", type=float, default=0.1,
                        help="before each A/B pair, wait until other processes use fewer cores than this "
                             "(default 0.1), and run the pair again when they used as many during it ...")
    parser.add_argument("--tries", type=int, default=3,
                        help="... at most this many times per pair (default 3; every try is a record)")
    parser.add_argument("--max-wait", type=float, default=240.0,
                        help="the longest wait for a quiet machine before a pair, then it runs anyway "
                             "(default 240 s)")
    parser.add_argument("--summarize", type=Path, nargs="+", metavar="RAW_JSONL",
                        help="measure nothing: print the summary of these raw.jsonl files, pooled, over their "
                             "quiet rounds only (by --quiet-cores)")
    parser.add_argument("--out", type=Path, default=HERE,
                        help="folder for raw.jsonl and checks.json (default this script's folder)")
    args = parser.parse_args(argv)
    if args.summarize:
        missing = [str(file) for file in args.summarize if not file.is_file()]
        if missing:
            parser.error(f"--summarize: no such file(s): {', '.join(missing)}")
        return summarize(args.summarize, args.quiet_cores)
    chosen = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in SPEEDUPS]
    if unknown or not chosen:
        parser.error(f"--only: unknown speed-up(s) {unknown or chosen}; choose among {', '.join(SPEEDUPS)}")
    if min(args.rounds, args.new_tokens, args.prefill_repeats, args.tries) < 1:
        parser.error("--rounds, --new-tokens, --prefill-repeats and --tries must be at least 1")
    for name in ("inference_mode", "window_tables"):  # the uncached / undecorated functions must exist
        targets = ("decode",) if name == "inference_mode" else TABLES
        module = decoding if name == "inference_mode" else window_tables
        if name in chosen and not all(hasattr(getattr(module, target), "__wrapped__") for target in targets):
            parser.error(f"{name}: the library's functions have no __wrapped__ to switch the speed-up off with")

    load_before = load_average()
    _quiet_libraries()
    started = time.perf_counter()
    model = MemoryModel.from_pretrained()
    fixed = {"machine": machine(model), "context_chars": args.context_chars, "memorize_chars": args.memorize_chars,
             "new_tokens": args.new_tokens, "prefill_repeats": args.prefill_repeats}
    memory = model.memorize(TEXT.read_text(encoding="utf-8")[: args.context_chars], show_progress=False)
    fixed["memory_tokens"] = memory.num_tokens
    print(f"model {model.dtype}, memory of {memory.num_tokens} tokens, ready in {time.perf_counter() - started:.1f} s; "
          f"{fixed['machine']}", flush=True)
    work = workloads(model, memory, args)
    checks: dict[str, Any] = {"machine_at_start": machine_record(load_before), **fixed,
                              "replacement_agreement": replacement_agreement(), "speedups": {}}
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "raw.jsonl", "w", encoding="utf-8") as raw:
        for name in chosen:
            checks["speedups"][name] = measure(name, model, work, args, fixed, raw)
    records = [json.loads(line) for line in (args.out / "raw.jsonl").read_text(encoding="utf-8").splitlines()]
    rows = summary(records, args.quiet_cores)
    checks["summary"], checks["verdicts"] = rows, verdicts(rows)
    checks["machine_at_end"] = machine_record(load_before)
    (args.out / "checks.json").write_text(json.dumps(checks, indent=1) + "\n", encoding="utf-8")
    print(f"\n{checks['machine_at_end']}\n{fixed['machine']}\n\n{table(rows)}\n")
    for name, verdict in checks["verdicts"].items():
        print(f"{name}: {verdict}; outputs A vs B: {checks['speedups'][name]['outputs_equal']}")
    print(f"\ntotal {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
