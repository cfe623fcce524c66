"""Hostile documents against the readers: peak memory and time of reading each crafted file,
with a good Markdown file beside it, through `memorag.documents.read_paths`.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/hostile_documents.py --out results/benchmarks/NAME/after.json
    PYTHONPATH=$PWD .venv/bin/python benchmarks/hostile_documents.py --code /tmp/old-tree --out before.json

Each case is written to a new folder under --work (deleted after), then read in a fresh Python
(`--code` first on its path, the current folder not on it) under `prlimit --as` (--cap-gb, default 6) and `timeout`
(--timeout, default 120 s), so a case that would take the machine down is stopped instead.
Peak memory is that process's peak resident set (its children's included, as `wait4` reports
it; a Python holding the parsers and memorag's document types takes about 200 MB of it), and
where the reader process exists its own peak (`ReaderPool.peak_mb`, sampled); the record holds
the exit status, the time, the documents read, the refusals and the last line of stderr.
The files come from memorag/benchmarking/hostile_documents.py, as in the tests.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from memorag.benchmarking import hostile_documents as hostile

GB, MB = 1_000_000_000, 1_000_000
_READER = """
import json, sys
from memorag.documents import ReadOptions, read_paths
options = ReadOptions(**json.loads(sys.argv[2]))
result = read_paths([sys.argv[1]], options)
record = {"documents": [d.id for d in result.documents], "problems": [str(p) for p in result.problems]}
try:
    from memorag.documents.sandbox import pool_for
    record["reader_peak_rss_mb"] = round(pool_for(options.memory_mb).peak_mb)
except ImportError:
    pass  # before the reader process existed
