"""What RLGF's two steps cost, relative to each other, on this machine: building a pair, and training on it.

    python benchmarks/rlgf_cost.py [--config configs/debug-rlgf.yaml] [--rounds 3] [--out FILE] [key=value ...]

Builds the config's pairs into a temporary folder (`memorag.training.rlgf_pairs.build_from_config`:
each question's memorize, sample, score and reference times are in its record), then times, for
each question's best and worst clue sets (a pair, or the pair a tie dropped: the same token ids to
read), the reference's read of them (no gradients: what the build pays once per pair) and the
policy's forward and backward pass (what each training step pays per pair), `--rounds` times each,
in one process. Prints the medians and their ratios and writes JSON with the machine
(`memorag.benchmarking.machine`), the build's stats and every time measured.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from memorag.benchmarking.machine import load_average, machine_record
from memorag.config import load_config
from memorag.storage.io import atomic_write_text
from memorag.training.config import TrainConfig

ROOT = Path(__file__).resolve().parents[1]


def time_pairs(cfg: TrainConfig, questions: list[dict], rounds: int) -> list[dict]:
    """Per question, its best and worst clue sets as a pair (kept or dropped alike: only the token ids
    count): the seconds of `rounds` reference reads (no gradients) and policy forward+backward passes."""
    from memorag.training.build import build_model
    from memorag.training.rlgf_objective import pair_forward, pair_logprobs
    from memorag.training.rlgf_pairs import pad_id, pair_of, question_contexts
    from memorag.training.rlgf_trainer import render_pair

    model = build_model(cfg.model, cfg.memory)
    model.gradient_checkpointing = cfg.model.gradient_checkpointing
    ratio, pad, timings = cfg.memory.ratios[0], pad_id(model.tokenizer), []
    contexts = question_contexts(cfg, model.tokenizer)
    for question in questions:
        pair = pair_of({**question, "reference": {"chosen": 0.0, "rejected": 0.0}})
        pair = render_pair(model.tokenizer, model.layout, pair, contexts[question["id"]])
        reads, steps = [], []
        for _ in range(rounds):
            started = time.perf_counter()
            with torch.no_grad():
                pair_logprobs(model, pair, ratio, pad)
            reads.append(time.perf_counter() - started)
            started = time.perf_counter()
            pair_forward(model, pair, ratio, pad, cfg.rlgf.beta).loss.backward()
            steps.append(time.perf_counter() - started)
            model.zero_grad(set_to_none=True)
        timings.append({"id": question["id"], "context_tokens": len(pair.context_ids),
                        "reply_tokens": pair.reply_tokens, "reference_read_s": [round(s, 4) for s in reads],
                        "forward_backward_s": [round(s, 4) for s in steps]})
    return timings


def summary(questions: list[dict], pairs: list[dict]) -> dict:
    def median(values):
        return round(statistics.median(values), 4) if values else None

    stages = {stage: median([q["timings"][stage] for q in questions if stage in q["timings"]])
              for stage in ("memorize", "sample", "score", "reference")}
    read = median([s for p in pairs for s in p["reference_read_s"]])
    step = median([s for p in pairs for s in p["forward_backward_s"]])
    question = median([q["build_s"] for q in questions])
    return {"question_build_s": question, "stages_s": stages, "reference_read_s": read, "forward_backward_s": step,
            "forward_backward_per_reference_read": round(step / read, 2) if read and step else None,
            "question_build_per_forward_backward": round(question / step, 2) if question and step else None}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(ROOT / "configs" / "debug-rlgf.yaml"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default=None, help="the JSON to write (default: print only)")
    parser.add_argument("overrides", nargs="*", metavar="key=value")
    args = parser.parse_args()
    from memorag.training.rlgf_pairs import build_from_config, read_records

    before = load_average()
    with tempfile.TemporaryDirectory(prefix="memorag-rlgf-cost-") as folder:
        cfg = load_config(TrainConfig, args.config, [f"data.files=[{folder}/pairs.jsonl]", *args.overrides])
        stats = build_from_config(cfg)
        out = Path(folder) / "pairs.jsonl"
        questions = list(read_records(out.with_name(out.name + ".questions")).values())
        pairs = time_pairs(cfg, questions, args.rounds)
    record = {"machine": machine_record(before), "config": args.config, "overrides": args.overrides,
              "torch_threads": torch.get_num_threads(), "build": stats, "summary": summary(questions, pairs),
              "questions": [{"id": q["id"], "build_s": q["build_s"], "timings": q["timings"], "dropped": q["dropped"]}
                            for q in questions], "pairs": pairs}
    print(json.dumps(record["summary"], indent=1))
    if args.out:
        atomic_write_text(args.out, json.dumps(record, indent=1) + "\n")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
