"""Time per pipeline stage and peak memory on the demo text, with the embedded models.

    python benchmarks/pipeline.py                 # the whole demo text (about 12.5K tokens)
    python benchmarks/pipeline.py --quick         # its first 16,000 characters (about 4K tokens)
    python benchmarks/pipeline.py --threads 1     # torch threads (default: torch's own choice)

Stages: load the models; memorize (the memory model reads the text), chunk, embed and
index; the memory model writes clues; retrieve; the generator answers; save; reload the
save in a fresh process (models included) against memorizing it again. Peak memory is
the process's peak resident set (VmHWM). Prints a markdown table and writes JSON to
benchmarks/results/pipeline.json (or --out).
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEXT = ROOT / "examples" / "kjv_ruth_esther_jonah.txt"
QUESTION = "Which city was Jonah sent to?"


def _peak_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def reload_in_fresh_process(directory: str, threads: int | None) -> dict:
    """Time `MemoRAG.load` (models included) in a new process, so nothing is warm."""
    code = (
        "import json, sys, time\n"
        + (f"import torch; torch.set_num_threads({threads})\n" if threads else "")
        + "from memorag.cli import _quiet_libraries; _quiet_libraries()\n"
        "started = time.perf_counter()\n"
        "from memorag.pipeline import MemoRAG\n"
        f"rag = MemoRAG.load({directory!r})\n"
        "print(json.dumps({'reload_s': time.perf_counter() - started, 'tokens': rag.memory.num_tokens}))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="only the first 16,000 characters")
    parser.add_argument("--threads", type=int, help="torch threads")
    parser.add_argument("--question", default=QUESTION)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "pipeline.json"))
    args = parser.parse_args()

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    from memorag.cli import _quiet_libraries
    from memorag.pipeline import MemoRAG
    from memorag.retrieval import Document

    _quiet_libraries()
    text = TEXT.read_text(encoding="utf-8")
    if args.quick:
        text = text[:16000]
    document = Document(id=TEXT.name, title="", text=text)
    stages: dict[str, float] = {}

    started = time.perf_counter()
    rag = MemoRAG()
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

    answer = rag.ask(args.question)
    stages["clues"] = answer.timings["clues"]
    stages["retrieve"] = answer.timings["retrieve"]
    stages["generate"] = answer.timings["generate"]

    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        rag.save(Path(folder) / "saved")
        stages["save"] = time.perf_counter() - started
        reload = reload_in_fresh_process(str(Path(folder) / "saved"), args.threads)
    stages["reload in a fresh process (models included)"] = reload["reload_s"]
    peak = _peak_rss_mb()

    rows = [(stage, seconds) for stage, seconds in stages.items()]
    print(f"\nMemoRAG pipeline on {TEXT.name}{' (quick)' if args.quick else ''}: {rag.memory.num_tokens:,} tokens, "
          f"{len(rag.chunks)} chunks, {torch.get_num_threads()} torch threads\n")
    print("| stage | seconds |\n|---|---|")
    for stage, seconds in rows:
        print(f"| {stage} | {seconds:.2f} |")
    print(f"\nmemorize + chunk + index: {memorize_total:.1f} s; reload: {reload['reload_s']:.1f} s "
          f"({memorize_total / reload['reload_s']:.1f}x faster than memorizing again)")
    print(f"peak memory (RSS): {peak:.0f} MiB; memory of the context: {rag.memory.nbytes / 2**20:.1f} MiB")
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
        "peak_rss_mib": round(peak, 1),
        "question": args.question,
        "answer": answer.answer,
        "clues": answer.clues,
        "settings": {"chunk_tokens": rag.config.chunk_tokens, "evidence_tokens": rag.config.evidence_tokens,
                     "clue_kinds": rag.config.clue_kinds, "clue_max_new_tokens": rag.config.clue_max_new_tokens},
        "machine": {"python": platform.python_version(), "torch": torch.__version__, "threads": torch.get_num_threads(),
                    "processor": platform.processor() or platform.machine()},
        "note": "untrained memory weights; timings on a shared CPU machine vary with its load",
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
