"""The reader's refusal margin, tuned on reader samples of the tuning rows (docs/training.md, "The reader").

    python train/tune_refusal.py --samples runs/reader-embedded-4/tune/*.jsonl \
        --adapter runs/reader-embedded-4/final --exclude-ids-of runs/reader-embedded/data/*.jsonl \
        --out runs/reader-embedded-4/tune/margins.json
    python train/tune_refusal.py ... --write      # also writes the margin beside the adapter
    python train/tune_refusal.py --rescore runs/reader-embedded-4/tune/margins.json --samples ... --out again.json

Reads samples written by train/build_reader_data.py (HotpotQA dev rows 0..4,999, the first half of SQuAD v2's
articles; build them with another seed than the training data's), drops those whose question the adapter was
trained on (--exclude-ids-of), decodes each sample's reply with no margin and with the fixed reply ruled out, and
scores every margin that changes a reply (memorag/training/refusal_tuning.py). Writes OUT (each margin's scores,
the best, and how well the fixed reply's lead separates the samples whose evidence holds the answer from the
rest) and, with --write, ADAPTER/reader_decoding.json, which `--generator embedded` reads. --rescore scores
again the replies an earlier OUT recorded, decoding nothing (the samples give each reply's target).
"""

import argparse
import json
import sys
import time
from pathlib import Path

from memorag.generation.reader_adapter import DECODING_CONFIG, check_adapter_folder
from memorag.storage.io import atomic_write_text
from memorag.training.refusal_tuning import (
    SampleReplies,
    best_row,
    candidate_margins,
    margin_rows,
    read_sample,
    separation,
)


def _records(paths):
    for path in paths:
        with open(path, encoding="utf-8") as handle:
            yield from (json.loads(line) for line in handle if line.strip())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", nargs="+", required=True, help="reader samples (JSONL) to tune on")
    parser.add_argument("--adapter", default=None, help="the reader adapter folder (default: the shipped one)")
    parser.add_argument("--exclude-ids-of", nargs="*", default=[], metavar="JSONL",
                        help="the adapter's training samples: their questions are left out")
    parser.add_argument("--max-new-tokens", type=int, default=32, help="as the harness answers (answer_max_new_tokens)")
    parser.add_argument("--repetition-penalty", type=float, default=1.1, help="as the pipeline decodes")
    parser.add_argument("--objective", default="mean", metavar="mean|TASK",
                        help="what the margin maximizes: the mean of the tasks' mean scores (default), or one task's "
                             "(e.g. hotpotqa_dev_longctx), the others reported")
    parser.add_argument("--rescore", default=None, metavar="OUT_JSON",
                        help="score the replies recorded in an earlier OUT instead of decoding")
    parser.add_argument("--out", required=True, help="the JSON to write")
    parser.add_argument("--write", action="store_true", help=f"write the best margin to ADAPTER/{DECODING_CONFIG}")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = parser.parse_args()
    if args.rescore and args.write:
        parser.error("--write writes the margin of replies decoded now: leave out --rescore to decode them")

    from tqdm.auto import tqdm

    from memorag.generation import LocalGenerator, load_generator
    from memorag.generation.reader_adapter import merge_adapter
    from memorag.runtime.embedded import SHIPPED_READER_DIR
    from memorag.runtime.placement import Placement

    trained = {str(record["id"]) for record in _records(args.exclude_ids_of)}
    samples = [record for record in _records(args.samples) if str(record["id"]) not in trained]
    if not samples:
        parser.error("no sample is left to tune on once the training questions are left out")
    started = time.perf_counter()
    if args.rescore:
        earlier = json.loads(Path(args.rescore).read_text(encoding="utf-8"))
        adapter, why = earlier["adapter"], {str(record["id"]): record.get("why", "") for record in samples}
        replies = [SampleReplies(**(item | {"answers": tuple(item["answers"]), "why": why.get(item["id"], "")}))
                   for item in earlier["replies"] if item["id"] in why]
    else:
        adapter = check_adapter_folder(args.adapter or SHIPPED_READER_DIR)
        base = load_generator("embedded-base", placement=Placement.resolve("cpu"))
        reader = LocalGenerator(merge_adapter(base.model, adapter), base.tokenizer,
                                repetition_penalty=args.repetition_penalty)
        replies = [read_sample(reader, record, args.max_new_tokens)
                   for record in tqdm(samples, desc="tuning samples", unit="sample", disable=args.no_progress)]
    try:
        rows = margin_rows(replies, candidate_margins(replies), args.objective)
    except ValueError as error:
        parser.error(str(error))
    best = best_row(rows)
    result = {"command": " ".join(["python train/tune_refusal.py", *sys.argv[1:]]), "adapter": str(adapter),
              "samples": len(samples), "left_out_as_trained": sum(1 for _ in _records(args.samples)) - len(samples),
              "seconds": round(time.perf_counter() - started, 1), "objective": args.objective, "best": best, "separation": separation(replies),
              "margins": rows,
              "replies": [vars(item) | {"answers": list(item.answers)} for item in replies]}
    atomic_write_text(Path(args.out), json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    if args.write:
        atomic_write_text(adapter / DECODING_CONFIG, json.dumps(
            {"refusal_margin": best["margin"], "tuned_by": result["command"]}, indent=1) + "\n")
    print(json.dumps({"best": best, "at_0": rows[0], "separation": result["separation"]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
