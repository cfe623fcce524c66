"""The demo's batch clue stage with decoding under inference mode and under no_grad, in one process.

    python benchmarks/results/inference-mode-2026-11-27/ab_rounds.py [ROUNDS]

Loads the pipeline as `benchmarks/pipeline.py --quick` does (the shipped weights, the first 16,000
characters of the demo text), writes the clues once to warm up, then ROUNDS times (default 8) each
arm, alternating which goes first: `decode` as committed (its `torch.inference_mode()`) and the same
function under `torch.no_grad()` instead. Every `MemoryModel.step` of a decoding round is timed;
prints the median and best round of each kind (raw rows only, with memory rows), the stage's
median and best, and whether both arms wrote the same replies. A record of this measurement, kept
beside its output; not part of the benchmarks.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import torch

from memorag.cli import _quiet_libraries
from memorag.machine import load_average, machine_record
from memorag.memory import decoding
from memorag.pipeline import MemoRAG
from memorag.retrieval import Document

ROOT = Path(__file__).resolve().parents[3]
ARMS = {"inference_mode": decoding.decode, "no_grad": torch.no_grad()(decoding.decode.__wrapped__)}


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    load_before = load_average()
    _quiet_libraries()
    text = (ROOT / "examples" / "kjv_ruth_esther_jonah.txt").read_text(encoding="utf-8")[:16000]
    rag = MemoRAG(device="cpu")
    rag.memorize(Document(id="kjv", title="", text=text), show_progress=False)
    handler = rag.mode("memorag")
    context = rag.context(handler)
    question = "Which city was Jonah sent to?"
    language = context.language_of(question)
    model = rag.memory_model
    step = model.step
    arm = {"name": "inference_mode"}
    steps: dict[tuple[str, str], list[float]] = {(name, kind): [] for name in ARMS for kind in ("raw", "memory")}

    def timed_step(inputs, *args, **kwargs):
        started = time.perf_counter()
        out = step(inputs, *args, **kwargs)
        seconds = time.perf_counter() - started
        if sum(item.piece.num_raw for item in inputs) == len(inputs):  # a decoding round, not the prefill
            kind = "memory" if any(item.piece.num_memory for item in inputs) else "raw"
            steps[(arm["name"], kind)].append(seconds)
        return out

    model.step = timed_step
    handler.write_clues(context, question, "memorag", language, decoding="batch")  # warm-up, not counted
    for key in steps:
        steps[key].clear()
    stages: dict[str, list[float]] = {name: [] for name in ARMS}
    replies: dict[str, dict[str, str]] = {}
    for index in range(rounds):
        for name in (ARMS if index % 2 == 0 else reversed(list(ARMS))):
            arm["name"] = name
            decoding.decode = ARMS[name]
            started = time.perf_counter()
            _, raw = handler.write_clues(context, question, "memorag", language, decoding="batch")
            stages[name].append(time.perf_counter() - started)
            replies.setdefault(name, raw)
            print(f"round {index + 1}: {name}: {stages[name][-1]:.2f} s", flush=True)
    decoding.decode = ARMS["inference_mode"]
    print(f"\n{machine_record(load_before)}; {rounds} rounds per arm\n")
    print("| arm | raw-row rounds: median / best ms | memory-row rounds: median / best ms | stage: median / best s |")
    print("|---|---|---|---|")
    for name in ARMS:
        raw, memory = steps[(name, "raw")], steps[(name, "memory")]
        print(f"| {name} | {1e3 * statistics.median(raw):.1f} / {1e3 * min(raw):.1f} | "
              f"{1e3 * statistics.median(memory):.1f} / {1e3 * min(memory):.1f} | "
              f"{statistics.median(stages[name]):.2f} / {min(stages[name]):.2f} |")
    print(f"\nreplies equal: {replies['inference_mode'] == replies['no_grad']}")


if __name__ == "__main__":
    main()
