"""Reader training data: the pipeline's answer prompts over its own retrieval, from the tuning splits only.

    python train/build_reader_data.py --out runs/data/reader/train.jsonl
    python train/build_reader_data.py --hotpotqa 40 --squad 20 --out small.jsonl
    python train/build_reader_data.py --out part.jsonl pipeline.evidence_tokens=2048
    python train/build_reader_data.py --answer-forms sentence --seed 1 --out cli.jsonl   # the CLI's prompt
    python train/build_reader_data.py --hotpotqa 0 --squad 100 --squad-answerable unanswerable --out unans.jsonl
    python train/build_reader_data.py --twins --out paired.jsonl   # each answered sample and its answerless twin

HotpotQA dev rows 0..4,999 and the SQuAD v2 dev articles of the first half of the file
(memorag/training/reader_data.py); the held-out rows and articles are never read. Pipeline settings
default to the harness's CPU ones (configs/eval/cpu-hour.yaml); `pipeline.KEY=VALUE` changes them.
Writes the JSONL and, beside it, OUT.stats.json (the settings, counts and build time).
"""

import argparse
import json
import sys
import time
from pathlib import Path

from memorag.config import apply_overrides, config_from_dict, config_to_dict
from memorag.evaluation.datasets.squad import SQUAD_ANSWERABLE_CHOICES
from memorag.pipeline.types import PipelineConfig
from memorag.storage.io import atomic_write_text
from memorag.training.reader_data import (
    FORMS,
    ReaderModels,
    build_reader_records,
    interleave,
    tuning_examples,
)

# the harness's CPU settings (configs/eval/cpu-hour.yaml): what the reader will be asked under
HARNESS_PIPELINE = {"device": "cpu", "generator_window": 4096, "answer_max_new_tokens": 32, "evidence_tokens": 1024}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="the JSONL to write")
    parser.add_argument("--hotpotqa", type=int, default=2000, help="HotpotQA questions (of rows 0..4,999)")
    parser.add_argument("--squad", type=int, default=1000, help="SQuAD v2 questions (of the tuning articles)")
    parser.add_argument("--squad-answerable", choices=SQUAD_ANSWERABLE_CHOICES, default="all",
                        help="which SQuAD questions: all (about half unanswerable, default), answerable or "
                             "unanswerable (build the two apart to set the share of the fixed reply)")
    parser.add_argument("--context-tokens", type=int, default=4096, help="each question's long context")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--answer-forms", nargs="+", choices=FORMS, default=["benchmark"],
                        help="the answer prompts asked under, one drawn per question: the task's benchmark form "
                             "(default) and/or the CLI's sentence form")
    parser.add_argument("--twins", action="store_true",
                        help="after each sample whose target is the answer, its twin: the same question over its "
                             "context with the paragraphs holding the answer taken out (target: the fixed reply)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("overrides", nargs="*", metavar="pipeline.KEY=VALUE")
    args = parser.parse_args()
    for item in args.overrides:
        if not item.startswith("pipeline."):
            parser.error(f"{item!r}: settings are pipeline.KEY=VALUE")
    settings = apply_overrides(dict(HARNESS_PIPELINE), [item.removeprefix("pipeline.") for item in args.overrides])
    pipeline = config_from_dict(PipelineConfig, settings)
    started = time.perf_counter()
    models = ReaderModels.load(pipeline)
    tokenizer = models.memory_model.tokenizer
    groups = [tuning_examples("hotpotqa", args.hotpotqa, args.context_tokens, args.seed, tokenizer) if args.hotpotqa else [],
              tuning_examples("squad", args.squad, args.context_tokens, args.seed, tokenizer,
                              squad_answerable=args.squad_answerable) if args.squad else []]
    examples = interleave(groups, args.seed)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    with open(partial, "w", encoding="utf-8") as handle:
        def write(record):
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        reasons = build_reader_records(models, pipeline, examples, write, args.seed, forms=args.answer_forms,
                                       progress=not args.no_progress, twins=args.twins)
    partial.replace(out)
    stats = {"command": " ".join(["python train/build_reader_data.py", *sys.argv[1:]]), "examples": len(examples), "samples": sum(reasons.values()), "targets": dict(sorted(reasons.items())), "pipeline": config_to_dict(pipeline),
             "hotpotqa": args.hotpotqa, "squad": args.squad, "context_tokens": args.context_tokens,
             "seed": args.seed, "answer_forms": args.answer_forms, "twins": args.twins, "build_s": round(time.perf_counter() - started, 1)}
    atomic_write_text(out.with_name(out.name + ".stats.json"), json.dumps(stats, indent=1) + "\n")
    print(json.dumps(stats["targets"]), f"{stats['samples']} samples of {len(examples)} questions in {stats['build_s']} s -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
