"""Time of a fresh `make setup`: the current Makefile (uv from the lock) against an older one (pip).

    python benchmarks/setup_time.py                       # 2 rounds, against the pip setup of 67f4846
    python benchmarks/setup_time.py --rounds 1 --old-ref HEAD~1

Each run builds a new environment in a temporary folder with empty download caches of its
own (PIP_CACHE_DIR, UV_CACHE_DIR), as a new user's first `make setup` would: the packages are
fetched from the registry every time. The old Makefile runs in a `git worktree` of
`--old-ref`; the rounds alternate old and new so that both see the same network. Prints a
table (best and every run, seconds) and writes JSON to results/benchmarks/setup_time.json
(or --out). Run it from a checkout whose `python3` can make venvs; needs git.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from memorag.benchmarking.machine import load_average, machine_record

ROOT = Path(__file__).resolve().parents[1]


def timed_setup(tree: Path, scratch: Path) -> float:
    """Seconds for `make setup` in `tree` into a new venv under `scratch`, with empty caches."""
    env = dict(os.environ, PIP_CACHE_DIR=str(scratch / "pip-cache"), UV_CACHE_DIR=str(scratch / "uv-cache"))
    start = time.perf_counter()
    subprocess.run(["make", "--no-print-directory", "setup", f"VENV={scratch / 'venv'}"], cwd=tree, env=env,
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2, help="runs of each setup (default 2; the best counts)")
    parser.add_argument("--old-ref", default="67f4846", help="the git revision whose Makefile is the baseline")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "benchmarks" / "setup_time.json")
    args = parser.parse_args()

    load_before = load_average()
    old_tree = Path(tempfile.mkdtemp(prefix="memorag-old-"))
    subprocess.run(["git", "worktree", "add", "--detach", str(old_tree), args.old_ref], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)
    runs: dict[str, list[float]] = {"old": [], "new": []}
    try:
        for round_number in range(args.rounds):
            for name, tree in (("old", old_tree), ("new", ROOT)):
                scratch = Path(tempfile.mkdtemp(prefix=f"memorag-setup-{name}-"))
                try:
                    seconds = timed_setup(tree, scratch)
                finally:
                    shutil.rmtree(scratch, ignore_errors=True)
                runs[name].append(round(seconds, 1))
                print(f"round {round_number + 1}: {name} setup {seconds:.1f} s", flush=True)
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(old_tree)], cwd=ROOT, check=False)

    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    result = {
        "date": datetime.date.today().isoformat(),
        "old": {"ref": args.old_ref, "how": "pip, resolved on the day", "seconds": runs["old"],
                "best": min(runs["old"])},
        "new": {"ref": head.strip(), "how": "pip for torch, then uv from requirements/*.txt", "seconds": runs["new"],
                "best": min(runs["new"])},
        "caches": "empty pip and uv download caches for every run",
        "machine": machine_record(load_before),
    }
    print(f"\n| setup | best of {args.rounds} (s) | runs (s) |\n|---|---|---|")
    for name in ("old", "new"):
        print(f"| {name} ({result[name]['how']}) | {result[name]['best']} | {', '.join(map(str, runs[name]))} |")
    print(f"speed-up: {result['old']['best'] / result['new']['best']:.1f}x")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
