"""The HTTP API of `memorag serve` (a Starlette ASGI app).

    GET    /health                       {"status": "ok", "models": {...}, "pending": N, "loaded": [...]}
    GET    /corpora                      {"corpora": [{"name", "documents", "num_chunks", "memory_tokens", "loaded"}]}
    GET    /corpora/NAME                 one of those
    POST   /corpora/NAME/memorize        {"text": "..."} or {"documents": [{"id", "title"?, "text"}]}, "overwrite"?
    POST   /corpora/NAME/ask             {"query", "task"?, "mode"?, "stream"?: true}: server-sent events
    POST   /corpora/NAME/clues           {"query", "task"?}
    DELETE /corpora/NAME

A streamed ask sends `clues` (a list), `evidence` (a list of {chunk_id, doc_id, title,
start_char, end_char, num_tokens, score, queries, text}), one `token` event per piece of
the answer ({"text": ...}), and last `answer` (the whole `Answer`) or `error`; with
"stream": false it returns the answer as one JSON object. Errors are JSON,
{"error": MESSAGE, "type": NAME}, with the message the command line prints:
400 for bad input (the CLI's exit status 2), 404 for an unknown corpus, 409 for a
conflicting document, 500 otherwise. An ask that fails before its first event
answers with the error's status; one that fails later ends its stream with an
`error` event. A client that disconnects mid-stream stops its generation at the
next token.

All model work runs on one worker thread (`ModelWorker`), so requests queue up and
the models load once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from memorag.errors import is_usage_error
from memorag.pipeline import DocumentConflictError, InputError, SaveFormatError
from memorag.retrieval.chunking import Document
from memorag.serve.store import CorpusNotFoundError, CorpusStore, check_name
from memorag.serve.worker import ModelWorker

logger = logging.getLogger("memorag.serve")

MAX_BODY_BYTES = 64 * 2**20


class StreamClosed(Exception):
    """Raised inside a generation whose client has gone, to stop it."""


# ----------------------------------------------------------------------------------------------
# errors and request bodies


def error_status(error: BaseException) -> int:
    if isinstance(error, CorpusNotFoundError):
        return 404
    if isinstance(error, DocumentConflictError):
        return 409
    return 400 if is_usage_error(error) else 500


def error_body(error: BaseException) -> dict[str, str]:
    return {"error": str(error) or type(error).__name__, "type": type(error).__name__}


def error_response(error: BaseException) -> JSONResponse:
    status = error_status(error)
    if status == 500:
        logger.error("request failed", exc_info=error)
    return JSONResponse(error_body(error), status_code=status)


async def read_body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if len(raw) > MAX_BODY_BYTES:
        raise InputError(f"the request body has {len(raw):,} bytes; send at most {MAX_BODY_BYTES:,}")
    if not raw.strip():
        raise InputError("the request body is empty; send a JSON object")
    try:
        body = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise InputError(f"the request body is not valid JSON ({error}); send a JSON object") from error
    if not isinstance(body, dict):
        raise InputError(f"the request body is a JSON {type(body).__name__}; send a JSON object")
    return body


_JSON_TYPES = {str: "a string", bool: "true or false", list: "a list", dict: "an object"}


def field(body: dict[str, Any], name: str, kind: type, default: Any = None, required: bool = False) -> Any:
    """`body[name]`, checked to be of `kind` (None/absent gives `default`)."""
    value = body.get(name)
    if value is None:
        if required:
            raise InputError(f"the request needs {name!r} ({_JSON_TYPES[kind]})")
        return default
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise InputError(f"{name!r} must be {_JSON_TYPES[kind]}, not {type(value).__name__} {json.dumps(value)[:40]}")
    return value


def documents_from(body: dict[str, Any]) -> list[Document]:
    text = field(body, "text", str)
    items = field(body, "documents", list)
    if (text is None) == (items is None):
        raise InputError("send either 'text' (a string) or 'documents' (a list of {id, title, text})")
    if text is not None:
        if not text.strip():
            raise InputError("the text is empty; give a text with some content")
        from memorag.pipeline import as_documents

        return as_documents(text)
    if not items:
        raise InputError("nothing to memorize: the list of documents is empty")
    documents = []
    for position, item in enumerate(items):
        if not isinstance(item, dict):
            raise InputError(f"documents[{position}] must be an object with 'id' and 'text'")
        doc_id = field(item, "id", str, required=True)
        text = field(item, "text", str, required=True)
        if not doc_id.strip():
            raise InputError(f"documents[{position}] has an empty id")
        if not text.strip():
            raise InputError(f"document {doc_id!r} is empty; give a text with some content")
        documents.append(Document(id=doc_id, title=field(item, "title", str, default=""), text=text))
    return documents


def sse(event: str, data: Any) -> bytes:
    """One server-sent event; `data` as one line of JSON."""
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


# ----------------------------------------------------------------------------------------------
# the app


def create_app(store: CorpusStore, worker: ModelWorker | None = None) -> Starlette:
    """The API over `store`; all model work runs on `worker` (one is made if not given)."""
    worker = worker or ModelWorker()

    def handle(endpoint: Callable) -> Callable:
        async def wrapped(request: Request) -> Response:
            try:
                return await endpoint(request)
            except Exception as error:
                return error_response(error)

        return wrapped

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok", "models": store.describe_models(), "pending": worker.pending,
                             "loaded": store.loaded})

    async def list_corpora(request: Request) -> Response:
        corpora = []
        for name in store.names():
            try:
                corpora.append(store.describe(name))
            except (CorpusNotFoundError, SaveFormatError):  # deleted while listing
                continue
        return JSONResponse({"corpora": corpora})

    async def show(request: Request) -> Response:
        return JSONResponse(store.describe(check_name(request.path_params["name"])))

    async def memorize(request: Request) -> Response:
        name = check_name(request.path_params["name"])
        body = await read_body(request)
        documents = documents_from(body)
        overwrite = field(body, "overwrite", bool, default=False)
        report = await worker.run(store.memorize, name, documents, overwrite)
        return JSONResponse({**report.to_dict(), "corpus": store.describe(name)})

    async def clues(request: Request) -> Response:
        name = check_name(request.path_params["name"])
        body = await read_body(request)
        query = field(body, "query", str, required=True)
        task = field(body, "task", str, default="memorag")
        found, raw = await worker.run(store.clues, name, query, task)
        return JSONResponse({"query": query, "task": task, "clues": found, "raw": raw})

    async def delete(request: Request) -> Response:
        name = check_name(request.path_params["name"])
        await worker.run(store.delete, name)
        return JSONResponse({"deleted": name})

    async def ask(request: Request) -> Response:
        name = check_name(request.path_params["name"])
        body = await read_body(request)
        query = field(body, "query", str, required=True)
        task = field(body, "task", str)
        mode = field(body, "mode", str)
        if not field(body, "stream", bool, default=True):
            answer = await worker.run(store.ask, name, query, task, mode)
            return JSONResponse(answer.to_dict())
        return await stream_answer(name, query, task, mode)

    async def stream_answer(name: str, query: str, task: str | None, mode: str | None) -> Response:
        loop = asyncio.get_running_loop()
        events: asyncio.Queue = asyncio.Queue()
        closed = threading.Event()
        done = object()

        def emit(event: Any, data: Any = None) -> None:
            loop.call_soon_threadsafe(events.put_nowait, (event, data))

        def on_text(piece: str) -> None:
            if closed.is_set():
                raise StreamClosed
            emit("token", {"text": piece})

        def job() -> None:
            try:
                if closed.is_set():  # the client left while the ask was queued
                    return
                answer = store.ask(
                    name, query, task, mode, on_text=on_text,
                    on_clues=lambda clues: emit("clues", clues),
                    on_evidence=lambda evidence: emit("evidence", [item.to_dict() for item in evidence]),
                )
                emit("answer", answer.to_dict())
            except StreamClosed:
                logger.info("client left; stopped the answer to %r on %s", query, name)
            except Exception as error:  # reported to the client, in the stream or as the response
                emit("error", error)
            finally:
                emit(done)

        worker.submit(job)
        first = await events.get()
        if first[0] == "error":
            await events.get()  # the end marker
            return error_response(first[1])

        async def stream() -> AsyncIterator[bytes]:
            item = first
            try:
                while item[0] is not done:
                    event, data = item
                    if event == "error":
                        if error_status(data) == 500:
                            logger.error("ask failed mid-stream", exc_info=data)
                        data = error_body(data)
                    yield sse(event, data)
                    item = await events.get()
            finally:
                closed.set()

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    async def not_found(request: Request, exc: Exception) -> Response:
        return JSONResponse({"error": f"no route {request.method} {request.url.path}; see GET /health and the "
                                      "README's `memorag serve` section", "type": "NotFound"}, status_code=404)

    async def method_not_allowed(request: Request, exc: Exception) -> Response:
        return JSONResponse({"error": f"{request.method} is not allowed on {request.url.path}",
                             "type": "MethodNotAllowed"}, status_code=405)

    routes = [
        Route("/health", handle(health), methods=["GET"]),
        Route("/corpora", handle(list_corpora), methods=["GET"]),
        Route("/corpora/{name}", handle(show), methods=["GET"]),
        Route("/corpora/{name}", handle(delete), methods=["DELETE"]),
        Route("/corpora/{name}/memorize", handle(memorize), methods=["POST"]),
        Route("/corpora/{name}/ask", handle(ask), methods=["POST"]),
        Route("/corpora/{name}/clues", handle(clues), methods=["POST"]),
    ]
    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        worker.shutdown()

    app = Starlette(routes=routes, exception_handlers={404: not_found, 405: method_not_allowed}, lifespan=lifespan)
    app.state.store, app.state.worker = store, worker
    return app
