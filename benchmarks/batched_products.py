"""Same-process A/B of the batched per-sequence products (memorag/memory/linear.py) on the clue stage.

Side A: as is (sequences of one size in one `torch.bmm`, where it rounds as alone). Side B: switched
off from outside (`rounds_as_alone` answering False: one `F.linear` per sequence, the code before).
The quick demo text memorized once with the embedded model and shipped memory weights; then the
clue stage in its default decoding (the exact batch of three clue kinds), A and B alternating
round by round (AB, then BA), replies compared. One JSON line per round on stdout.

    python benchmarks/batched_products.py --rounds 8
    python benchmarks/batched_products.py --products

`--products` instead times the LM head's product alone (SmolLM2-135M's shape, 49,152 x 576, float32,
random values) over 1 and 3 rows: `F.linear` over the rows, one `F.linear` per row, the batched
product, and the weight as the left operand (`torch.mm(weight, rows.T)`), median of 30 calls each.
"""

import argparse
import json
import os
import time
from pathlib import Path
from unittest.mock import patch

import torch

from memorag.commands.main import _quiet_libraries
from memorag.memory import linear
from memorag.pipeline import MemoRAG
from memorag.retrieval import Document

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--products", action="store_true", help="time the LM head's product kinds instead")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.products:
        time_products()
        return
    _quiet_libraries()
    text = (ROOT / "examples" / "kjv_ruth_esther_jonah.txt").read_text(encoding="utf-8")[:16000]
    rag = MemoRAG()
    rag.memorize(Document(id="quick", title="", text=text), show_progress=False)
    handler = rag.mode("memorag")
    context = rag.context(handler)
    question = "Which city was Jonah sent to?"
    language = context.language_of(question)
    handler.write_clues(context, question, "memorag", language)  # warm: shapes checked once, caches built
    replies = {}
    for round_index in range(args.rounds):
        order = "AB" if round_index % 2 == 0 else "BA"
        for side in order:
            switch = patch.object(linear, "rounds_as_alone", return_value=False) if side == "B" else None
            if switch:
                switch.start()
            started = time.perf_counter()
            _, raw = handler.write_clues(context, question, "memorag", language)
            seconds = time.perf_counter() - started
            if switch:
                switch.stop()
            replies.setdefault(side, raw)
            print(json.dumps({"round": round_index + 1, "side": side, "seconds": round(seconds, 3),
                              "load": [round(x, 2) for x in os.getloadavg()]}), flush=True)
    print(json.dumps({"replies_equal": replies["A"] == replies["B"], "replies": replies["A"]}), flush=True)


def time_products() -> None:
    import statistics

    weight = torch.randn(49152, 576)
    for count in (1, 3):
        for name, call in product_kinds(weight, torch.randn(count, 576)).items():
            for _ in range(3):
                call()
            times = []
            for _ in range(30):
                started = time.perf_counter()
                call()
                times.append(time.perf_counter() - started)
            print(json.dumps({"rows": count, "product": name, "median_ms": round(statistics.median(times) * 1e3, 2),
                              "load": [round(x, 2) for x in os.getloadavg()]}), flush=True)


def product_kinds(weight: torch.Tensor, rows: torch.Tensor) -> dict:
    """The four ways `time_products` times, as calls over `rows` [n, in]."""
    import torch.nn.functional as F

    count = rows.shape[0]
    return {"F.linear over the rows": lambda: F.linear(rows, weight),
            "F.linear per row": lambda: [F.linear(rows[i : i + 1], weight) for i in range(count)],
            "batched product (bmm)": lambda: torch.bmm(rows[:, None], weight.T.expand(count, -1, -1)),
            "weight as left operand": lambda: torch.mm(weight, rows.T)}


if __name__ == "__main__":
    main()
