"""What chunking a PDF page by page costs retrieval: the same PDFs chunked over page breaks (as
before) and within pages (as now), searched with the rag mode's dense retriever.

    .venv/bin/python benchmarks/page_chunks.py
    .venv/bin/python benchmarks/page_chunks.py --pdfs /usr/share/doc/libtasn1-doc/libtasn1.pdf --sentences 100

The PDFs are manuals Debian installs (default: libtasn1's, bzip2's, shared-mime-info's spec;
`apt-get install libtasn1-doc bzip2-doc shared-mime-info`; a `.gz` is unpacked in memory first). From each, `--sentences`
sentences of 12 to 60 words are drawn (seeded, file order kept); a sentence's first 60% of words is
the query, and the sentence is found when the top `--k` chunks (the pipeline's `hits_per_query`)
hold it whole. Chunks are the pipeline's (`chunk_tokens` 160, `overlap_tokens` 24, the memory
model's tokenizer) and the retriever is the embedded all-MiniLM-L6-v2. Per PDF and chunking:
chunks, mean tokens a chunk, sentences found, the share of the found ones cited by a single page,
and the sentences that run over a page break. Writes results/benchmarks/page-chunks/page_chunks.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import random
import re
import sys
import tempfile
from pathlib import Path

DEFAULT_PDFS = ("/usr/share/doc/libtasn1-doc/libtasn1.pdf", "/usr/share/doc/bzip2/manual.pdf.gz",
                "/usr/share/doc/shared-mime-info/shared-mime-info-spec.pdf")
OUT = Path(__file__).resolve().parents[1] / "results" / "benchmarks" / "page-chunks" / "page_chunks.json"


def read_pdf(path: Path):
    from memorag.documents import read_file

    if path.suffix != ".gz":
        return read_file(path)
    with tempfile.TemporaryDirectory() as folder:
        unpacked = Path(folder) / path.stem
        unpacked.write_bytes(gzip.decompress(path.read_bytes()))
        return read_file(unpacked)


def sentences(text: str, count: int, seed: int) -> list[tuple[int, int]]:
    """`count` sentences' (start, end) offsets in `text`, 12 to 60 words each, drawn at random, in file order."""
    spans = [(match.start(), match.end()) for match in re.finditer(r"[A-Z][^.!?]*[.!?]", text)]
    spans = [(start, end) for start, end in spans if 12 <= len(text[start:end].split()) <= 60]
    return sorted(random.Random(seed).sample(spans, min(count, len(spans))))


def measure(document, spans, tokenizer, retriever_factory, k: int, by_page: bool) -> dict:
    from memorag.pipeline.types import PipelineConfig
    from memorag.retrieval.chunking import chunk_documents

    config = PipelineConfig()
    chunked = document if by_page else dataclasses.replace(document, page_starts=[])
    chunks = chunk_documents([chunked], tokenizer, config.chunk_tokens, config.overlap_tokens)
    retriever = retriever_factory()
    retriever.add(chunks)
    by_id = {chunk.id: chunk for chunk in chunks}
    queries = [" ".join(document.text[start:end].split()[: max(1, int(0.6 * len(document.text[start:end].split())))])
               for start, end in spans]
    found = one_page = 0
    for (start, end), hits in zip(spans, retriever.search(queries, k), strict=True):
        holding = [by_id[hit.chunk_id] for hit in hits
                   if by_id[hit.chunk_id].start_char <= start and end <= by_id[hit.chunk_id].end_char]
        if holding:
            found += 1
            location = document.locate(holding[0].start_char, holding[0].end_char)
            one_page += location.page == location.last_page
    crossing = sum(1 for start, end in spans if document.locate(start, end).page != document.locate(start, end).last_page)
    return {"chunks": len(chunks), "mean_chunk_tokens": round(sum(c.num_tokens for c in chunks) / len(chunks), 1),
            "sentences": len(spans), "found": found, "found_share": round(found / len(spans), 4),
            "found_cited_by_one_page": one_page, "sentences_over_a_page_break": crossing}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pdfs", nargs="+", default=list(DEFAULT_PDFS))
    parser.add_argument("--sentences", type=int, default=200, help="sentences drawn from each PDF (default 200)")
    parser.add_argument("--k", type=int, default=6, help="hits per query (the pipeline's hits_per_query, 6)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()

    from memorag.pipeline import MemoRAG
    from memorag.retrieval.dense import DenseRetriever
    from memorag.runtime.embedded import EMBEDDED_EMBEDDER

    rag = MemoRAG()  # the pipeline's own tokenizer and embedder, as `memorag ask` loads them
    tokenizer, embedder = rag.tokenizer, rag.embedder
    records = []
    for name in args.pdfs:
        document = read_pdf(Path(name))
        spans = sentences(document.text, args.sentences, args.seed)
        row = {"pdf": name, "pages": len(document.page_starts), "characters": len(document.text)}
        for label, by_page in (("over_pages", False), ("by_page", True)):
            row[label] = measure(document, spans, tokenizer, lambda: DenseRetriever(embedder, EMBEDDED_EMBEDDER),
                                 args.k, by_page)
        records.append(row)
        print(json.dumps(row), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    machine = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                    if line.startswith("model name")), "unknown")
    args.out.write_text(json.dumps({"command": " ".join(["benchmarks/page_chunks.py", *sys.argv[1:]]),
                                    "machine": machine, "k": args.k, "seed": args.seed, "sentences_per_pdf": args.sentences,
                                    "records": records}, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
