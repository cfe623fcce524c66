"""Document readers compared on real documents: speed, what each keeps, install size and licence.

    .venv/bin/python benchmarks/document_formats.py
    .venv/bin/python benchmarks/document_formats.py --docs /usr/share/doc --out /tmp/formats.json
    .venv/bin/python benchmarks/document_formats.py --formats html docx --max-files 20

The documents are the ones Debian packages install under /usr/share/doc, written by those
projects (PDF manuals, HTML manuals, Markdown READMEs; gzipped ones unpacked in memory), at most
`--max-files` of each format (the largest; HTML pages under 1 MB).
Debian ships no Word files, so the .docx inputs are made here from the HTML manuals (their
headings and paragraphs written with python-docx). Every candidate reads every file of its
format in this one process, one after another (the libraries are single-threaded), best of
`--repeats` timings per file.

Measured per candidate (all on the candidate's plain text output):
- pages/s (PDF) or files/s, and characters out;
- `hyphen_breaks`: words left split at a line end ("conver-\\nsion"), fewer is better;
- `glued_words`: share of words of 30 or more letters (spaces lost), fewer is better;
- `bigram_agreement`: share of the candidate's word pairs that the other candidates also
  give, averaged over them: a proxy for reading order (a scrambled order loses pairs);
- `running_lines`: share of pages whose first or last line recurs on many pages (headers,
  footers, page numbers) in the raw output;
- HTML: `nav_kept` (texinfo's "Next:/Previous:" bars kept) and `headings` found;
  Markdown: headings found and whether their offsets in the file are known;
- install size of the candidate's own package folders, and its licence (from its metadata).
Writes results/benchmarks/document-formats/formats.json (`--out` to write elsewhere).
"""

from __future__ import annotations

import argparse
import gzip
import importlib.metadata as metadata
import io
import json
import os
import platform
import re
import statistics
import time
from collections import Counter
from pathlib import Path

WORD = re.compile(r"[A-Za-z]+")
DIGITS = re.compile(r"\d+")


# ---------------------------------------------------------------------------------------------- readers
def pdf_pypdfium2(data: bytes) -> list[str]:
    import pypdfium2

    pdf = pypdfium2.PdfDocument(data)
    pages = [pdf[index].get_textpage().get_text_range().replace("\r\n", "\n") for index in range(len(pdf))]
    pdf.close()
    return pages


def pdf_pypdf(data: bytes) -> list[str]:
    import pypdf

    return [page.extract_text() or "" for page in pypdf.PdfReader(io.BytesIO(data)).pages]


def pdf_pdfminer(data: bytes) -> list[str]:
    from pdfminer.high_level import extract_text

    return extract_text(io.BytesIO(data)).split("\f")[:-1] or [""]


def pdf_pdfplumber(data: bytes) -> list[str]:
    import pdfplumber

    with pdfplumber.open(io.BytesIO(data)) as pdf:
        return [page.extract_text() or "" for page in pdf.pages]


def html_selectolax(data: bytes) -> tuple[str, int]:
    from memorag.documents.html import decode_html, read_html

    extracted = read_html(decode_html(data, "page.html"))
    return extracted.text, len(extracted.headings)


def html_bs4_lxml(data: bytes) -> tuple[str, int]:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(data, "lxml")
    for tag in soup(["script", "style", "nav", "noscript"]):
        tag.decompose()
    return soup.get_text("\n"), len(soup.find_all(re.compile("^h[1-6]$")))


def html_bs4_parser(data: bytes) -> tuple[str, int]:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(data, "html.parser")
    for tag in soup(["script", "style", "nav", "noscript"]):
        tag.decompose()
    return soup.get_text("\n"), len(soup.find_all(re.compile("^h[1-6]$")))


def html_trafilatura(data: bytes) -> tuple[str, int]:
    import trafilatura

    text = trafilatura.extract(data.decode("utf-8", "replace"), output_format="markdown", include_tables=True,
                               include_formatting=True) or ""
    return text, sum(1 for line in text.splitlines() if line.startswith("#"))


def md_markdown_it(text: str) -> tuple[int, bool]:
    from memorag.documents.markdown import read_markdown

    return len(read_markdown(text).headings), True


def md_mistune(text: str) -> tuple[int, bool]:
    import mistune

    tokens = mistune.create_markdown(renderer=None)(text)
    return sum(1 for token in tokens if token["type"] == "heading"), False  # its tokens carry no source offsets


def docx_python_docx(data: bytes) -> tuple[str, int]:
    from memorag.documents.docx import read_docx

    extracted = read_docx(data, "file.docx")
    return extracted.text, len(extracted.headings)


