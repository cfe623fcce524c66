r"""Write a trained memory checkpoint's clues for each example, and compare
clue-driven retrieval recall with query-only recall (same retriever, same k).

    python eval/generate_clues.py --checkpoint runs/sft-smollm2/final \
        --data data/synthetic/synthetic_niah_single_8192.jsonl
    python eval/generate_clues.py --checkpoint runs/pretrain-qwen2/final \
        --base Qwen/Qwen2-7B-Instruct --data data/hotpot_corpus/ --k 10 \
        --out runs/clues/hotpot.jsonl --device cuda --dtype bfloat16 \
        retriever=bm25 clue_kinds=[spans]
        # --load-in-4bit instead of --dtype on a 16-24 GB GPU

--data is a file of EvalExample JSON lines (eval/synthetic.py writes them), a
saved shared-corpus task folder, or hotpotqa:TOKENS: held-out HotpotQA
questions (rows 5,000 and above, --num-examples of them, default 50), each in
a context of TOKENS tokens. The base model is the one recorded in the
checkpoint unless --base is given. The models load on a CUDA GPU when there is
one, else on the CPU (--device, --dtype, --load-in-4bit or --load-in-8bit, and
--threads choose). Trailing key=value settings go to the pipeline
(memorag.pipeline.PipelineConfig: retriever, embedder, chunk_tokens,
clue_kinds, max_clues, ...).

Writes OUT (one JSON line per example: clues, raw memory replies, hits and
recalls) and OUT with .summary.json; prints the summary. --clue-source
full-context or answer scores a reference instead of the memory's clues (the
base reading the whole context; the gold answer), which bounds what the
memory's can reach (memorag.evaluation.clue_sources). Records are kept in
OUT's .partial.jsonl as they are made: a run that stops (killed, out of time)
goes on where it stopped when started again with the same arguments; other
settings are refused. The logic lives in memorag.evaluation.clue_recall.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from memorag.config import ConfigError, load_config
from memorag.evaluation.clue_recall import run_clue_recall
from memorag.evaluation.clue_sources import CLUE_SOURCES
from memorag.pipeline import PipelineConfig
from memorag.runtime.placement import Placement, add_placement_arguments, placement_overrides


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True,
                        help="memory weights folder (a training run's final/), or 'embedded' (the shipped weights) "
                             "or 'untrained' on the embedded model (or on --base)")
    parser.add_argument("--data", required=True,
                        help="EvalExample JSON lines, a shared-corpus task folder, or hotpotqa:TOKENS (held out)")
    parser.add_argument("--base", default=None, help="base model (default: the one recorded in the checkpoint)")
    parser.add_argument("--out", default=None, help="output JSON lines (default: runs/clues/DATA_NAME.jsonl)")
    parser.add_argument("--k", type=int, default=5, help="chunks each ranking keeps (default 5)")
    parser.add_argument("--num-examples", type=int, default=None, help="only the first N examples")
    parser.add_argument("--memorize", choices=("context", "documents"), default="context",
                        help="per-question examples: memorize the context, or its documents")
    parser.add_argument("--coverage", type=float, default=1.0, help="share of a gold span to cover (default 1)")
    parser.add_argument("--clue-source", choices=CLUE_SOURCES, default="memory",
                        help="who writes the clues: the memory (default); full-context: the base reading the whole "
                             "context uncompressed, the same prompts (a reference above the memory); answer: the "
                             "gold answer as the clue (what a perfect draft retrieves)")
    parser.add_argument("settings", nargs="*", metavar="key=value", help="pipeline settings")
    add_placement_arguments(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        pipeline = load_config(PipelineConfig, None, [*placement_overrides(args), *args.settings])
        Placement.of(pipeline)  # a device or quantization this machine cannot give fails before any work
    except ConfigError as error:
        parser.error(str(error))
    name = args.data.replace(":", "_") if args.data.startswith("hotpotqa:") else Path(args.data).name
    source = "" if args.clue_source == "memory" else f"-{args.clue_source}"
    out = args.out or Path("runs/clues") / f"{name.removesuffix('.jsonl')}{source}.jsonl"
    summary = run_clue_recall(args.checkpoint, args.data, out, base=args.base, k=args.k, coverage=args.coverage,
                              memorize=args.memorize, num_examples=args.num_examples, pipeline=pipeline,
                              clue_source=args.clue_source)
    print(json.dumps(summary, indent=2))
    print(f"clues and recalls in {out}; summary in {Path(out).with_suffix('.summary.json')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
