"""Reading a 200-page PDF against memorizing it: extraction pages per second and its share of
the whole `memorize`, timed in one process.

    .venv/bin/python benchmarks/document_extraction.py --threads 2
    .venv/bin/python benchmarks/document_extraction.py --pdf manual.pdf --pages 200 --ratio 32

The PDF is the first `--pages` pages of `--pdf` (default: the Valgrind manual Debian's valgrind
package installs, 397 pages; a .gz is unpacked), copied into a new PDF with pypdfium2. Extraction
is `memorag.documents.read_file` on it (best of `--repeats`); memorize is `MemoRAG.memorize` on the
same file with the embedded models (offline, loaded before the clock starts), which reads the file
again (its "read" stage), cuts chunks, builds the memory and the dense index. The share is extraction seconds over memorize seconds. Writes
results/benchmarks/document-extraction/extraction.json (`--out` to write elsewhere).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import tempfile
import time
from pathlib import Path

DEFAULT_PDF = "/usr/share/doc/valgrind/valgrind_manual.pdf.gz"


def first_pages(source: Path, pages: int, target: Path) -> int:
    import pypdfium2

    data = source.read_bytes()
    data = gzip.decompress(data) if source.suffix == ".gz" else data
    original = pypdfium2.PdfDocument(data)
    copy = pypdfium2.PdfDocument.new()
    count = min(pages, len(original))
    copy.import_pages(original, list(range(count)))
    copy.save(str(target))
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pdf", default=DEFAULT_PDF, help=f"the PDF to take pages from (default: {DEFAULT_PDF})")
    parser.add_argument("--pages", type=int, default=200, help="pages to take (default: 200)")
    parser.add_argument("--ratio", type=int, default=32, help="memory compression ratio (default: 32, which the "
                                                              "embedded model needs for ~150K tokens)")
    parser.add_argument("--threads", type=int, default=2, help="CPU threads (default: 2)")
    parser.add_argument("--repeats", type=int, default=3, help="extraction timings; the best counts (default: 3)")
    parser.add_argument("--no-memorize", action="store_true", help="time the extraction only")
    parser.add_argument("--out", default="results/benchmarks/document-extraction/extraction.json")
    args = parser.parse_args()

    from memorag.documents import read_file
    from memorag.pipeline import MemoRAG

    with tempfile.TemporaryDirectory() as folder:
        pdf = Path(folder) / "manual-200.pdf"
        pages = first_pages(Path(args.pdf), args.pages, pdf)
        extraction = []
        for _ in range(args.repeats):
            started = time.perf_counter()
            document = read_file(pdf)
            extraction.append(time.perf_counter() - started)
        if args.no_memorize:
            best = min(extraction)
            result = {"pdf": args.pdf, "pages": pages, "chars": len(document.text),
                      "machine": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
                      "extraction_seconds": [round(s, 3) for s in extraction],
                      "extraction_pages_per_s": round(pages / best, 1)}
            print(f"{pages} pages, {len(document.text):,} characters: extraction {best:.2f} s "
                  f"({result['extraction_pages_per_s']} pages/s), best of {args.repeats}")
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
            return
        rag = MemoRAG(threads=args.threads, memory={"ratios": [args.ratio]}, device="cpu")
        rag.check_models()
        _ = rag.tokenizer, rag.memory_model, rag.embedder  # loaded before the clock starts: memorize's work only
        started = time.perf_counter()
        report = rag.memorize(pdf, show_progress=False)
        memorize_seconds = time.perf_counter() - started
    best = min(extraction)
    result = {
        "pdf": args.pdf, "pages": pages, "chars": len(document.text), "threads": args.threads,
        "machine": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
        "extraction_seconds": [round(s, 3) for s in extraction], "extraction_pages_per_s": round(pages / best, 1),
        "memorize_seconds": round(memorize_seconds, 2), "memorize_timings": report.timings,
        "memory_tokens": report.memory_tokens, "num_chunks": report.num_chunks, "ratio": args.ratio,
        "extraction_share_of_memorize": round(best / memorize_seconds, 5),
    }
    print(f"{pages} pages, {len(document.text):,} characters, {report.memory_tokens:,} tokens memorized")
    print(f"extraction: {best:.2f} s ({result['extraction_pages_per_s']} pages/s), best of {args.repeats}")
    print(f"memorize:   {memorize_seconds:.1f} s ({', '.join(f'{k} {v:.1f} s' for k, v in report.timings.items())})")
    print(f"extraction share of memorize: {100 * result['extraction_share_of_memorize']:.2f}%")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
