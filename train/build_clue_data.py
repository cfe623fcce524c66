"""Build clue-SFT data: (long context, question, answer) rows -> SFT JSONL, via an OpenAI-compatible LLM.

    export OPENAI_API_KEY=...            # or name another variable with --api-key-env
    python train/build_clue_data.py --input qa_rows.jsonl --output data/clues.jsonl \\
        --base-url https://api.openai.com/v1 --model gpt-4o-mini --workers 8

    python train/build_clue_data.py --hotpotqa-train 2000 --length 4096 --output data/hotpot-clues.jsonl ...

Input rows: {"context": ..., "question": ..., "answer": ... [, "id": ...]}, or with
--hotpotqa-train N, N HotpotQA questions from the training rows (dev rows below 5,000; the
rows from 5,000 on only evaluate, and a row that is one of them is refused). The output is
the JSONL format of train/sft.py (memorag/training/data/sft.py); filtering rules and prompts are
in memorag/training/data/clue_builder.py and memorag/prompting/prompts.py.
"""

import argparse
import json
import sys

from memorag.generation import OpenAIGenerator
from memorag.training.data.clue_builder import (
    ClueFilter,
    build_clue_data,
    hotpotqa_training_rows,
    read_rows,
)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--input", help="JSONL rows with context, question, answer")
    source.add_argument("--hotpotqa-train", type=int, metavar="N",
                        help="N HotpotQA questions from the training rows (dev rows < 5,000)")
    parser.add_argument("--length", type=int, default=4096,
                        help="--hotpotqa-train: context length in words x 1.3 (gold paragraphs among distractors)")
    parser.add_argument("--output", required=True, help="the SFT JSONL to write (atomically)")
    parser.add_argument("--base-url", required=True, help="OpenAI-compatible API root, e.g. http://localhost:8000/v1")
    parser.add_argument("--model", required=True, help="model name sent to the endpoint")
    parser.add_argument("--api-key-env", default="OPENAI_API_KEY", help="environment variable holding the API key")
    parser.add_argument("--workers", type=int, default=4, help="requests in flight")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per request")
    parser.add_argument("--max-retries", type=int, default=5)
    parser.add_argument("--max-tokens", type=int, default=512, help="reply length limit sent to the endpoint")
    parser.add_argument("--max-clues", type=int, default=5)
    parser.add_argument("--max-clue-words", type=int, default=60)
    parser.add_argument("--min-grounding", type=float, default=0.8,
                        help="share of a clue's word trigrams that must occur in the context")
    parser.add_argument("--max-context-chars", type=int, default=None,
                        help="cut the context shown to the LLM (the sample keeps it whole)")
    args = parser.parse_args(argv)
    generator = OpenAIGenerator(args.base_url, args.model, api_key_env=args.api_key_env, timeout=args.timeout,
                                max_retries=args.max_retries)
    rules = ClueFilter(max_clues=args.max_clues, max_clue_words=args.max_clue_words, min_grounding=args.min_grounding)
    rows = read_rows(args.input) if args.input else hotpotqa_training_rows(args.hotpotqa_train, args.length)
    stats = build_clue_data(rows, args.output, generator, rules, workers=args.workers,
                            max_context_chars=args.max_context_chars, max_reply_tokens=args.max_tokens)
    print(json.dumps(stats, indent=1))
    return 0 if stats.get("kept") else 1


if __name__ == "__main__":
    sys.exit(main())
