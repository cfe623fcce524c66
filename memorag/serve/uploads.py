"""Reading uploaded files off the event loop, within the job time limit.

Reading a file (`memorag.documents.extract`) can take seconds: a long PDF, a Word file that
inflates a lot. So the uploads of a memorize request are read on a thread of their own, one
request's files at a time, never on the event loop (which answers /health, other requests and
streams answers) nor on the model worker (which answers other clients' questions meanwhile).
The request waits for its files at most the server's job time limit (`--job-timeout`, counting
any wait for the uploads of earlier requests) and is then refused with a 503 naming the files;
the reader's own limits (`memorag.documents.ReadOptions`) end the read itself.

Every failure is a refusal naming the file: a file that is not base64, one the reader refuses
(`DocumentReadError`: damaged, encrypted, over a limit), and any other exception a parser lets
escape, which becomes a 400 too (never a 500). After a refused request the file bytes are
dropped and freed memory is given back to the system (`memtrim.release_memory`).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import dataclasses
import logging
from concurrent.futures import ThreadPoolExecutor

from memorag.documents.options import ReadOptions
from memorag.pipeline import InputError
from memorag.retrieval.chunking import Document
from memorag.runtime.memtrim import release_memory
from memorag.serve.bodies import UnreadableFilesError, Upload
from memorag.serve.guard import clip
from memorag.serve.worker import JobCancelled

logger = logging.getLogger("memorag.serve")


class UploadReader:
    """Reads the uploads of one request at a time on its own thread; `time_limit` (seconds, None:
    none) bounds how long a request waits for its files."""

    def __init__(self, time_limit: float | None = None, options: ReadOptions | None = None) -> None:
        self.time_limit = time_limit
        self.options = options or ReadOptions()
        if time_limit is not None:  # the reader's own clock ends a read the request no longer waits for
            self.options = dataclasses.replace(self.options, seconds=min(self.options.seconds, time_limit))
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memorag-uploads")

    async def read(self, uploads: list[Upload]) -> list[Document]:
        """The documents in `uploads`, or an `InputError` naming each file that cannot be read
        (`JobCancelled` when reading them takes over the time limit)."""
        future = asyncio.wrap_future(self._executor.submit(read_uploads, uploads, self.options))
        try:
            return await asyncio.wait_for(future, self.time_limit)
        except TimeoutError:
            names = ", ".join(clip(upload.name, 80) for upload in uploads)
            logger.warning("reading %s took over %s s; stopped waiting for it", names, self.time_limit)
            raise JobCancelled(f"reading {names} took over the server's time limit ({self.time_limit:g} s, "
                               "--job-timeout) and was given up; send smaller files, or fewer at once") from None

    def shutdown(self) -> None:
        """Drop queued reads; wait for the one under way (the reader's own time limit bounds it)."""
        self._executor.shutdown(wait=True, cancel_futures=True)


def read_uploads(uploads: list[Upload], options: ReadOptions) -> list[Document]:
    """Decode and read every upload (on the reading thread); refuse them all, naming each file
    that cannot be read and its fix, if any cannot."""
    documents, problems = [], []
    for upload in uploads:
        try:
            documents.append(read_upload(upload, options))
        except InputError as problem:
            problems.append((upload.name, str(problem)))
    if problems:
        documents.clear()
        release_memory()
        raise UnreadableFilesError(problems)
    return documents


def read_upload(upload: Upload, options: ReadOptions) -> Document:
    """The document in one upload; any failure an `InputError` naming the file."""
    import memorag.documents as documents  # looked up at each call: the reader is the documents package's

    try:
        data = base64.b64decode(upload.base64, validate=True)
    except binascii.Error as error:
        raise InputError(f"files[{upload.position}] ({clip(upload.name)}): 'base64' is not base64 ({error})") from None
    try:
        _, extracted = documents.extract(data, upload.name, options)
    except documents.DocumentReadError as problem:
        raise InputError(str(problem)) from None
    except Exception as error:  # a parser's own exception: still a refusal of this file, never a 500
        logger.warning("reading the upload %r failed", upload.name, exc_info=error)
        raise InputError(f"{clip(upload.name)}: cannot be read ({type(error).__name__}: {clip(str(error), 160)}); "
                         "check that the file is whole (save it again from the program that made it)") from None
    return Document(id=upload.name, title=upload.name, text=extracted.text, source=upload.name,
                    page_starts=extracted.page_starts, headings=extracted.headings)