def docx_docx2txt(data: bytes) -> tuple[str, int]:
    import docx2txt

    return docx2txt.process(io.BytesIO(data)), 0  # plain text: headings are not told from paragraphs


CANDIDATES = {
    "pdf": {"pypdfium2": (pdf_pypdfium2, "pypdfium2"), "pypdf": (pdf_pypdf, "pypdf"),
            "pdfminer.six": (pdf_pdfminer, "pdfminer.six"), "pdfplumber": (pdf_pdfplumber, "pdfplumber")},
    "html": {"selectolax": (html_selectolax, "selectolax"), "bs4+lxml": (html_bs4_lxml, "beautifulsoup4"),
             "bs4+html.parser": (html_bs4_parser, "beautifulsoup4"),
             "trafilatura": (html_trafilatura, "trafilatura")},
    "markdown": {"markdown-it-py": (md_markdown_it, "markdown-it-py"), "mistune": (md_mistune, "mistune")},
    "docx": {"python-docx": (docx_python_docx, "python-docx"), "docx2txt": (docx_docx2txt, "docx2txt")},
}


# ---------------------------------------------------------------------------------------------- inputs
def find_inputs(root: Path, max_files: int) -> dict[str, list[tuple[str, bytes]]]:
    def read(path: Path) -> bytes:
        data = path.read_bytes()
        return gzip.decompress(data) if path.suffix == ".gz" else data

    found: dict[str, list[tuple[str, bytes]]] = {"pdf": [], "html": [], "markdown": []}
    for path in sorted(root.rglob("*")):
        name = path.name.removesuffix(".gz")
        if not path.is_file() or path.is_symlink():
            continue
        if name.endswith(".pdf"):
            found["pdf"].append((str(path), read(path)))
        elif name.endswith(".html") and 2000 < path.stat().st_size < 1_000_000:  # Node's 8 MB all-in-one page left out
            found["html"].append((str(path), read(path)))
        elif name.endswith(".md"):
            found["markdown"].append((str(path), read(path)))
    for kind in found:
        found[kind] = sorted(found[kind], key=lambda item: -len(item[1]))[:max_files]
    found["docx"] = [(f"{name} (as .docx)", html_to_docx(data)) for name, data in found["html"]]
    return found


def html_to_docx(data: bytes) -> bytes:
    """A Word file with the page's headings (as Heading styles), paragraphs and tables."""
    import docx
    from selectolax.lexbor import LexborHTMLParser

    document = docx.Document()
    tree = LexborHTMLParser(data)
    for node in tree.css("h1, h2, h3, p, pre, li, table"):
        text = " ".join((node.text(deep=True) or "").split())
        if not text:
            continue
        if node.tag in ("h1", "h2", "h3"):
            document.add_heading(text, level=int(node.tag[1]))
        elif node.tag == "table":
            rows = node.css("tr")
            cells = [[" ".join(cell.text().split()) for cell in row.css("td, th")] for row in rows]
            width = max((len(row) for row in cells), default=0)
            if width:
                table = document.add_table(rows=len(cells), cols=width)
                for row, values in zip(table.rows, cells):
                    for cell, value in zip(row.cells, values):
                        cell.text = value
        else:
            document.add_paragraph(text)
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


# ---------------------------------------------------------------------------------------------- measures
def timed(function, argument, repeats: int):
    best, result = float("inf"), None
    for _ in range(repeats):
        started = time.perf_counter()
        result = function(argument)
        best = min(best, time.perf_counter() - started)
    return best, result


def bigrams(text: str) -> Counter:
    words = [word.lower() for word in WORD.findall(text)]
    return Counter(zip(words, words[1:]))


