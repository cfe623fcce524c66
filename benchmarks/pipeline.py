"""Time per pipeline stage and peak memory on the demo text, with the embedded models.

    python benchmarks/pipeline.py                 # the whole demo text (about 12.5K tokens)
    python benchmarks/pipeline.py --quick         # its first 16,000 characters (about 4K tokens)
    python benchmarks/pipeline.py --threads 1     # torch threads (default: torch's own choice)
    python benchmarks/pipeline.py --clue-decoding 3   # also: the clue stage one-by-one vs batched, 3 rounds
    python benchmarks/pipeline.py --quick --clue-decoding 3 --clue-only   # that comparison alone
    python benchmarks/pipeline.py --quick --clue-decoding 3 --clue-only --compile-decoding default  # + compiled step
    python benchmarks/pipeline.py --quick --clue-decoding 3 --clue-only --baseline /tmp/before   # against a checkout
    python benchmarks/pipeline.py --quick --clue-decoding 1 --clue-only --profile   # where the clue stage's time goes
    python benchmarks/pipeline.py --memory-weights untrained   # other memory weights (default: the shipped ones)
    python benchmarks/pipeline.py --device cuda --dtype bf16   # on a GPU (the embedded models must be installed)

`--clue-decoding N` times the clue stage (the memory model writing its clue kinds for the
question) N times in each of its three decodings, interleaved round by round (the
machine may be shared: a slow spell then hits every variant), and reports medians:
"one-by-one" (the kinds in turn), "batch" (one batch, replies equal to one-by-one token
for token: the default) and "shared" (one batch sharing its matrix products; a reply can
differ where two tokens tie). It writes results/benchmarks/clue_decoding.json.

With `--baseline DIR` (another checkout of the project, e.g. `git worktree add /tmp/before REV`)
and `--clue-only`, the clue stage in the default decoding ("batch") is timed in that checkout
and in this one, alternating, N rounds (memorag/benchmarking/baseline.py): each round runs this
script with `--clue-decoding 1 --clue-only` (and the other options as given, which the
baseline's own pipeline.py must accept) in a fresh process per tree, with this interpreter,
reads the batch decoding's seconds from the line it prints ("round 1: batch: S s"; batch is
timed first, right after memorizing) and stops that process there (the other two decodings
would take minutes more). `--clue-out` is then the comparison (default
clue_decoding-vs-baseline.json in results/benchmarks), each run's own output kept beside it.

`--profile` (with `--clue-decoding N`) adds, after the timed rounds, one batch clue stage timed
round by round (memorag/benchmarking/rounds.py: the prompts' prefill, decoding rounds of raw rows
only, rounds that also read memory-token rows, and what lies outside the rounds: the LM head and
`generate`) and one under torch.profiler (its top operators); both tables are printed and kept in
the clue-stage JSON ("batch_profile").

Stages: load the models; memorize (the memory model reads the text), chunk, embed and
index; the memory model writes clues; retrieve; the generator answers; save; reload the
save in a fresh process (models included) against memorizing it again. Peak memory is
the process's peak resident set (VmHWM) and, on CUDA, torch.cuda.max_memory_allocated.
The device options (`--device`, `--dtype`, default auto: the checkpoints' own, `--threads`)
are the shared ones of memorag/benchmarking/device.py; the models load there. Beside the
memorize stage: its tokens/s and a lower bound on its time from the GEMM and attention
peaks measured in the same run (`memorag.benchmarking.roofline`, counting the whole windows only, so
it stays a lower bound). Prints a markdown table and writes JSON to
results/benchmarks/pipeline.json (or --out).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from memorag.benchmarking.baseline import AFTER, BEFORE, compare_runs, run_until_line, without_options
from memorag.benchmarking.device import BenchDevice, add_device_options
from memorag.benchmarking.machine import load_average, machine_record

ROOT = Path(__file__).resolve().parents[1]
TEXT = ROOT / "examples" / "kjv_ruth_esther_jonah.txt"
RESULTS = ROOT / "results" / "benchmarks"
QUESTION = "Which city was Jonah sent to?"
# the line `compare_clue_decodings` prints when the first round's batch decoding is done (the same since
# the clue-decoding comparison began, so older checkouts print it too)
BATCH_CLUE_LINE = re.compile(r"round 1: batch: ([0-9.]+) s$")


def reload_in_fresh_process(directory: str, threads: int | None, device: str, dtype: str) -> dict:
    """Time `MemoRAG.load` (models included) in a new process, so nothing is warm."""
    code = (
        "import json, sys, time\n"
        + (f"import torch; torch.set_num_threads({threads})\n" if threads else "")
        + "from memorag.commands.main import _quiet_libraries; _quiet_libraries()\n"
        "started = time.perf_counter()\n"
        "from memorag.pipeline import MemoRAG\n"
        f"rag = MemoRAG.load({directory!r}, device={device!r}, dtype={dtype!r})\n"
        "print(json.dumps({'reload_s': time.perf_counter() - started, 'tokens': rag.memory.num_tokens}))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def compare_clue_decodings(rag, question: str, rounds: int, out: Path, quick: bool,
                           compile_mode: str | None = None, profile: BenchDevice | None = None) -> dict:
    """The clue stage in each decoding, `rounds` times, interleaved; medians, the replies, whether
    each decoding's replies equal one-by-one's; a table on stdout and JSON in `out`. With `profile`
    (the device), then one more batch clue stage timed round by round and one under torch.profiler
    (`profile_clue_stage`). With `compile_mode`, afterwards: the memory model switched to the compiled
    decoding step, one clue stage that compiles it (timed apart), then `rounds` more through it
    ("compiled")."""
    import statistics

    from memorag.modes.memorag import CLUE_DECODINGS

    load_before = load_average()
    handler = rag.mode("memorag")
    context = rag.context(handler)
    language = context.language_of(question)
    seconds: dict[str, list[float]] = {decoding: [] for decoding in CLUE_DECODINGS}
    replies: dict[str, dict[str, str]] = {}
    for round_index in range(rounds):
        order = CLUE_DECODINGS if round_index % 2 == 0 else CLUE_DECODINGS[::-1]
        for decoding in order:
            started = time.perf_counter()
            _, raw = handler.write_clues(context, question, "memorag", language, decoding=decoding)
            seconds[decoding].append(time.perf_counter() - started)
            replies.setdefault(decoding, raw)
            print(f"round {round_index + 1}: {decoding}: {seconds[decoding][-1]:.2f} s", flush=True)
    breakdown = None if profile is None else profile_clue_stage(rag, handler, context, question, language, profile)
    compile_s = None
    if compile_mode is not None:
        rag.memory_model.compile_decoding(mode=None if compile_mode == "default" else compile_mode)
        started = time.perf_counter()
        handler.write_clues(context, question, "memorag", language)
        compile_s = time.perf_counter() - started
        print(f"compiling the decoding step ({compile_mode}) within a first clue stage: {compile_s:.1f} s", flush=True)
        seconds["compiled"] = []
        for round_index in range(rounds):
            started = time.perf_counter()
            _, raw = handler.write_clues(context, question, "memorag", language)
            seconds["compiled"].append(time.perf_counter() - started)
            replies.setdefault("compiled", raw)
            print(f"round {round_index + 1}: compiled: {seconds['compiled'][-1]:.2f} s", flush=True)
        rag.memory_model.compile_decoding(False)
    medians = {decoding: statistics.median(values) for decoding, values in seconds.items()}
    same = {decoding: replies[decoding] == replies["one-by-one"] for decoding in seconds}
    dtype = str(rag.memory_model.base_dtype).removeprefix("torch.")
    print(f"\nclue stage ({len(replies['one-by-one'])} kinds, {rag.config.clue_max_new_tokens} new tokens at most, "
          f"memory model in {dtype}), median of {rounds} interleaved rounds\n")
    print("| decoding | median s | runs (s) | replies equal one-by-one |\n|---|---|---|---|")
    for decoding in seconds:
        runs = ", ".join(f"{value:.2f}" for value in seconds[decoding])
        print(f"| {decoding} | {medians[decoding]:.2f} | {runs} | {same[decoding]} |")
    result = {
        "benchmark": "clue_decoding",
        "text": TEXT.name,
        "quick": quick,
        "num_tokens": rag.memory.num_tokens,
        "question": question,
        "clue_kinds": list(replies["one-by-one"]),
        "clue_max_new_tokens": rag.config.clue_max_new_tokens,
        "rounds": rounds,
        "seconds": {decoding: [round(value, 3) for value in values] for decoding, values in seconds.items()},
        "median_s": {decoding: round(value, 3) for decoding, value in medians.items()},
        "replies_equal_one_by_one": same,
        "compile_mode": compile_mode, "compile_s": None if compile_s is None else round(compile_s, 3),
        "replies": replies,
        "batch_profile": breakdown,
        "memory_weights": weights_description(rag),
        "memory_model_dtype": dtype,
        "machine": machine_record(load_before),
        "note": "rounds interleave the decodings, so a busy spell on a shared machine slows each alike",
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {out}")
    return result


def profile_clue_stage(rag, handler, context, question: str, language, device: BenchDevice) -> dict:
    """Where the batch clue stage's time goes: one stage timed round by round (memorag/benchmarking/rounds.py:
    prefill, decoding rounds with and without memory rows, the rest), then one under torch.profiler (its
    top operators); both tables printed, and returned for the JSON."""
    from memorag.benchmarking.rounds import rounds_record, rounds_summary, rounds_table, timed_rounds

    with timed_rounds(rag.memory_model, device) as rounds:
        total_s, _ = device.seconds(lambda: handler.write_clues(context, question, "memorag", language,
                                                                decoding="batch"))
    operators = device.profile(lambda: handler.write_clues(context, question, "memorag", language, decoding="batch"),
                               row_limit=25)
    print(f"\nthe batch clue stage round by round ({total_s:.2f} s):\n\n{rounds_table(rounds, total_s)}\n")
    print(f"the batch clue stage under torch.profiler (another run; the profiler adds its own overhead):\n{operators}")
    return {"seconds": round(total_s, 3), "by_kind": rounds_summary(rounds, total_s), "rounds": rounds_record(rounds),
            "top_operators": operators}


def compare_clue_stage_with_baseline(args, argv: list[str]) -> dict:
    """The clue stage (batch) in `args.baseline` and in this checkout, alternating, `args.clue_decoding` rounds."""
    options = without_options(argv, {"--baseline": 1, "--clue-decoding": 1, "--clue-only": 0, "--clue-out": 1,
                                     "--compile-decoding": 1,
                                     "--out": 1})
    options += ["--clue-decoding", "1", "--clue-only"]
    out = Path(args.clue_out or RESULTS / "clue_decoding-vs-baseline.json")
    trees = {BEFORE: Path(args.baseline), AFTER: ROOT}

    def measure(tree: Path, keep: Path) -> dict[str, float]:
        found = run_until_line(tree, "benchmarks/pipeline.py", options, BATCH_CLUE_LINE, keep=keep)
        return {"clue stage (batch)": float(found.group(1))}

    return compare_runs(trees, measure, args.clue_decoding, out, {"script": "benchmarks/pipeline.py",
                                                                   "options": options, "read": BATCH_CLUE_LINE.pattern})


def weights_description(rag) -> dict:
    """Which memory weights the pipeline loaded: in words, and by the hash of their parameters."""
    from memorag.runtime.embedded import describe_memory_weights

    return {"loaded": describe_memory_weights(rag.config.memory_model, rag.config.memory_weights),
            "parameters_sha256": rag.memory_model.memory_weights_hash()}


def memorize_bound(rag, device: BenchDevice, args) -> dict:
    """The memorize stage against its lower bound: the device's peaks now, FLOPs of the whole windows."""
    from memorag.benchmarking.roofline import Shape, bounds, memorize_flops

    model = rag.memory_model
    shape, window = Shape.of(model.base_model.config), model.config.window
    ratio = rag.memory.ratio or min(model.config.ratios)
    dtype = str(model.base_dtype).removeprefix("torch.")
    peaks = device.peaks(args, dtype, shape, window, 4 * window)
    whole = rag.memory.num_tokens - rag.memory.num_tokens % window
    bound = bounds(memorize_flops(whole, window, ratio, shape), peaks)["at_kernel_rates_s"] if whole else 0.0
    return {"dtype": dtype, "peaks": peaks, "ratio": ratio, "window": window, "bound_s": bound}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_device_options(parser, "auto")
    parser.add_argument("--quick", action="store_true", help="only the first 16,000 characters")
    parser.add_argument("--chars", type=int, help="only the first N characters (a smoke test)")
    parser.add_argument("--question", default=QUESTION)
    parser.add_argument("--memory-weights", default="auto",
                        help="memory weights: auto (the shipped ones), untrained, or a folder")
    parser.add_argument("--out", default=str(RESULTS / "pipeline.json"))
    parser.add_argument("--clue-decoding", type=int, default=0, metavar="N",
                        help="also time the clue stage N times per decoding (one-by-one, batch, shared), interleaved")
    parser.add_argument("--clue-only", action="store_true",
                        help="with --clue-decoding: stop after it (no ask, save or reload stages)")
    parser.add_argument("--clue-out", help="the clue-stage JSON (default results/benchmarks/clue_decoding.json)")
    parser.add_argument("--compile-decoding", choices=["default", "reduce-overhead", "max-autotune"],
                        help="with --clue-decoding N: then also N clue stages through the compiled decoding step "
                             "(MemoryModel.compile_decoding in this torch.compile mode), its compiling timed apart")
    parser.add_argument("--profile", action="store_true",
                        help="with --clue-decoding N: then one batch clue stage timed round by round (prefill, "
                             "decoding rounds with and without memory rows) and one under torch.profiler")
    parser.add_argument("--baseline", help="with --clue-decoding N --clue-only: time the clue stage (batch) "
                                           "in this other checkout and in this one, alternating, N rounds")
    args = parser.parse_args(argv)
    if args.profile and not args.clue_decoding:
        parser.error("--profile needs --clue-decoding N")
    if args.profile and args.baseline:
        parser.error("--profile times this checkout's clue stage; run it without --baseline")
    if args.baseline:
        if not (args.clue_decoding and args.clue_only):
            parser.error("--baseline needs --clue-decoding N --clue-only")
        compare_clue_stage_with_baseline(args, sys.argv[1:] if argv is None else argv)
        return 0
    args.clue_out = args.clue_out or str(RESULTS / "clue_decoding.json")

    import torch

    load_before = load_average()
    device = BenchDevice.from_args(args)
    from memorag.commands.main import _quiet_libraries
    from memorag.pipeline import MemoRAG
    from memorag.retrieval import Document

    _quiet_libraries()
    text = TEXT.read_text(encoding="utf-8")
    if args.quick or args.chars:
        text = text[: args.chars or 16000]
    document = Document(id=TEXT.name, title="", text=text)
    stages: dict[str, float] = {}

    started = time.perf_counter()
    rag = MemoRAG(memory_weights=args.memory_weights, device=device.name, dtype=args.dtype)
    rag.memory_model  # noqa: B018 - load now, to time it
    stages["load memory model"] = time.perf_counter() - started
    started = time.perf_counter()
    rag.embedder  # noqa: B018
    stages["load embedder"] = time.perf_counter() - started

    report = rag.memorize(document, show_progress=False)
    stages["memorize (memory model reads)"] = report.timings["memory"]
    stages["chunk"] = report.timings["chunk"]
    stages["embed and index"] = report.timings["index"]
    memorize_total = sum(report.timings.values())

    if args.clue_only:
        if not args.clue_decoding:
            parser.error("--clue-only needs --clue-decoding N")
        compare_clue_decodings(rag, args.question, args.clue_decoding, Path(args.clue_out), args.quick,
                               args.compile_decoding, device if args.profile else None)
        return 0

    answer = rag.ask(args.question)
    stages["clues"] = answer.timings["clues"]
    stages["retrieve"] = answer.timings["retrieve"]
    stages["generate"] = answer.timings["generate"]

    if args.clue_decoding:
        compare_clue_decodings(rag, args.question, args.clue_decoding, Path(args.clue_out), args.quick,
                               args.compile_decoding, device if args.profile else None)

    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        rag.save(Path(folder) / "saved")
        stages["save"] = time.perf_counter() - started
        reload = reload_in_fresh_process(str(Path(folder) / "saved"), args.threads, device.name, args.dtype)
    stages["reload in a fresh process (models included)"] = reload["reload_s"]
    peak = device.peak_memory_mb()
    memorize = memorize_bound(rag, device, args)
    memorize.update(tokens_per_s=rag.memory.num_tokens / stages["memorize (memory model reads)"],
                    share_of_bound=memorize["bound_s"] / stages["memorize (memory model reads)"])

    rows = [(stage, seconds) for stage, seconds in stages.items()]
    print(f"\nMemoRAG pipeline on {TEXT.name}{' (quick)' if args.quick else ''}: {rag.memory.num_tokens:,} tokens, "
          f"{len(rag.chunks)} chunks, {torch.get_num_threads()} torch threads\n")
    print("| stage | seconds |\n|---|---|")
    for stage, seconds in rows:
        print(f"| {stage} | {seconds:.2f} |")
    print(f"\nmemorize + chunk + index: {memorize_total:.1f} s; reload: {reload['reload_s']:.1f} s "
          f"({memorize_total / reload['reload_s']:.1f}x faster than memorizing again)")
    print(f"memorize: {memorize['tokens_per_s']:.0f} tokens/s, {memorize['share_of_bound']:.0%} of its bound "
          f"({memorize['bound_s']:.2f} s at GEMM {memorize['peaks']['gemm'] / 1e9:,.0f} GFLOP/s and attention "
          f"{memorize['peaks']['attention'] / 1e9:,.0f} GFLOP/s, {device.name})")
    print(f"peak memory ({device.peak_memory_kind}): {peak:.0f} MiB; memory of the context: "
          f"{rag.memory.nbytes / 2**20:.1f} MiB")
    print(f"question: {args.question}\nclues: {answer.clues}\nanswer: {answer.answer}")

    result = {
        "benchmark": "pipeline",
        "text": TEXT.name,
        "quick": args.quick,
        "num_tokens": rag.memory.num_tokens,
        "num_chunks": len(rag.chunks),
        "memory_mib": round(rag.memory.nbytes / 2**20, 2),
        "stages_s": {stage: round(seconds, 3) for stage, seconds in stages.items()},
        "memorize_total_s": round(memorize_total, 3),
        "reload_s": round(reload["reload_s"], 3),
        "peak_memory_mib": round(peak, 1),
        "memorize": memorize,
        "question": args.question,
        "answer": answer.answer,
        "clues": answer.clues,
        "settings": {"chunk_tokens": rag.config.chunk_tokens, "evidence_tokens": rag.config.evidence_tokens,
                     "clue_kinds": rag.config.clue_kinds, "clue_max_new_tokens": rag.config.clue_max_new_tokens},
        "memory_weights": weights_description(rag),
        "memory_model_dtype": str(rag.memory_model.base_dtype).removeprefix("torch."),
        "machine": machine_record(load_before),
        "device": device.record(),
        "note": "timings on a shared CPU machine vary with its load (see the load averages)",
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