print(json.dumps(record))
"""


def _cases() -> dict:
    """name -> (function writing the case into a folder, read options)."""
    def file(name, build):
        return lambda folder: (folder / name).write_bytes(build())

    def links(folder):
        os.symlink("/etc/passwd", folder / "passwd.txt")
        os.symlink("/dev/zero", folder / "zero.txt")

    def many(folder, count=40_000):
        for n in range(count):
            (folder / f"note{n:05d}.txt").write_text(f"note {n}\n")

    def big_html(folder):
        hostile.write_one_line_html(folder / "long.html")

    def sparse(folder):
        with open(folder / "big.txt", "wb") as out:
            out.truncate(GB)

    cyrillic = "<html><head><meta charset=\"windows-1251\"></head><body><p>Привет, мир</p></body></html>"
    return {
        "docx paragraphs 1.2 GB": (file("bomb.docx", lambda: hostile.paragraphs_docx(int(1.2 * GB))), {}),
        "docx paragraphs 2.5 GB": (file("bomb.docx", lambda: hostile.paragraphs_docx(int(2.5 * GB))), {}),
        "docx paragraphs 100 MB": (file("bomb.docx", lambda: hostile.paragraphs_docx(100 * MB)), {}),
        "docx whitespace 2.5 GB": (file("space.docx", lambda: hostile.whitespace_docx(int(2.5 * GB))), {}),
        "docx gridSpan": (file("grid.docx", hostile.grid_span_docx), {}),
        "docx billion laughs": (file("laughs.docx", hostile.laughs_docx), {}),
        "docx 60,000 members": (file("many.docx", lambda: hostile.many_members_docx(60_000)), {}),
        "docx truncated": (file("cut.docx", lambda: hostile.paragraphs_docx(2 * MB)[:3000]), {}),
        "docx truncated part": (file("cut.docx", hostile.truncated_docx), {}),
        "pdf stream 900 MB x4 pages": (file("bomb.pdf", lambda: hostile.stream_bomb_pdf(900 * MB, pages=4)), {}),
        "pdf stream 2.5 GB": (file("bomb.pdf", lambda: hostile.stream_bomb_pdf(int(2.5 * GB))), {}),
        "pdf page tree 10^6": (file("tree.pdf", hostile.page_tree_pdf), {}),
        "pdf nested arrays": (file("nested.pdf", hostile.nested_pdf), {}),
        "pdf outline loop": (file("outline.pdf", hostile.outline_loop_pdf), {}),
        "html formatting bomb": (file("bomb.html", hostile.formatting_bomb_html), {}),
        "html nested 200,000": (file("deep.html", hostile.nested_html), {}),
        "html 190 MB one line": (big_html, {}),
        "html windows-1251": (file("ru.html", lambda: cyrillic.encode("cp1251")), {}),
        "text 1 GB sparse, max 2000 MB": (sparse, {"max_mb": 2000}),
        "markdown naming %PDF-1.7": (file("pdf-notes.md", lambda: b"# Notes\n\nFiles start with %PDF-1.7.\n"), {}),
        "text starting GIF89a": (file("gif.txt", lambda: b"GIF89a is the animated format.\n"), {}),
        "fifo doc.txt": (lambda folder: os.mkfifo(folder / "doc.txt"), {}),
        "links to /etc/passwd, /dev/zero": (links, {}),
        "10,000 small files": (lambda folder: many(folder, 10_000), {}),
        "40,000 small files": (many, {}),
    }


def _shortened(record: dict) -> dict:
    """`record` with a long list of documents cut to its count and first names."""
    documents = record.get("documents", [])
    if len(documents) > 20:
        record["documents"] = documents[:5] + [f"... {len(documents):,} documents in all"]
    return record


def run_case(write, options: dict, args) -> dict:
    folder = Path(tempfile.mkdtemp(dir=args.work))
    try:
        (folder / "good.md").write_text("# Good\n\nThe otter keeps the key.\n")
        write(folder)
        env = {**os.environ, "PYTHONPATH": args.code}
        command = ["timeout", "-k", "5", str(args.timeout), "prlimit", f"--as={int(args.cap_gb * 1024 ** 3)}", "--",
                   sys.executable, "-P", "-c", _READER, str(folder), json.dumps(options)]
        start = time.perf_counter()
        process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out, err = process.communicate()
        seconds = time.perf_counter() - start
        peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        lines = err.decode(errors="replace").strip().splitlines()
        record = {"exit": process.returncode, "seconds": round(seconds, 2), "peak_rss_mb_so_far": round(peak_kb / 1024),
                  "stderr_last": lines[-1][:300] if lines else ""}
        if process.returncode == 0:
            record.update(_shortened(json.loads(out.decode().strip().splitlines()[-1])))
        return record
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--code", default=str(Path(__file__).resolve().parents[1]),
                        help="the tree whose memorag is measured (default: this one)")
    parser.add_argument("--out", required=True, help="JSON file to write (rewritten after each case)")
    parser.add_argument("--only", action="append", default=[], help="run only cases whose name holds this")
    parser.add_argument("--timeout", type=int, default=120, help="seconds before a case is killed (default: 120)")
    parser.add_argument("--cap-gb", type=float, default=6.0, help="address-space cap of a case in GiB (default: 6)")
    parser.add_argument("--work", default=tempfile.gettempdir(), help="where the cases' folders are written")
    args = parser.parse_args()
    results = {"machine": platform.processor() or platform.machine(), "cpus": os.cpu_count(), "code": args.code,
               "cap_gb": args.cap_gb, "timeout_s": args.timeout, "cases": {}}
    for name, (write, options) in _cases().items():
        if args.only and not any(part in name for part in args.only):
            continue
        # each case in its own child of a fresh runner, so RUSAGE_CHILDREN's peak is this case's
        pid = os.fork()
        if pid == 0:
            record = run_case(write, options, args)
            Path(args.out + ".case").write_text(json.dumps(record))
            os._exit(0)
        os.waitpid(pid, 0)
        record = json.loads(Path(args.out + ".case").read_text())
        record["peak_rss_mb"] = record.pop("peak_rss_mb_so_far")
        results["cases"][name] = record
        print(name, json.dumps(record)[:400], flush=True)
        Path(args.out).write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n")
    Path(args.out + ".case").unlink(missing_ok=True)


if __name__ == "__main__":
    main()
