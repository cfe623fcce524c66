"""The HTTP API of `memorag serve` (a Starlette ASGI app behind `guard.Guard`).

    GET    /health                       {"status": "ok", "models": {...}, "pending": N, "limits": {...},
                                         "modes": [...], "mode_notes": [{"name", "description", "score", "order"}],
                                         "batch_size": N, "batching"?: {...}, "loaded": [...]}
    GET    /corpora                      {"corpora": [{"name", "documents", "num_chunks", "memory_tokens",
                                         "memory_entries", "loaded"}]}
    GET    /corpora/NAME                 one of those
    POST   /corpora/NAME/memorize        {"text": "..."} or {"documents": [{"id", "title"?, "text"}]} or
                                         {"files": [{"name", "base64"}]} (PDF, Word, HTML, Markdown, text), "overwrite"?,
                                         "stream"?: server-sent events `progress` ({done, total} tokens), `report`
    POST   /corpora/NAME/ask             {"query", "task"?, "mode"?, "stream"?: true}: server-sent events
    POST   /corpora/NAME/clues           {"query", "task"?}
    GET    /corpora/NAME/passage?doc=ID&start=S&end=E&page=N   the page (N, or its first), section or text around a passage
    GET    /corpora/NAME/page?doc=ID&page=N&start=S&end=E&width=W  page N of a kept PDF as a PNG, the passage marked
    DELETE /corpora/NAME
    GET    /                             the evidence inspector (a page over this API; `memorag.serve.inspector`)

A streamed ask sends `clues` (a list), `evidence` (a list of {chunk_id, doc_id, title,
start_char, end_char, num_tokens, score, queries, text}), one `token` event per piece of
the answer ({"text": ...}), and last `answer` (the whole `Answer`) or `error`; with
"stream": false it returns the answer as one JSON object. Errors are described in
`memorag.serve.responses`. An ask that fails before its first event answers with the
error's status; one that fails later ends its stream with an `error` event.

All model work runs as jobs of `ModelWorker`, which hands the models to one job at a time
(with a batch size above 1, several jobs run and their decodings are stepped together by
`memorag.serve.batching.Batcher`), and the models load once; uploaded files are read on a thread of their own
(`UploadReader`), so neither the event loop nor other clients' questions wait for them. While a request waits for its job the app listens for its
client: a client that leaves has its job dropped before it starts, or stopped at the
next safe point (the next token, window or batch) if it has started.

The handlers are functions of this module; each reads what it serves with (`Served`: the
store, the worker, the limits, the policy, the upload reader, the batcher) from the app's state, and
`create_app` only builds that and wires the routes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from memorag.pipeline import SaveFormatError, available_modes
from memorag.serve.batching import Batcher, decode_in_batches
from memorag.serve.bodies import (
    Upload,
    documents_from,
    field,
    originals_from,
    parse_body,
    query_from,
    query_int,
)
from memorag.serve.guard import AccessPolicy, Guard, clip
from memorag.serve.inspector import inspector_routes
from memorag.serve.limits import ServeLimits
from memorag.serve.pages import DEFAULT_WIDTH
from memorag.serve.responses import error_body, error_response, error_status, sse
from memorag.serve.store import CorpusNotFoundError, CorpusStore, check_name
from memorag.serve.uploads import UploadReader
from memorag.serve.worker import Job, JobCancelled, ModelWorker

logger = logging.getLogger("memorag.serve")

CLIENT_LEFT = "the client left"


class ClientGone(Exception):
    """The client disconnected before its answer was ready; nobody reads the response."""


async def wait_for_disconnect(request: Request) -> None:
    """Return when the client disconnects (call only once the body has been read)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def first_done(*awaitables: Awaitable) -> None:
    await asyncio.wait([asyncio.ensure_future(item) for item in awaitables], return_when=asyncio.FIRST_COMPLETED)