def running_share(pages: list[str]) -> float:
    if len(pages) < 4:
        return 0.0
    ends = Counter()
    for page in pages:
        lines = [line.strip() for line in page.strip().split("\n") if line.strip()] or [""]
        ends.update({("first", DIGITS.sub("#", lines[0])), ("last", DIGITS.sub("#", lines[-1]))})
    least = max(3, len(pages) // 20)
    recurring = {key for key, count in ends.items() if key[1] and count >= least}
    hit = 0
    for page in pages:
        lines = [line.strip() for line in page.strip().split("\n") if line.strip()] or [""]
        hit += ("first", DIGITS.sub("#", lines[0])) in recurring or ("last", DIGITS.sub("#", lines[-1])) in recurring
    return hit / len(pages)


def text_measures(text: str) -> dict:
    words = WORD.findall(text)
    return {"chars": len(text), "hyphen_breaks": len(re.findall(r"[a-z]-\n[a-z]", text)),
            "glued_words": round(sum(len(word) >= 30 for word in words) / max(1, len(words)), 5)}


def package_facts(distribution: str) -> dict:
    """Licence and the size of the distribution's own installed files."""
    dist = metadata.distribution(distribution)
    licence = dist.metadata.get("License-Expression") or dist.metadata.get("License") or ""
    if not licence or len(licence) > 60:
        classifiers = [c.split(" :: ")[-1] for c in dist.metadata.get_all("Classifier") or [] if c.startswith("License")]
        licence = ", ".join(classifiers) or licence[:60]
    size = 0
    for file in dist.files or []:
        path = Path(dist.locate_file(file))
        if path.is_file():
            size += path.stat().st_size
    return {"version": dist.version, "licence": licence, "install_mb": round(size / 1e6, 1)}


def run_format(kind: str, inputs: list[tuple[str, bytes]], repeats: int) -> dict:
    rows, outputs = {}, {}
    for name, (function, distribution) in CANDIDATES[kind].items():
        seconds, pages, chars, errors, headings, measures, offsets = 0.0, 0, 0, 0, 0, Counter(), True
        texts, running = [], []
        for _, data in inputs:
            argument = data.decode("utf-8", "replace") if kind == "markdown" else data
            try:
                took, result = timed(function, argument, repeats)
            except Exception:  # a reader that fails on a file counts it, and goes on
                errors += 1
                texts.append("")
                continue
            seconds += took
            if kind == "pdf":
                pages += len(result)
                running.append(running_share(result))
                text = "\n\n".join(result)
            elif kind == "markdown":
                headings += result[0]
                offsets = offsets and result[1]
                text = ""
            else:
                text, found = result
                headings += found
            texts.append(text)
            if text:
                chars += len(text)
                measures.update({key: value for key, value in text_measures(text).items() if key != "chars"})
        files = len(inputs) - errors
        row = {"files": files, "errors": errors, "seconds": round(seconds, 3),
               "files_per_s": round(files / seconds, 1) if seconds else None, **package_facts(distribution)}
        if kind == "pdf":
            row.update(pages=pages, pages_per_s=round(pages / seconds, 1), running_lines=round(statistics.mean(running), 3))
        if kind != "markdown":
            row.update(chars=chars, hyphen_breaks=measures["hyphen_breaks"],
                       glued_words=round(measures["glued_words"] / max(1, files), 5))
        if kind in ("html", "docx", "markdown"):
            row["headings"] = headings
        if kind == "markdown":
            row["heading_offsets"] = offsets
        if kind == "html":
            row["nav_kept"] = sum("Previous:" in text for text in texts)
        rows[name], outputs[name] = row, texts
    if kind != "markdown":
        for name, texts in outputs.items():
            shares = []
            for other, other_texts in outputs.items():
                if other == name:
                    continue
                for mine, theirs in zip(texts, other_texts):
                    pairs, other_pairs = bigrams(mine), bigrams(theirs)
                    if pairs and other_pairs:
                        shares.append(sum((pairs & other_pairs).values()) / sum(pairs.values()))
            rows[name]["bigram_agreement"] = round(statistics.mean(shares), 3) if shares else None
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", default="/usr/share/doc", help="where to find documents (default: /usr/share/doc)")
    parser.add_argument("--repeats", type=int, default=1, help="timings per file; the best counts (default: 1)")
    parser.add_argument("--max-files", type=int, default=40, help="the largest files of each format (default: 40)")
    parser.add_argument("--formats", nargs="+", default=list(CANDIDATES), choices=list(CANDIDATES))
    parser.add_argument("--out", default="results/benchmarks/document-formats/formats.json")
    args = parser.parse_args()
    inputs = find_inputs(Path(args.docs), args.max_files)
    results = {"machine": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
               "inputs": {kind: [name for name, _ in files] for kind, files in inputs.items()}, "formats": {}}
    for kind in args.formats:
        results["formats"][kind] = run_format(kind, inputs[kind], args.repeats)
        columns = sorted({key for row in results["formats"][kind].values() for key in row})
        print(f"\n{kind} ({len(inputs[kind])} files)")
        print("candidate".ljust(16) + "".join(column[:14].rjust(15) for column in columns))
        for name, row in results["formats"][kind].items():
            print(name.ljust(16) + "".join(str(row.get(column, "")).rjust(15)[:15] for column in columns), flush=True)
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(results, indent=1) + "\n")  # after each format: a long run keeps its part
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
