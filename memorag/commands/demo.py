"""`make demo`: memorize a public-domain book and answer a question about it, offline.

    python -m memorag.commands.demo                                  # the embedded models
    python -m memorag.commands.demo --memory-weights DIR             # trained memory weights
    python -m memorag.commands.demo --question "Why did Jonah flee?" --question "..."

The context is `examples/kjv_ruth_esther_jonah.txt` (Ruth, Esther and Jonah, King
James Version: about 12,500 SmolLM2 tokens; at the shipped memory's ratio it fits the
model's 8,192 positions). Each question is asked exactly as `memorag ask FILE QUESTION`
asks it (the demo runs that command), so the demo and the command read the same tokens,
write the same clues and print the same answer, or the same "no answer". The first
question memorizes the book and caches it (`asked/` under the cache root, `$MEMORAG_CACHE`,
default `~/.cache/memorag`); later runs start from the cache.
"""

from __future__ import annotations

import argparse
import shlex
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


def ask_command(path: Path, question: str, task: str, memory_weights: str) -> list[str]:
    """The `memorag ask` arguments the demo runs for `question`."""
    return ["ask", str(path), question, "--task", task, "--memory-weights", memory_weights]


def _describe_weights(memory_weights: str) -> str:
    from memorag.memory.checkpoint import memory_weights_for
    from memorag.runtime.embedded import SHIPPED_MEMORY_DIR

    weights = memory_weights_for(None, memory_weights)
    if weights is None:
        return ("NOTE: the memory weights are UNTRAINED (copies of the base model's projections): the memory "
                "model's clues and its answers from memory alone are poor. The answer below stands on retrieval "
                "with the query.")
    if weights == SHIPPED_MEMORY_DIR:
        return (f"memory weights: the trained weights shipped with memorag ({weights.name}; README \"The shipped "
                "memory\"); --memory-weights untrained for the untrained copies")
    return f"memory weights: {weights}"


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

    from memorag.commands import main as command

    started = time.perf_counter()
    path = _text_path()
    text = path.read_text(encoding="utf-8")
    print(f"MemoRAG demo: {path.name}, {len(text):,} characters (Ruth, Esther and Jonah, King James Version)")
    print(_describe_weights(args.memory_weights))
    shown = path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path
    tasks = [args.task] + (["qa"] if args.memory_answer and args.task != "qa" else [])
    status = 0
    for question in args.question or DEFAULT_QUESTIONS:
        for task in tasks:
            print(f"\n=== {question}" + (" (from memory alone)" if task == "qa" else ""), flush=True)
            print("$ memorag " + shlex.join(ask_command(shown, question, task, args.memory_weights)), flush=True)
            status = max(status, command.main(ask_command(path, question, task, args.memory_weights)))
    print(f"\ndemo finished in {time.perf_counter() - started:.1f} s")
    return status


if __name__ == "__main__":
    sys.exit(main())