@dataclass(frozen=True)
class Served:
    """What the handlers serve with, held by the app (`app.state.served`)."""

    store: CorpusStore
    worker: ModelWorker
    limits: ServeLimits
    policy: AccessPolicy
    uploads: UploadReader
    batcher: Batcher | None = None  # when the worker decodes its jobs' generations together


def served(request: Request) -> Served:
    return request.app.state.served


def handle(endpoint: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
    """`endpoint` with its errors answered as `memorag.serve.responses` describes, and no answer
    to a client that left."""

    async def wrapped(request: Request) -> Response:
        try:
            return await endpoint(request)
        except ClientGone:
            return Response(status_code=204)  # nobody is there to read it
        except Exception as error:
            return error_response(error, served(request).store.root)

    return wrapped


async def read_body(request: Request) -> dict[str, Any]:
    return parse_body(await request.body(), served(request).limits)


async def run_job(request: Request, function: Callable, *args: Any, **kwargs: Any) -> Any:
    """`function`'s result, run as a job that is cancelled if the client leaves before it ends (`reads`
    or `writes`: the corpus it reads or writes, see `ModelWorker.submit`)."""
    job = served(request).worker.submit(function, *args, **kwargs)
    watcher = asyncio.ensure_future(wait_for_disconnect(request))
    try:
        await first_done(job.future, watcher)
    finally:
        watcher.cancel()
    if not job.future.done():
        job.cancel(CLIENT_LEFT)
        logger.info("client left; cancelled %s on %s", function.__name__, request.url.path)
        raise ClientGone
    return job.future.result()


async def health(request: Request) -> Response:
    state = served(request)
    reply = {"status": "ok", "models": state.store.describe_models(), "pending": state.worker.pending,
             "limits": state.limits.describe(), "modes": available_modes(), "mode_notes": state.store.describe_modes(),
             "batch_size": state.worker.batch_size}
    if state.batcher is not None:
        reply["batching"] = state.batcher.describe()
    if state.policy.key_matches(request.headers.get("authorization")):  # corpus names need the key, when set
        reply["loaded"] = state.store.loaded
    return JSONResponse(reply)


async def list_corpora(request: Request) -> Response:
    store = served(request).store
    corpora = []
    for name in store.names():
        try:
            corpora.append(store.describe(name))
        except (CorpusNotFoundError, SaveFormatError):  # deleted while listing
            continue
    return JSONResponse({"corpora": corpora})


async def show(request: Request) -> Response:
    return JSONResponse(served(request).store.describe(check_name(request.path_params["name"])))


async def memorize(request: Request) -> Response:
    state = served(request)
    store, limits = state.store, state.limits
    name = check_name(request.path_params["name"])
    body = await read_body(request)
    documents = documents_from(body)
    overwrite = field(body, "overwrite", bool, default=False)
    if documents and isinstance(documents[0], Upload):
        documents = await state.uploads.read(documents)
    originals = originals_from(body)
    if not field(body, "stream", bool, default=False):
        report = await run_job(request, store.memorize, name, documents, overwrite, limits.max_memorize_tokens,
                               originals, writes=name)
        return JSONResponse({**report.to_dict(), "corpus": store.describe(name)})

    def work(emit: Callable[..., None]) -> None:
        report = store.memorize(name, documents, overwrite, limits.max_memorize_tokens, originals,
                                on_progress=lambda done, total: emit("progress", {"done": done, "total": total}))
        emit("report", {**report.to_dict(), "corpus": store.describe(name)})

    return await stream_events(request, name, work, writes=True)


async def passage(request: Request) -> Response:
    name = check_name(request.path_params["name"])
    params = request.query_params
    doc_id = params.get("doc") or ""
    start, end = query_int(params, "start", required=True), query_int(params, "end", required=True)
    return JSONResponse(await run_job(request, served(request).store.passage, name, doc_id, start, end,
                                      query_int(params, "page"), reads=name))


async def page(request: Request) -> Response:
    name = check_name(request.path_params["name"])
    params = request.query_params
    start, end = query_int(params, "start"), query_int(params, "end")
    rendered = await run_job(request, served(request).store.page_image, name, params.get("doc") or "",
                             query_int(params, "page", required=True), start, end,
                             query_int(params, "width", default=DEFAULT_WIDTH), reads=name)
    return Response(rendered.png, media_type="image/png",
                    headers={"X-Marked-Boxes": str(rendered.marked), "X-Pages": str(rendered.pages),
                             "Cache-Control": "no-store"})


async def clues(request: Request) -> Response:
    name = check_name(request.path_params["name"])
    body = await read_body(request)
    query = query_from(body, served(request).limits)
    task = field(body, "task", str, default="memorag")
    found, raw = await run_job(request, served(request).store.clues, name, query, task, reads=name)
    return JSONResponse({"query": query, "task": task, "clues": found, "raw": raw})


async def delete(request: Request) -> Response:
    name = check_name(request.path_params["name"])
    await run_job(request, served(request).store.delete, name, writes=name)
    return JSONResponse({"deleted": name})


async def ask(request: Request) -> Response:
    state = served(request)
    name = check_name(request.path_params["name"])
    body = await read_body(request)
    query = query_from(body, state.limits)
    task = field(body, "task", str)
    mode = field(body, "mode", str)
    if not field(body, "stream", bool, default=True):
        answer = await run_job(request, state.store.ask, name, query, task, mode,
                               on_text=lambda piece: state.worker.check(), reads=name)  # each token: a safe point
        return JSONResponse(answer.to_dict())
    return await stream_answer(request, name, query, task, mode)


async def stream_answer(request: Request, name: str, query: str, task: str | None, mode: str | None) -> Response:
    state = served(request)

    def work(emit: Callable[..., None]) -> None:
        def on_text(piece: str) -> None:  # the answer as written; `ask` never passes on a non-answer
            state.worker.check()  # a safe point: the client left, the time limit, the server stopping
            emit("token", {"text": piece})

        result = state.store.ask(name, query, task, mode, on_text=on_text,
                                 on_clues=lambda clues: emit("clues", clues),
                                 on_evidence=lambda evidence: emit("evidence", [item.to_dict() for item in evidence]))
        emit("answer", result.to_dict())

    return await stream_events(request, name, work)


_DONE = object()  # the last item of a job's events


def submit_events(worker: ModelWorker, name: str, work: Callable[[Callable[..., None]], None], writes: bool = False
                  ) -> tuple[Job, asyncio.Queue]:
    """`work(emit)` submitted as a job that reads (or `writes`) the corpus `name`, whose events
    (`emit(event, data)`) arrive on a queue, an exception as an `error` event, `_DONE` last."""
    loop = asyncio.get_running_loop()
    events: asyncio.Queue = asyncio.Queue()

    def emit(event: Any, data: Any = None) -> None:
        loop.call_soon_threadsafe(events.put_nowait, (event, data))

    def run() -> None:
        try:
            work(emit)
        except Exception as error:  # reported to the client, in the stream or as the response
            if isinstance(error, JobCancelled):
                logger.info("stopped the job on %s: %s", name, error)
            emit("error", error)
        finally:
            emit(_DONE)

    return worker.submit(run, **{"writes" if writes else "reads": name}), events


async def stream_events(request: Request, name: str, work: Callable[[Callable[..., None]], None],
                        writes: bool = False) -> Response:
    """Server-sent events of `work(emit)`, run as a job: an error before its first event is the
    response's status (so limits refuse with theirs); a later one ends the stream with an `error`
    event that carries the status it would have had."""
    root = served(request).store.root
    job, events = submit_events(served(request).worker, name, work, writes)
    getter = asyncio.ensure_future(events.get())
    watcher = asyncio.ensure_future(wait_for_disconnect(request))
    try:
        await first_done(getter, job.future, watcher)
        if not getter.done() and job.future.done() and job.future.exception() is None:
            await getter  # `run` ran, so its first event is already on its way
    finally:
        watcher.cancel()
    if not getter.done():
        getter.cancel()
        if job.future.done():  # dropped before it started (`run` itself raises nothing)
            return error_response(job.future.exception(), root)
        job.cancel(CLIENT_LEFT)
        logger.info("client left while its job on %s was queued; dropped it", name)
        raise ClientGone
    head = getter.result()
    if head[0] == "error":
        return error_response(head[1], root)
    return StreamingResponse(event_stream(head, events, job, root), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


async def event_stream(head: tuple[Any, Any], events: asyncio.Queue, job: Job, root: Path) -> AsyncIterator[bytes]:
    """The job's events from `head` on, as server-sent events, until `_DONE`; an error as an `error`
    event with the status it would have had. The job is cancelled when the stream ends early."""
    item = head
    try:
        while item[0] is not _DONE:
            event, data = item
            if event == "error":
                if error_status(data) == 500:
                    logger.error("a job failed mid-stream", exc_info=data)
                data = {**error_body(data, root), "status": error_status(data)}
            yield sse(event, data)
            item = await events.get()
    finally:
        job.cancel(CLIENT_LEFT)  # a no-op once the job has ended


async def not_found(request: Request, exc: Exception) -> Response:
    return JSONResponse({"error": f"no route {request.method} {clip(request.url.path)}; see GET /health and "
                                  "the README's `memorag serve` section", "type": "NotFound"}, status_code=404)


async def method_not_allowed(request: Request, exc: Exception) -> Response:
    return JSONResponse({"error": f"{request.method} is not allowed on {clip(request.url.path)}",
                         "type": "MethodNotAllowed"}, status_code=405)


ROUTES = [
    Route("/health", handle(health), methods=["GET"]),
    Route("/corpora", handle(list_corpora), methods=["GET"]),
    Route("/corpora/{name}", handle(show), methods=["GET"]),
    Route("/corpora/{name}", handle(delete), methods=["DELETE"]),
    Route("/corpora/{name}/memorize", handle(memorize), methods=["POST"]),
    Route("/corpora/{name}/ask", handle(ask), methods=["POST"]),
    Route("/corpora/{name}/clues", handle(clues), methods=["POST"]),
    Route("/corpora/{name}/passage", handle(passage), methods=["GET"]),
    Route("/corpora/{name}/page", handle(page), methods=["GET"]),
]


@contextlib.asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    yield
    await asyncio.to_thread(app.state.served.worker.shutdown)
    if app.state.served.batcher is not None:
        await asyncio.to_thread(app.state.served.batcher.stop)
        await asyncio.to_thread(app.state.served.store.decode_through, None)
    await asyncio.to_thread(app.state.served.uploads.shutdown)


def create_app(store: CorpusStore, worker: ModelWorker | None = None, limits: ServeLimits | None = None,
               policy: AccessPolicy | None = None, batch_size: int = 1) -> Starlette:
    """The API over `store`, behind `policy` (default: loopback names only, no key); all model
    work runs on `worker` (one is made with `limits.job_timeout` and `batch_size` if not given).
    A worker with a batch size above 1 decodes its jobs' greedy generations together
    (`memorag.serve.batching`)."""
    limits = limits or ServeLimits()
    policy = policy or AccessPolicy.for_address("127.0.0.1", limits.max_body_bytes)
    worker = worker or ModelWorker(limits.job_timeout, batch_size)
    uploads = UploadReader(limits.job_timeout, limits.read)
    for module in store.model_modules():
        worker.watch(module)
    batcher = None
    if worker.batch_size > 1:
        batcher = decode_in_batches(worker, store.models.memory_model, store.models.generator)
        store.decode_through(batcher.model_views(store.models.memory_model, store.models.generator))
    app = Starlette(routes=[*ROUTES, *inspector_routes()],
                    exception_handlers={404: not_found, 405: method_not_allowed}, lifespan=lifespan,
                    middleware=[Middleware(Guard, policy=policy)])
    app.state.served = Served(store, worker, limits, policy, uploads, batcher)
    app.state.store, app.state.worker, app.state.limits, app.state.policy = store, worker, limits, policy
    return app
