"""`make demo`: memorize a public-domain book and answer a question about it, offline.

    python -m memorag.commands.demo                                  # the embedded models
    python -m memorag.commands.demo --memory-weights DIR             # trained memory weights
    python -m memorag.commands.demo --question "Why did Jonah flee?" --question "..."

The context is `examples/kjv_ruth_esther_jonah.txt` (Ruth, Esther and Jonah, King
James Version: about 12,500 SmolLM2 tokens; at compression ratio 4 it fits the
model's 8,192 positions). The memory, chunks and index are saved in the user cache
(`~/.cache/memorag/demo/`) and reused by later runs; identical content with the same
models is never memorized twice. Shows the clues, the evidence and the streamed answer.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

DEFAULT_QUESTIONS = ("Which city was Jonah sent to?",)
TEXT_NAME = "kjv_ruth_esther_jonah.txt"


def _text_path() -> Path:
    for root in (Path(__file__).resolve().parents[2], Path.cwd()):
        path = root / "examples" / TEXT_NAME
        if path.is_file():
            return path
    raise SystemExit(f"demo: cannot find examples/{TEXT_NAME}; run the demo from the repository")


def _cache_folder(text: str, memory_weights: str) -> Path:
    from memorag.generation.models import cache_dir, memory_weights_for
    from memorag.storage.io import sha256_file

    weights = "untrained"
    folder = memory_weights_for(None, memory_weights)
    if folder is not None:
        files = sorted(Path(folder).glob("*"))
        weights = hashlib.sha256("".join(sha256_file(f) for f in files if f.is_file()).encode()).hexdigest()
    key = hashlib.sha256(json.dumps([hashlib.sha256(text.encode()).hexdigest(), weights]).encode()).hexdigest()
    return cache_dir() / "demo" / f"kjv-{key[:12]}"


def _open(folder: Path, document, memory_weights: str):
    """The saved demo pipeline when it holds this text with these models, else a new one."""
    from memorag.pipeline import DocumentConflictError, ManifestMismatchError, MemoRAG, SaveFormatError

    if folder.exists():
        started = time.perf_counter()
        try:
            rag = MemoRAG.load(folder, memory_weights=memory_weights)
            if not rag.memorize(document).added and rag.memory is not None:
                print(f"reloaded the saved memory and index from {folder} in {time.perf_counter() - started:.1f} s "
                      "(same text, same models: not memorized again)")
                return rag
        except (SaveFormatError, ManifestMismatchError, DocumentConflictError) as error:
            print(f"the saved demo in {folder} does not fit ({error}); memorizing again")
    rag = MemoRAG(memory_weights=memory_weights)
    started = time.perf_counter()
    print("memorizing (the memory model reads the whole book once; a few minutes on 2 CPU cores)...")
    report = rag.memorize(document, show_progress=True)
    rag.save(folder)
    stages = ", ".join(f"{stage} {seconds:.1f} s" for stage, seconds in report.timings.items())
    print(f"memorized in {time.perf_counter() - started:.1f} s ({stages}); saved to {folder}")
    return rag


def _show_answer(rag, question: str, task: str) -> None:
    print(f"\n=== {question}")

    def on_clues(clues):
        print("clues written by the memory model:")
        for number, clue in enumerate(clues, 1):
            print(f"  {number}. {clue}")
        if not clues:
            print("  (none usable: the query retrieves alone)")

    def on_evidence(evidence):
        print(f"evidence ({len(evidence)} chunks, {sum(e.num_tokens for e in evidence)} tokens, in book order):")
        for item in evidence:
            found = ", ".join("query" if i == 0 else f"clue {i}" for i in item.queries)
            snippet = " ".join(item.text.split())[:70]
            print(f"  chars {item.start_char}-{item.end_char}  score {item.score:.4f}  ({found})  {snippet}...")
        print("answer: ", end="", flush=True)

    def on_text(piece):
        print(piece, end="", flush=True)

    if task == "qa":
        print("answer from memory alone: ", end="", flush=True)
    answer = rag.ask(question, task=task, on_text=on_text, on_clues=on_clues, on_evidence=on_evidence)
    print()
    print("timings: " + ", ".join(f"{stage} {seconds:.1f} s" for stage, seconds in answer.timings.items()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m memorag.commands.demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--question", action="append", help="a question about the text (repeatable)")
    parser.add_argument("--task", default="memorag", choices=("memorag", "qa", "summarize"))
    parser.add_argument("--memory-weights", metavar="DIR", default="auto",
                        help="memory weights: 'auto' (default: the trained weights shipped with memorag), "
                             "a folder of other trained weights, or 'untrained' (copies of the base model's)")
    parser.add_argument("--memory-answer", action="store_true",
                        help="also show the memory model's answer from memory alone (task qa)")
    args = parser.parse_args(argv)

    from memorag.commands.main import _quiet_libraries
    from memorag.retrieval import Document

    _quiet_libraries()
    started = time.perf_counter()
    path = _text_path()
    text = path.read_text(encoding="utf-8")
    print(f"MemoRAG demo: {path.name}, {len(text):,} characters (Ruth, Esther and Jonah, King James Version)")
    from memorag.generation.models import SHIPPED_MEMORY_DIR, memory_weights_for

    weights = memory_weights_for(None, args.memory_weights)
    if weights is None:
        print("NOTE: the memory weights are UNTRAINED (copies of the base model's projections): the memory "
              "model's clues and its answers from memory alone are poor. The answer below stands on retrieval "
              "with the query.")
    elif weights == SHIPPED_MEMORY_DIR:
        print(f"memory weights: the trained weights shipped with memorag ({weights.name}; README \"The shipped "
              "memory\"); --memory-weights untrained for the untrained copies")
    else:
        print(f"memory weights: {weights}")
    document = Document(id=path.name, title="", text=text)
    rag = _open(_cache_folder(text, args.memory_weights), document, args.memory_weights)
    memory = rag.memory
    print(f"memory: {memory.num_tokens:,} tokens read into {memory.num_entries:,} entries per layer "
          f"(ratio {memory.ratio}), {memory.nbytes / 2**20:.0f} MiB; index: {len(rag.chunks)} chunks of "
          f"{rag.config.chunk_tokens} tokens, embedder {rag.embedder_name}")
    for question in args.question or DEFAULT_QUESTIONS:
        _show_answer(rag, question, args.task)
        if args.memory_answer and args.task != "qa":
            _show_answer(rag, question, "qa")
    print(f"\ndemo finished in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
