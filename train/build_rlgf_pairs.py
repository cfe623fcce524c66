"""RLGF's preference pairs: per tuning question, clue sets sampled from the memory and scored by the answers they
lead to (docs/training.md, "Stage 3: clues trained by their answers (RLGF)").

    python train/build_rlgf_pairs.py --config configs/rlgf/smollm2-cpu.yaml
    python train/build_rlgf_pairs.py --config configs/rlgf/smollm2-cpu.yaml rlgf.hotpotqa=50 rlgf.samples=6
    python train/build_rlgf_pairs.py --config configs/debug-rlgf.yaml --out /tmp/pairs.jsonl

Reads the stage's own config: the memory model of `model.*` (`model.memory_weights`: the SFT
checkpoint the stage starts from), the questions and scoring of `rlgf.*` (HotpotQA dev rows 0..4,999
and the SQuAD tuning articles only), the retrieval and reader of `rlgf.pipeline.*`. Writes the pairs to
data.files[0] (or --out), each question's record first to the folder OUT.partial (shards of 200 questions):
stopped, the same command goes on where it stopped; once OUT is written, the command does nothing
(--rebuild builds it again). Beside OUT: the folder OUT.questions (every question's clue sets and scores,
the dropped ones too, in the shards) and OUT.stats.json (the counts, the settings and the build time).
Where OUT.questions is there and OUT is not (a repository that keeps the shards but not the pairs file,
which outgrows its file-size cap), the command writes OUT again from the shards, the same bytes, in seconds.
--processes N builds in N processes side by side, each with 1/N of the threads and every N-th question
(more questions an hour where one process leaves the cores partly idle: docs/training.md); a stopped
build goes on with any number of processes.
"""

import argparse
import json
import shutil
import sys
from pathlib import Path

from memorag.config import ConfigError, load_config
from memorag.training.config import TrainConfig
from memorag.training.rlgf_pairs import rewrite_pairs
from memorag.training.rlgf_workers import build_with_processes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, metavar="FILE", help="a stage rlgf config (configs/rlgf/*.yaml)")
    parser.add_argument("--out", help="the JSONL to write (default: data.files[0] of the config)")
    parser.add_argument("--rebuild", action="store_true", help="build OUT again even when it is already built")
    parser.add_argument("--processes", type=int, default=1, metavar="N",
                        help="build in N processes side by side, the threads shared out (default 1)")
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="settings over the file's")
    args = parser.parse_intermixed_args()
    try:
        cfg = load_config(TrainConfig, args.config, args.overrides)
        if not (args.out or cfg.data.files):
            parser.error("say where the pairs go: --out FILE or data.files=[FILE]")
        out = Path(args.out or cfg.data.files[0])
        partial = out.with_name(out.name + ".partial")
        questions = out.with_name(out.name + ".questions")
        if args.rebuild:
            out.unlink(missing_ok=True)
            shutil.rmtree(partial, ignore_errors=True)
        elif out.is_file() and not partial.exists():
            print(f"{out} is built; pass --rebuild to build it again")
            return 0
        elif questions.is_dir() and not partial.exists():
            print(f"{out}: {rewrite_pairs(out)} pairs written again from {questions}")
            return 0
        stats = build_with_processes(cfg, out, args.processes)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(json.dumps({key: stats[key] for key in ("questions", "pairs", "dropped", "question_s_mean")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
