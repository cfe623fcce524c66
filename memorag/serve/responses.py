"""What `memorag serve` answers when a request fails: a status and one clear line, never internals.

Errors are JSON, `{"error": MESSAGE, "type": NAME}`: the command line's message for bad
input (400), 401/403/413/415 from the guard and the limits, 404 for an unknown corpus,
409 for a conflicting document, 503 for a job that was stopped (time limit, shutdown) or a
corpus another process went on writing past the wait,
500 otherwise. No message carries a path of the server's machine (the store's own folder
is named by the corpus path inside it) or a traceback (those go to the server's log); an
unexpected failure is named only by its type.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

from starlette.responses import JSONResponse

from memorag.errors import is_usage_error
from memorag.pipeline import DocumentConflictError
from memorag.serve.guard import RequestRefused, clip
from memorag.serve.store import CorpusNotFoundError, WorkTooLargeError
from memorag.serve.worker import JobCancelled
from memorag.storage.locking import SaveLockedError

logger = logging.getLogger("memorag.serve")

MAX_MESSAGE_CHARS = 600
_ABSOLUTE_PATH = re.compile(r"(?<![\w/.~-])(?:/[\w.@+~-]+){2,}/?")


def error_status(error: BaseException) -> int:
    if isinstance(error, RequestRefused):
        return error.status
    if isinstance(error, WorkTooLargeError):
        return 413
    if isinstance(error, JobCancelled | SaveLockedError):  # stopped, or another replica writes the corpus
        return 503
    if isinstance(error, CorpusNotFoundError):
        return 404
    if isinstance(error, DocumentConflictError):
        return 409
    return 400 if is_usage_error(error) else 500


def _is_ours(error: BaseException) -> bool:
    """Whether the message was written by this project for a user (not a library's internals)."""
    return type(error).__module__.startswith("memorag") or isinstance(error, RequestRefused)


def scrub(message: str, store_root: Path | None = None) -> str:
    """`message` without the store's folder (its paths become relative to it) or any other absolute path."""
    if store_root is not None:
        for root in {str(store_root), str(store_root.resolve())}:
            message = message.replace(root + "/", "").replace(root, "the store")
    message = _ABSOLUTE_PATH.sub(lambda match: ".../" + match.group(0).rstrip("/").rsplit("/", 1)[-1], message)
    return clip(message, MAX_MESSAGE_CHARS)


def error_body(error: BaseException, store_root: Path | None = None) -> dict[str, Any]:
    if not _is_ours(error):
        return {"error": f"the server failed on this request ({type(error).__name__}); its log has the details",
                "type": "InternalError"}
    body = {"error": scrub(str(error) or type(error).__name__, store_root), "type": type(error).__name__}
    files = getattr(error, "files", None)  # uploaded files refused, each by name (`bodies.UnreadableFilesError`)
    if isinstance(files, list):
        body["files"] = [{"name": clip(item["name"], 200), "error": scrub(item["error"], store_root)} for item in files]
    return body


def error_response(error: BaseException, store_root: Path | None = None) -> JSONResponse:
    status = error_status(error)
    if status == 500:
        logger.error("request failed", exc_info=error)
    return JSONResponse(error_body(error, store_root), status_code=status)


def sse(event: str, data: Any) -> bytes:
    """One server-sent event; `data` as one line of JSON."""
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()
