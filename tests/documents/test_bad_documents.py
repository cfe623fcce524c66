"""Files that cannot be read: each refused on one line naming the file and the fix, and in a
folder the good files are read and the bad ones reported."""

from __future__ import annotations

import pytest

from memorag.documents import DocumentReadError, ReadOptions, read_file, read_paths

from .builders import HTML, MARKDOWN, docx_bytes, pdf_bytes, scanned_pdf_bytes, write

GOOD = pdf_bytes(["The otter keeps the key.", "The heron keeps the lamp."])


def bad_files() -> dict[str, tuple[bytes, str, str]]:
    """name -> (bytes, what the message says is wrong, what it says to do)."""
    return {
        "locked.pdf": (pdf_bytes(["secret plans"], password="pw"), "is encrypted", "qpdf --decrypt"),
        "scan.pdf": (scanned_pdf_bytes(), "no text layer", "ocrmypdf"),
        "truncated.pdf": (GOOD[: len(GOOD) // 2], "damaged or truncated", "complete copy"),
        "corrupt.pdf": (b"%PDF-1.7\n" + bytes(range(256)) * 8, "damaged or truncated", "repair"),
        "broken.docx": (docx_bytes([("p", "x")])[:600], "damaged or truncated", "save it again"),
        "empty.txt": (b"", "is empty", "some text"),
        "blank.md": (b" \n\t\n", "only whitespace", "some text"),
        "photo.png": (b"\x89PNG\r\n\x1a\n" + bytes(64), "PNG image", "OCR"),
        "slides.pptx": (_zip({"ppt/presentation.xml": "<p/>"}), "PowerPoint", "convert it"),
        "binary.dat": (bytes(range(256)) * 4, "binary", "give a document"),
    }


def _zip(entries: dict[str, str]) -> bytes:
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in entries.items():
            archive.writestr(name, text)
    return buffer.getvalue()


@pytest.mark.parametrize("name", sorted(bad_files()))
def test_each_bad_file_is_one_line_naming_file_and_fix(tmp_path, name):
    data, problem, fix = bad_files()[name]
    path = write(tmp_path, name, data)
    with pytest.raises(DocumentReadError) as caught:
        read_file(path)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(str(path)), message
    assert problem in message and fix in message, message


def test_a_file_over_the_limit_is_refused_before_it_is_read(tmp_path):
    path = write(tmp_path, "big.txt", "word " * 300_000)
    with pytest.raises(DocumentReadError, match=r"1\.5 MB, over the limit of 1 MB.*--max-file-mb"):
        read_file(path, ReadOptions(max_mb=1))


def test_missing_paths_and_empty_folders_are_reported(tmp_path):
    (tmp_path / "empty").mkdir()
    result = read_paths([tmp_path / "nothing.pdf", tmp_path / "empty"])
    assert not result.documents
    messages = sorted(str(problem) for problem in result.problems)
    assert "holds no files to read" in messages[0] and "no such file" in messages[1]


def test_in_a_folder_the_good_files_are_read_and_the_bad_reported(tmp_path):
    write(tmp_path, "good.pdf", GOOD)
    write(tmp_path, "guide.html", HTML)
    write(tmp_path, "notes.md", MARKDOWN)
    write(tmp_path, "report.docx", docx_bytes([("h1", "Report"), ("p", "All is well.")]))
    for name, (data, _, _) in bad_files().items():
        write(tmp_path, name, data)
    result = read_paths([tmp_path])
    assert sorted(d.id for d in result.documents) == ["good.pdf", "guide.html", "notes.md", "report.docx"]
    assert sorted(problem.path.rsplit("/", 1)[-1] for problem in result.problems) == sorted(bad_files())
