"""Lite's gists of a long text written by two trees of the package in one run (same machine, same hour):

    bible -f "Gen1:1-Deu34:12" > kjv-genesis-deuteronomy.txt
    git worktree add /tmp/before REV
    python benchmarks/lite_gists.py kjv-genesis-deuteronomy.txt --tree before=/tmp/before --tree after=. \\
        --generator embedded-base --out ab.jsonl

Each tree runs `memorag memorize TEXT --set mode=memorag-lite` (the embedded models, the command's defaults)
in a process of its own, with PYTHONPATH set to the tree and fresh gist-checkpoint and cache folders, so
every gist is written; `--windows N` first cuts the text after its N-th gist window (the mode's own
windows); `--generator` is passed to the command of every tree. Recorded per tree: the wall time of the
command, its peak resident memory, the load average before and after, the gists written (compared between
the trees) and the command's stderr tail. Trees run in the order given; `--rounds 2` runs them again in the
reverse order.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def cut_text(text: str, windows: int | None) -> str:
    """`text` up to the end of its `windows`-th gist window (all of it without a count)."""
    if windows is None:
        return text
    from transformers import AutoTokenizer

    from memorag.lite import GistSettings, gist_windows
    from memorag.retrieval.chunking import Document
    from memorag.runtime.embedded import resolve_lm

    cut = gist_windows([Document("text", text)], AutoTokenizer.from_pretrained(resolve_lm(None)),
                       GistSettings().window_tokens)
    return text[: cut[min(windows, len(cut)) - 1].end_char]


# `python -m memorag ARGS`, writing the process's own peak resident memory (kB) to the file named first
LAUNCH = """import resource, runpy, sys
peak = sys.argv.pop(1)
sys.argv[0] = "memorag"
try:
    runpy.run_module("memorag", run_name="__main__", alter_sys=True)
finally:
    open(peak, "w").write(str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))
"""


def run_tree(name: str, tree: Path, text_file: Path, threads: int, generator: str | None) -> dict:
    with tempfile.TemporaryDirectory(prefix=f"lite-gists-{name}-") as work:
        env = {**os.environ, "PYTHONPATH": str(tree.resolve()), "MEMORAG_CACHE": str(Path(work) / "cache"),
               "OMP_NUM_THREADS": str(threads)}
        peak_file = Path(work) / "peak_kb"
        command = [sys.executable, "-c", LAUNCH, str(peak_file), "memorize", str(text_file), "--out", str(Path(work) / "save"),
                   "--set", "mode=memorag-lite", "--set", f"lite.checkpoint_dir={Path(work) / 'gists'}",
                   "--threads", str(threads)] + (["--generator", generator] if generator else [])
        load_before = os.getloadavg()[0]
        start = time.perf_counter()
        done = subprocess.run(command, env=env, cwd=tree, capture_output=True, text=True)
        seconds = time.perf_counter() - start
        peak_kb = int(peak_file.read_text()) if peak_file.is_file() else None
        gists = [json.loads(line)["gist"] for path in sorted((Path(work) / "gists").glob("*.jsonl"))
                 for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return {"tree": name, "path": str(tree), "seconds": round(seconds, 1), "returncode": done.returncode,
            "gists": len(gists), "seconds_per_gist": round(seconds / max(len(gists), 1), 2),
            "peak_rss_mb": round(peak_kb / 1024) if peak_kb else None,
            "load_before": round(load_before, 2), "load_after": round(os.getloadavg()[0], 2),
            "gist_texts": gists, "stderr_tail": done.stderr[-1500:]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Lite's gists of a text written by two trees of the package, "
                                                 "in one run.")
    parser.add_argument("text", type=Path, help="the text file (e.g. the first five books of the KJV)")
    parser.add_argument("--tree", action="append", required=True, metavar="NAME=PATH",
                        help="a tree of the package to run (repeatable), e.g. before=/tmp/before")
    parser.add_argument("--windows", type=int, default=None, help="cut the text after this many gist windows")
    parser.add_argument("--rounds", type=int, default=1, help="run the trees this many times, alternating order")
    parser.add_argument("--threads", type=int, default=2, help="torch threads per run (default 2)")
    parser.add_argument("--generator", help="the command's --generator for every tree (default: its own default)")
    parser.add_argument("--out", type=Path, required=True, help="JSON lines, one record per run")
    args = parser.parse_args(argv)
    trees = [(spec.split("=", 1)[0], Path(spec.split("=", 1)[1])) for spec in args.tree]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="lite-gists-text-") as work:
        text_file = Path(work) / args.text.name
        text_file.write_text(cut_text(args.text.read_text(encoding="utf-8"), args.windows), encoding="utf-8")
        machine = {"machine": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
                   "text": str(args.text), "characters": len(text_file.read_text(encoding="utf-8")),
                   "windows": args.windows, "generator": args.generator}
        with open(args.out, "a", encoding="utf-8") as out:
            for round_index in range(args.rounds):
                for name, tree in trees if round_index % 2 == 0 else trees[::-1]:
                    record = {**machine, "round": round_index, **run_tree(name, tree, text_file, args.threads, args.generator)}
                    out.write(json.dumps(record, ensure_ascii=False) + "\n")
                    out.flush()
                    print(f"{name}: {record['gists']} gists in {record['seconds']} s "
                          f"({record['seconds_per_gist']} s a gist), exit {record['returncode']}, "
                          f"load {record['load_before']} -> {record['load_after']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
