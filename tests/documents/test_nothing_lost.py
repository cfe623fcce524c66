"""Nothing lost silently: a declared charset honoured (a wrong one refused by name), formats
judged by their real signature, unreadable folders and bad file names named, one bad file
costing only itself, on the command line too."""

from __future__ import annotations

import os

import pytest

from memorag.benchmarking import hostile_documents as hostile
from memorag.documents import DocumentReadError, ReadOptions, detect_format, extract, read_paths
from memorag.documents.command_options import read_documents

from .builders import write

RUSSIAN = "Привет, мир: маяк стоит на северном мысе."
FRENCH = "Ester était reine; la fête dura sept jours à Suse."


@pytest.mark.parametrize("charset, codec, text", [("windows-1251", "cp1251", RUSSIAN), ("ISO-8859-1", "latin-1", FRENCH),
                                                  ("koi8-r", "koi8-r", RUSSIAN)])
@pytest.mark.parametrize("meta", ['<meta charset="{}">', '<meta http-equiv="Content-Type" content="text/html; charset={}">'])
def test_html_in_its_declared_charset_is_decoded_as_declared(charset, codec, text, meta):
    page = f"<html><head>{meta.format(charset)}</head><body><p>{text}</p></body></html>"
    _, extracted = extract(page.encode(codec), "page.html")
    assert extracted.text == text


def test_a_declared_charset_the_bytes_contradict_is_refused_by_name():
    page = f'<html><head><meta charset="windows-1251"></head><body><p>{RUSSIAN}</p></body></html>'
    with pytest.raises(DocumentReadError, match=r"page.html: declares charset cp1251 but its bytes are UTF-8.*--encoding"):
        extract(page.encode("utf-8"), "page.html")
    page = f'<html><head><meta charset="utf-8"></head><body><p>{FRENCH}</p></body></html>'
    with pytest.raises(DocumentReadError, match=r"declares charset utf-8 but is not utf-8 \(byte 0xe9"):
        extract(page.encode("latin-1"), "page.html")
    with pytest.raises(DocumentReadError, match="declares charset 'klingon', which is not known"):
        extract(b'<html><head><meta charset="klingon"></head><body>x</body></html>', "page.html")


@pytest.mark.parametrize("name, data", [
    ("pdf-notes.md", b"# Notes\n\nEvery PDF starts with %PDF-1.7 or so.\n"),
    ("gif.txt", b"GIF89a is the animated one.\n"),
    ("bz.txt", b"BZh, the bzip2 magic, opens this note.\n"),
    ("rtf-notes.md", b"# RTF\n\nAn RTF file starts with {\\rtf1.\n"),
])
def test_text_that_mentions_a_signature_is_text(name, data):
    kind, extracted = extract(data, name)
    assert kind in ("markdown", "text") and extracted.text == data.decode()


def test_real_signatures_are_still_refused():
    gif = b"GIF89a\x01\x00\x01\x00\x80\x00\x00\xff\xff\xff\x00\x00\x00!\xf9\x04\x01\x00\x00\x00\x00,"
    with pytest.raises(DocumentReadError, match="is a GIF image"):
        detect_format(gif, "pixel.txt")
    with pytest.raises(DocumentReadError, match="is a bzip2 archive"):
        detect_format(b"BZh91AY&SY" + bytes(range(40)), "notes.txt")
    mailed = b"\x00\x01junk from a mailer\x00" + hostile.page_tree_pdf(2, 1)
    assert detect_format(mailed, "attachment.bin") == "pdf"


def test_an_unreadable_subfolder_is_named_and_the_rest_read(tmp_path, monkeypatch):
    write(tmp_path, "good.md", "# Good\n\ntext")
    locked = tmp_path / "locked"
    write(locked, "hidden.md", "# Hidden\n\ntext")
    scandir = os.scandir

    def refusing(path="."):
        if os.fspath(path) == os.fspath(locked):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", refusing)
    result = read_paths([tmp_path])
    assert [d.id for d in result.documents] == ["good.md"]
    [problem] = result.problems
    assert str(problem).startswith(f"{locked}: cannot be read (Permission denied); its files are left out")


def test_a_file_name_that_is_not_utf8_is_named_not_fatal(tmp_path):
    write(tmp_path, "good.md", "# Good\n\ntext")
    bad = os.fsencode(tmp_path) + b"/caf\xe9.txt"
    with open(bad, "wb") as out:
        out.write(b"coffee")
    result = read_paths([tmp_path])
    assert [d.id for d in result.documents] == ["good.md"]
    [problem] = result.problems
    assert str(problem) == f"{tmp_path}/caf\\xe9.txt: has a name that is not valid UTF-8; rename it"


def test_one_truncated_docx_costs_the_command_line_only_itself(tmp_path):
    write(tmp_path, "a.md", "# A\n\nThe otter keeps the key.")
    write(tmp_path, "b.txt", "The heron keeps the lamp.")
    write(tmp_path, "cut.docx", hostile.truncated_docx())
    lines = []
    documents, unread = read_documents([str(tmp_path)], ReadOptions(), lines.append)
    assert [d.id for d in documents] == ["a.md", "b.txt"] and unread == 1
    [line] = lines
    assert line.startswith(f"memorag: error: {tmp_path}/cut.docx: is not a readable Word file: damaged or truncated")


def test_links_inside_the_folder_are_read_and_a_linked_folder_outside_is_named(tmp_path):
    folder, outside = tmp_path / "docs", tmp_path / "elsewhere"
    write(folder, "real.md", "# Real\n\ntext")
    write(outside, "far.md", "# Far\n\ntext")
    os.symlink(folder / "real.md", folder / "alias.md")
    os.symlink(outside, folder / "linked")
    result = read_paths([folder])
    assert sorted(d.id for d in result.documents) == ["alias.md", "real.md"]
    [problem] = result.problems
    assert "linked: is a link leading out of the folder" in str(problem) and "--follow-links" in str(problem)
    followed = read_paths([folder], ReadOptions(follow_links=True))
    assert sorted(d.id for d in followed.documents) == ["alias.md", "far.md", "real.md"] and not followed.problems
