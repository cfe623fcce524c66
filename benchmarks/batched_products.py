"""The exact clue batch with and without its products shared among sequences, in one process (`project` in
memorag/memory/attention.py).

    python benchmarks/batched_products.py --rounds 10 > raw.jsonl
    python benchmarks/batched_products.py --products >> raw.jsonl

The quick demo text (its first 16,000 characters) is memorized once with the embedded model and
its shipped memory weights; then the clue stage in its default decoding (the three clue kinds as
one exact batch) is timed `--rounds` times each way, alternating (`memorag.benchmarking.baseline`):
"before" with the sequences' products kept apart from outside (`ExactProducts.way` answering "each":
one `F.linear` per sequence), "after" as is (the fastest exact way the model measured for each shape). One JSON line per timed stage,
then a summary line: before / after of the best and median seconds, whether the replies are equal,
and the machine.

`--products` instead times the LM head's product alone (SmolLM2-135M's shape, 49,152 x 576,
`--dtype`, random values) over 1 and 3 rows, median of 30 calls each: `F.linear` over the rows, one
`F.linear` per row, the batched product, and the weight as the left operand, each with whether it
gives the bits of one `F.linear` per row.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from contextlib import nullcontext
from pathlib import Path
from unittest.mock import patch

import torch
import torch.nn.functional as F

from memorag.benchmarking.baseline import BEFORE, alternate, compare_seconds
from memorag.benchmarking.machine import load_average, machine_record

ROOT = Path(__file__).resolve().parents[1]
TEXT = ROOT / "examples" / "kjv_ruth_esther_jonah.txt"
QUESTION = "Which city was Jonah sent to?"


def clue_stage_rounds(rounds: int) -> None:
    from memorag.commands.main import _quiet_libraries
    from memorag.memory import attention as products
    from memorag.pipeline import MemoRAG
    from memorag.retrieval import Document

    _quiet_libraries()
    load_before = load_average()
    rag = MemoRAG()
    rag.memorize(Document(id="quick", title="", text=TEXT.read_text(encoding="utf-8")[:16000]), show_progress=False)
    handler = rag.mode("memorag")
    context = rag.context(handler)
    language = context.language_of(QUESTION)
    handler.write_clues(context, QUESTION, "memorag", language)  # warm: each shape checked once, caches built
    replies = {}

    def measure(label: str, round_index: int) -> float:
        with (patch.object(products.ExactProducts, "way", return_value=products.EACH) if label == BEFORE
              else nullcontext()):
            started = time.perf_counter()
            _, raw = handler.write_clues(context, QUESTION, "memorag", language)
            seconds = time.perf_counter() - started
        replies.setdefault(label, raw)
        print(json.dumps({"round": round_index + 1, "side": label, "seconds": round(seconds, 3),
                          "load": load_average()}), flush=True)
        return seconds

    comparison = compare_seconds(alternate(rounds, measure))
    print(json.dumps({"summary": {key: comparison[key] for key in ("best_s", "median_s", "before_over_after")},
                      "replies_equal": len(set(map(json.dumps, replies.values()))) == 1,
                      "replies": replies[BEFORE], "machine": machine_record(load_before)}), flush=True)


def product_kinds(weight: torch.Tensor, rows: torch.Tensor) -> dict:
    """The four ways `time_products` times, as calls over `rows` [n, in]."""
    count = rows.shape[0]
    return {"F.linear over the rows": lambda: F.linear(rows, weight),
            "F.linear per row": lambda: [F.linear(rows[i : i + 1], weight) for i in range(count)],
            "batched product (bmm)": lambda: torch.bmm(rows[:, None], weight.T.expand(count, -1, -1)),
            "weight as left operand": lambda: torch.mm(weight, rows.T)}


def time_products(dtype: torch.dtype) -> None:
    weight = torch.randn(49152, 576).to(dtype)
    for count in (1, 3):
        rows = torch.randn(count, 576).to(dtype)
        alone = torch.cat([F.linear(rows[i : i + 1], weight) for i in range(count)])
        for name, call in product_kinds(weight, rows).items():
            for _ in range(3):
                call()
            times = []
            for _ in range(30):
                started = time.perf_counter()
                call()
                times.append(time.perf_counter() - started)
            print(json.dumps({"rows": count, "product": name, "dtype": str(dtype).removeprefix("torch."),
                              "median_ms": round(statistics.median(times) * 1e3, 2),
                              "equals_one_per_row": bool(torch.equal(_as_rows(call(), count), alone)),
                              "load": load_average()}), flush=True)


def _as_rows(out, count: int) -> torch.Tensor:
    """A product kind's output as [count, 49152] rows."""
    if isinstance(out, list):
        return torch.cat(out)
    if out.dim() == 3:  # the batched product: [count, 1, 49152]
        return out[:, 0]
    return out if out.shape[0] == count else out.T  # the weight as the left operand: [49152, count]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8, help="clue stages timed each way (default 8)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    parser.add_argument("--products", action="store_true", help="time the LM head's product kinds instead")
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32",
                        help="--products: the weight's and rows' dtype (default float32)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.products:
        time_products(getattr(torch, args.dtype))
    else:
        clue_stage_rounds(args.rounds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
