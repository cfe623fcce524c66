"""The uploaded PDF files of each corpus, kept so the evidence inspector can show a cited page.

A corpus's save (`MemoRAG.save`) holds the text read from a file, not the file. The PDFs
uploaded to a corpus are kept beside the saves, in `STORE/.originals/NAME/`, one file per
document named by a hash of its id (a document id is a file name, which may hold any
character). A file is written atomically once its corpus's save holds the document, and
the files of documents the save no longer holds are removed then; a corpus deleted takes
its files with it. Each is no larger than the request that brought it (`--max-body-mb`).
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from memorag.storage.io import atomic_write_bytes

FOLDER = ".originals"  # not a corpus name: names start with a letter or digit
KEPT_SUFFIXES = (".pdf",)  # files whose pages are shown as images


def is_kept(file_name: str) -> bool:
    return file_name.lower().endswith(KEPT_SUFFIXES)


class Originals:
    """The kept files of every corpus under one store folder."""

    def __init__(self, store_root: Path) -> None:
        self.root = store_root / FOLDER

    def folder(self, name: str) -> Path:
        return self.root / name

    def path(self, name: str, doc_id: str) -> Path:
        return self.folder(name) / (hashlib.sha256(doc_id.encode()).hexdigest()[:40] + ".pdf")

    def keep(self, name: str, files: dict[str, bytes], documents: list[str]) -> None:
        """Write `files` (document id -> bytes) of the corpus and remove those of documents not in `documents`."""
        present = set(documents)
        wanted = {self.path(name, doc_id).name for doc_id in present}
        for doc_id, data in files.items():
            if doc_id in present:
                atomic_write_bytes(self.path(name, doc_id), data)
        folder = self.folder(name)
        if folder.is_dir():
            for path in folder.iterdir():
                if path.name not in wanted:
                    path.unlink(missing_ok=True)

    def read(self, name: str, doc_id: str) -> bytes | None:
        path = self.path(name, doc_id)
        return path.read_bytes() if path.is_file() else None

    def remove(self, name: str) -> None:
        shutil.rmtree(self.folder(name), ignore_errors=True)
