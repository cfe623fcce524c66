"""One decoding step of the embedded generator over long prompts, through two trees of the package in one run:

    git worktree add /tmp/before REV
    python benchmarks/generator_step.py --tree before=/tmp/before --tree after=. --rounds 2 --out steps.jsonl

In a process of its own per tree (PYTHONPATH set to the tree, `--threads` torch threads), the embedded LM as
`LocalGenerator.from_pretrained("embedded")` loads it (bfloat16 where the CPU has the instructions) reads
`--rows` prompts of about `--prompt-tokens` random tokens each through the tree's `LanguageModelRows` (the
generator's rows of the one decode loop; the seconds a prompt's prefill takes are recorded), then takes 3
untimed steps and `--steps` timed ones: ms a step, for each row count. Trees run in the order given, then
(`--rounds 2`) in the reverse order; the load average is recorded before each run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

WORK = """
import json, sys, time, torch
from memorag.generation.batched import LanguageModelRows
from memorag.generation.local import LocalGenerator
rows_counts, prompt_tokens, steps, threads = json.loads(sys.argv[1])
torch.set_num_threads(threads)
generator = LocalGenerator.from_pretrained("embedded")
out = {"dtype": str(next(generator.model.parameters()).dtype)}
for count in rows_counts:
    rows = LanguageModelRows(generator.model)
    with torch.inference_mode():
        start = time.perf_counter()
        rows.prefill([torch.randint(100, 40000, (prompt_tokens + 10 * i,), generator=torch.Generator().manual_seed(i))
                      .tolist() for i in range(count)], [steps + 3] * count)
        out[f"prefill_s_per_prompt_{count}"] = round((time.perf_counter() - start) / count, 2)
        for _ in range(3):
            rows.decode_step([5] * count)
        start = time.perf_counter()
        for _ in range(steps):
            rows.decode_step([5] * count)
        out[f"ms_per_step_{count}"] = round((time.perf_counter() - start) / steps * 1000, 1)
print(json.dumps(out))
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The embedded generator's decoding step through two trees of the "
                                                 "package, in one run.")
    parser.add_argument("--tree", action="append", required=True, metavar="NAME=PATH",
                        help="a tree of the package to run (repeatable), e.g. before=/tmp/before")
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 8], help="rows decoded together (default 1 8)")
    parser.add_argument("--prompt-tokens", type=int, default=4000, help="tokens of each prompt (default 4000)")
    parser.add_argument("--steps", type=int, default=20, help="timed steps (default 20)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds, the trees' order reversed each round")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    parser.add_argument("--out", type=Path, required=True, help="JSON lines, one record per run")
    args = parser.parse_args(argv)
    trees = [(spec.split("=", 1)[0], Path(spec.split("=", 1)[1]).resolve()) for spec in args.tree]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    settings = json.dumps([args.rows, args.prompt_tokens, args.steps, args.threads])
    with open(args.out, "a", encoding="utf-8") as out:
        for round_index in range(args.rounds):
            for name, tree in trees if round_index % 2 == 0 else trees[::-1]:
                load = os.getloadavg()[0]
                env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": str(args.threads)}
                done = subprocess.run([sys.executable, "-c", WORK, settings], env=env, cwd=tree, capture_output=True,
                                      text=True, check=True)
                record = {"tree": name, "path": str(tree), "round": round_index, "load_before": round(load, 2),
                          "machine": platform.processor() or platform.machine(), "prompt_tokens": args.prompt_tokens,
                          **json.loads(done.stdout.strip().splitlines()[-1])}
                out.write(json.dumps(record) + "\n")
                out.flush()
                print(json.dumps(record), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
