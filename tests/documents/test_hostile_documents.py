"""Hostile documents: zip and Flate bombs, entity expansion, deep nesting, formatting bombs,
files that hang a parser, FIFOs and links out of the folder. Each is read in a folder beside a
good file by a new reader process whose peak memory is measured (`ReaderPool.peak_mb`):
the bad file is refused on one line naming it, within the memory and time limits, and the good
file is still read. The files are built in the tests
(memorag/benchmarking/hostile_documents.py); the heavy ones are marked slow.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from memorag.benchmarking import hostile_documents as hostile
from memorag.documents import ReadOptions, read_paths
from memorag.documents.sandbox import pool_for

GOOD = "# Good\n\nThe otter keeps the key.\n"


@dataclass
class Reading:
    documents: list[str]
    problems: list[str]
    peak_mb: float  # the reader processes' peak resident memory (VmHWM, sampled)
    seconds: float


def read_folder(folder: Path, **options) -> Reading:
    """`read_paths([folder], ReadOptions(**options))` in a new reader process: what it read, its peak memory, the time."""
    settings = ReadOptions(**options)
    pool = pool_for(settings.memory_mb)
    pool.close()
    pool.peak_mb = 0.0
    start = time.perf_counter()
    result = read_paths([folder], settings)
    seconds = time.perf_counter() - start
    pool.close()
    return Reading([d.id for d in result.documents], [str(p) for p in result.problems], pool.peak_mb, seconds)


def refused(folder: Path, name: str, *expected: str, memory_mb: int = 1024, seconds: float = 60.0,
            **options) -> str:
    """Read `folder` (with the good file) and check `name` is refused within the limits; its message."""
    (folder / "good.md").write_text(GOOD)
    reading = read_folder(folder, memory_mb=memory_mb, seconds=seconds, **options)
    assert reading.documents == ["good.md"], reading
    [message] = [problem for problem in reading.problems if problem.startswith(str(folder / name))]
    assert "\n" not in message and all(part in message for part in expected), message
    assert reading.peak_mb < memory_mb, reading
    assert reading.seconds < seconds + 60, reading  # the limit, and a reader process's start on a loaded machine
    return message


def test_a_docx_member_inflating_to_gigabytes_is_refused_before_it_is_inflated(tmp_path):
    (tmp_path / "bomb.docx").write_bytes(hostile.paragraphs_docx(2_000_000_000))
    refused(tmp_path, "bomb.docx", "cannot be read safely", "word/document.xml inflates 2,000 MB", "(limit 200)",
            "zip bomb", memory_mb=512, seconds=20)


def test_a_docx_of_many_parts_is_refused(tmp_path):
    (tmp_path / "many.docx").write_bytes(hostile.many_members_docx(12_000))
    refused(tmp_path, "many.docx", "holds 12,003 parts (limit 10,000)", memory_mb=512, seconds=20)


def test_a_docx_inflating_past_its_share_of_the_memory_limit_is_refused(tmp_path):
    (tmp_path / "long.docx").write_bytes(hostile.numbered_docx(400_000))
    refused(tmp_path, "long.docx", "its parts inflate to", "(limit 13 MB", "--read-memory-mb", memory_mb=256,
            seconds=20)


def test_entity_expansion_and_external_entities_are_refused_unread(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("the vault code is 4711")
    (tmp_path / "laughs.docx").write_bytes(hostile.laughs_docx())
    (tmp_path / "xxe.docx").write_bytes(hostile.external_entity_docx(str(secret)))
    (tmp_path / "good.md").write_text(GOOD)
    reading = read_folder(tmp_path, memory_mb=512, seconds=20)
    assert sorted(reading.documents) == ["good.md", "secret.txt"]
    for name in ("laughs.docx", "xxe.docx"):
        [message] = [problem for problem in reading.problems if problem.startswith(str(tmp_path / name))]
        assert "declares a DTD" in message, message
    assert reading.peak_mb < 512


def test_a_truncated_docx_part_loses_only_its_file(tmp_path):
    (tmp_path / "cut.docx").write_bytes(hostile.truncated_docx())
    refused(tmp_path, "cut.docx", "is not a readable Word file: damaged or truncated", "save it again",
            memory_mb=512, seconds=20)


def test_a_table_cell_spanning_millions_of_columns_is_refused(tmp_path):
    (tmp_path / "grid.docx").write_bytes(hostile.grid_span_docx())
    refused(tmp_path, "grid.docx", "a table cell spans 200,000,000 columns (limit 64)", memory_mb=512, seconds=20)


def test_a_parser_that_runs_past_the_time_limit_is_stopped(tmp_path):
    (tmp_path / "slow.docx").write_bytes(hostile.numbered_docx(400_000))  # python-docx: tens of seconds
    message = refused(tmp_path, "slow.docx", "took over the time limit (3 s)", "--read-seconds", memory_mb=1024,
                      seconds=3)
    assert "cannot be read safely" in message


def test_a_pdf_stream_inflating_past_the_memory_limit_is_refused(tmp_path):
    (tmp_path / "bomb.pdf").write_bytes(hostile.stream_bomb_pdf(600_000_000))
    refused(tmp_path, "bomb.pdf", "cannot be read safely", "memory limit (512 MB)", "--read-memory-mb",
            memory_mb=512, seconds=60)


def test_a_pdf_page_tree_of_a_million_pages_is_refused_before_any_page_loads(tmp_path):
    (tmp_path / "tree.pdf").write_bytes(hostile.page_tree_pdf())
    refused(tmp_path, "tree.pdf", "page tree claims 1,000,000 pages (limit 20,000)", memory_mb=512, seconds=20)


@pytest.mark.parametrize("name, build", [("nested.pdf", hostile.nested_pdf),
                                         ("outline.pdf", lambda: hostile.outline_loop_pdf(5_000))])
def test_deep_nesting_in_pdf_objects_and_outlines_ends_in_a_refusal(tmp_path, name, build):
    (tmp_path / name).write_bytes(build())
    refused(tmp_path, name, "has nothing on any of its 1 page(s)", memory_mb=512, seconds=20)


def test_an_html_formatting_bomb_is_refused_at_the_memory_limit(tmp_path):
    (tmp_path / "bomb.html").write_bytes(hostile.formatting_bomb_html(5_000, 2_000))
    refused(tmp_path, "bomb.html", "needs more memory than the limit (512 MB)", memory_mb=512, seconds=30)


def test_deeply_nested_html_is_refused_at_the_time_limit(tmp_path):
    (tmp_path / "deep.html").write_bytes(hostile.nested_html(100_000))  # lexbor: quadratic in the depth
    refused(tmp_path, "deep.html", "took over the time limit (3 s)", memory_mb=1024, seconds=3)


def test_a_fifo_is_refused_without_being_opened(tmp_path):
    os.mkfifo(tmp_path / "doc.txt")
    refused(tmp_path, "doc.txt", "is a FIFO (a named pipe), not a regular file", memory_mb=512, seconds=20)


def test_links_out_of_the_folder_are_refused_unless_followed(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("a secret kept outside the folder")
    for name, target in (("outside.txt", outside), ("zero.txt", "/dev/zero"), ("environ.txt", "/proc/self/environ")):
        os.symlink(target, folder / name)
    (folder / "good.md").write_text(GOOD)
    reading = read_folder(folder, memory_mb=512, seconds=20)
    assert reading.documents == ["good.md"] and len(reading.problems) == 3, reading
    assert all("is a link leading out of the folder" in problem and "--follow-links" in problem
               for problem in reading.problems)
    followed = read_folder(folder, memory_mb=512, seconds=20, follow_links=True)
    assert sorted(followed.documents) == ["good.md", "outside.txt"], followed
    [zero] = [problem for problem in followed.problems if "zero.txt" in problem]
    assert "is a character device, not a regular file" in zero


def test_a_binary_file_is_refused_from_its_first_bytes_not_read_whole(tmp_path):
    with open(tmp_path / "big.txt", "wb") as out:
        out.truncate(1_000_000_000)  # sparse: NULs that take no disk
    message = refused(tmp_path, "big.txt", "looks like a binary file (it holds NUL bytes)", memory_mb=512,
                      seconds=20, max_mb=2000)
    assert "cannot" not in message


@pytest.mark.slow
def test_a_docx_of_gigabytes_of_whitespace_in_one_node_is_refused(tmp_path):
    (tmp_path / "space.docx").write_bytes(hostile.whitespace_docx(2_500_000_000))
    refused(tmp_path, "space.docx", "cannot be read safely", "zip bomb")


@pytest.mark.slow
def test_a_pdf_stream_of_gigabytes_drawn_by_four_pages_is_refused_at_the_default_limits(tmp_path):
    (tmp_path / "bomb.pdf").write_bytes(hostile.stream_bomb_pdf(900_000_000, pages=4))
    refused(tmp_path, "bomb.pdf", "cannot be read safely", "memory limit (2,048 MB)", memory_mb=2048, seconds=120)


@pytest.mark.slow
def test_a_190_mb_one_line_html_page_is_read_or_refused_within_the_limits(tmp_path):
    hostile.write_one_line_html(tmp_path / "long.html")
    (tmp_path / "good.md").write_text(GOOD)
    reading = read_folder(tmp_path, memory_mb=2048, seconds=120)
    assert "good.md" in reading.documents and reading.peak_mb < 2048 and reading.seconds < 150, reading
    if "long.html" not in reading.documents:
        [message] = reading.problems
        assert message.startswith(str(tmp_path / "long.html")) and "cannot be read safely" in message
