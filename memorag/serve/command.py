"""`memorag serve`: the HTTP server over a folder of named corpora.

    memorag serve --host 127.0.0.1 --port 8000 --store corpora/
    memorag serve --store corpora/ --retriever bm25 --set hits_per_query=8
    MEMORAG_SERVE_API_KEY=... memorag serve --host 0.0.0.0 --allow-host myserver.lan --store corpora/

Loads the models once, then serves the API of `memorag.serve.app` with uvicorn until
interrupted. Takes the same model options as `memorag memorize` and `memorag ask`, and the
server's own: who may connect (`guard`) and how much one request may ask (`limits`).
SIGTERM or Ctrl-C stops the running job at its next safe point and drops the queued ones.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import Any

from memorag.documents.command_options import add_read_limit_options
from memorag.documents.options import ReadOptions
from memorag.serve.guard import API_KEY_ENV, AccessPolicy, is_loopback
from memorag.serve.limits import MIB, ServeLimits


def add_serve_parser(commands, model_options: Callable[..., None]) -> None:
    serve = commands.add_parser(
        "serve", help="serve memorize, ask (streamed), clues and corpora over HTTP",
        description="Serve an HTTP API over the corpora saved in --store: POST /corpora/NAME/memorize, "
                    "POST /corpora/NAME/ask (server-sent events), POST /corpora/NAME/clues, GET /corpora, "
                    "GET /corpora/NAME/passage, GET /corpora/NAME/page (a cited PDF page as a PNG), "
                    "DELETE /corpora/NAME, GET /health; and at / the evidence inspector, a page to upload, ask, "
                    "compare two modes and open the cited sources in a browser. The models load once and are shared by every request, "
                    "and do one piece of work at a time; up to --batch-size requests (8) run at once, their "
                    "greedy decodings (clues, answers) stepped together as one batch, the rest waiting in "
                    "arrival order. POST bodies must be JSON (Content-Type: application/json); requests "
                    "from other hosts, or from web pages other than the server's own, are refused unless "
                    "allowed. Needs the [serve] extra.",
    )
    limits = ServeLimits()
    serve.add_argument("--store", required=True, metavar="DIR", help="folder of corpora (one saved pipeline each)")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1, this machine only)")
    serve.add_argument("--port", type=int, default=8000, help="port (default: 8000)")
    serve.add_argument("--max-loaded", type=int, default=4, metavar="N",
                       help="corpora kept in memory at once; others are reloaded from --store when asked (default: 4)")
    serve.add_argument("--log-level", default="info", choices=("critical", "error", "warning", "info", "debug"),
                       help="uvicorn's log level (default: info)")
    access = serve.add_argument_group("access (who may ask)")
    access.add_argument("--api-key", metavar="KEY",
                        help=f"require 'Authorization: Bearer KEY' on every route but /health (default: the "
                             f"environment variable {API_KEY_ENV}, if set; prefer it: a command line is visible "
                             "to other users of the machine)")
    access.add_argument("--allow-host", action="append", default=[], metavar="HOST",
                        help="also answer requests whose Host header names HOST (repeatable; '*': any). Default: "
                             "the bound address, localhost, 127.0.0.1 and [::1]; others are refused (403), "
                             "which stops DNS rebinding")
    access.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN",
                        help="also accept requests from web pages of ORIGIN, exactly scheme://host[:port], e.g. "
                             "http://localhost:3000 (repeatable; '*': any). Default: only the server's own pages "
                             "(the evidence inspector, same scheme, host and port); requests from every other "
                             "page, other ports of this machine included, are refused (403)")
    access.add_argument("--allow-public-without-key", action="store_true",
                        help="let a non-loopback --host start without an API key (anyone who reaches it can "
                             "read and overwrite every corpus)")
    work = serve.add_argument_group("limits (how much one request may ask)")
    work.add_argument("--max-body-mb", type=float, default=limits.max_body_bytes / MIB, metavar="MB",
                      help=f"largest request body; refused (413) from its Content-Length or as soon as a chunked "
                           f"body passes it (default: {limits.max_body_bytes / MIB:g})")
    work.add_argument("--max-memorize-tokens", type=int, default=limits.max_memorize_tokens, metavar="N",
                      help=f"most tokens of text one memorize may carry, counted before any model work (413) "
                           f"(default: {limits.max_memorize_tokens:,}, about two minutes of memorizing on 2 cores)")
    work.add_argument("--max-query-chars", type=int, default=limits.max_query_chars, metavar="N",
                      help=f"longest query of an ask or clues request (400) (default: {limits.max_query_chars:,})")
    work.add_argument("--job-timeout", type=float, default=limits.job_timeout, metavar="SECONDS",
                      help=f"stop a job that runs longer at its next safe point and tell its client (503); 0: no "
                           f"limit (default: {limits.job_timeout:g})")
    serve.add_argument("--batch-size", type=int, default=8, metavar="N",
                       help="requests whose jobs run at once: the models still do one piece of work at a time, "
                            "but the jobs' greedy decodings are stepped together as one batch and the jobs take "
                            "turns between steps (default: 8; 1: one job at a time, first come first served)")
    work.add_argument("--max-connections", type=int, default=64, metavar="N",
                      help="open connections at once; more are answered 503 (default: 64)")
    add_read_limit_options(work)
    model_options(serve, True, json_output=False)  # the server answers in JSON already; no --json


def serve_options(args: argparse.Namespace) -> tuple[ServeLimits, str | None]:
    """The limits and the API key from the command line, checked before any model loads."""
    from memorag.errors import CliInputError

    if args.max_loaded < 1:
        raise CliInputError(f"--max-loaded {args.max_loaded}: keep at least 1 corpus loaded")
    if not 1 <= args.port <= 65535:
        raise CliInputError(f"--port {args.port} is not a port number (1-65535)")
    if args.max_connections < 1:
        raise CliInputError(f"--max-connections {args.max_connections}: allow at least 1")
    try:
        limits = ServeLimits(max_body_bytes=int(args.max_body_mb * MIB), max_memorize_tokens=args.max_memorize_tokens,
                             max_query_chars=args.max_query_chars, job_timeout=args.job_timeout or None,
                             read=ReadOptions(memory_mb=args.read_memory_mb, seconds=args.read_seconds))
    except ValueError as error:
        raise CliInputError(f"{error} (check --max-body-mb, --max-memorize-tokens, --max-query-chars, "
                            "--job-timeout)") from error
    api_key = args.api_key or os.environ.get(API_KEY_ENV) or None
    if not is_loopback(args.host) and api_key is None and not args.allow_public_without_key:
        raise CliInputError(
            f"--host {args.host} is reachable from other machines and no API key is set: set one with "
            f"{API_KEY_ENV}=... (or --api-key), or pass --allow-public-without-key to serve without one"
        )
    return limits, api_key


def access_policy(args: argparse.Namespace, limits: ServeLimits, api_key: str | None) -> AccessPolicy:
    """Who may ask, from --host, --allow-host and --allow-origin (a bad origin is a usage error)."""
    from memorag.errors import CliInputError

    try:
        return AccessPolicy.for_address(args.host, limits.max_body_bytes, allow_hosts=args.allow_host,
                                        allow_origins=args.allow_origin, api_key=api_key)
    except ValueError as error:
        raise CliInputError(f"--allow-origin: {error}") from error


def exposure(host: str, port: int, api_key: str | None, hosts: frozenset[str]) -> str:
    """The startup line that says who can reach the server."""
    where = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
    allowed = ", ".join(sorted(hosts))
    if is_loopback(host):
        reach = "this machine only (loopback)"
    else:
        reach = "other machines too (not loopback)"
    key = "every route but /health needs the API key" if api_key else "no API key"
    warning = "WARNING: " if not is_loopback(host) and not api_key else ""
    return f"{warning}serving {where} to {reach}; {key}; answering to the hosts {allowed}"


def serve(app: Any, host: str, port: int, log_level: str = "info", max_connections: int | None = None) -> None:
    """Run `app` with uvicorn until SIGINT or SIGTERM; the signal first stops the model worker's
    running job (at its next safe point) and queued ones, so the server exits within seconds."""
    import uvicorn

    worker = app.state.worker

    class StoppingServer(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            worker.stop("the server is shutting down")
            super().handle_exit(sig, frame)

    config = uvicorn.Config(app, host=host, port=port, log_level=log_level, timeout_graceful_shutdown=5,
                            limit_concurrency=max_connections, timeout_keep_alive=5)
    StoppingServer(config).run()


def run_server(args: argparse.Namespace, settings: dict, info: Callable[[str], None]) -> int:
    """Load the models, then serve until interrupted."""
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as error:
        raise ImportError(
            f"memorag serve needs the [serve] extra ({error.name} is missing); install it with "
            "`pip install -e '.[serve]'`"
        ) from error
    from memorag.errors import CliInputError
    from memorag.serve.app import create_app
    from memorag.serve.store import CorpusStore

    limits, api_key = serve_options(args)
    policy = access_policy(args, limits, api_key)
    store = CorpusStore(args.store, settings, max_loaded=args.max_loaded)
    info(f"loading the models for {args.store}...")
    models = store.load_models()
    info("models: " + ", ".join(f"{key} {value}" for key, value in models.items()))
    info(f"corpora in {args.store}: {', '.join(store.names()) or 'none yet'}")
    info(exposure(args.host, args.port, api_key, policy.hosts))
    if args.batch_size < 1:
        raise CliInputError(f"--batch-size {args.batch_size}: give at least 1 (1 runs one job at a time)")
    serve(create_app(store, limits=limits, policy=policy, batch_size=args.batch_size), args.host, args.port, args.log_level, args.max_connections)
    return 0
