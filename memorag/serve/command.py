"""`memorag serve`: the HTTP server over a folder of named corpora.

    memorag serve --host 127.0.0.1 --port 8000 --store corpora/
    memorag serve --store corpora/ --retriever bm25 --set hits_per_query=8

Loads the models once, then serves the API of `memorag.serve.app` with uvicorn until
interrupted. Takes the same model options as `memorag memorize` and `memorag ask`.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable


def add_serve_parser(commands, model_options: Callable[[argparse.ArgumentParser, bool], None]) -> None:
    serve = commands.add_parser(
        "serve", help="serve memorize, ask (streamed), clues and corpora over HTTP",
        description="Serve an HTTP API over the corpora saved in --store: POST /corpora/NAME/memorize, "
                    "POST /corpora/NAME/ask (server-sent events), POST /corpora/NAME/clues, GET /corpora, "
                    "DELETE /corpora/NAME, GET /health. The models load once and are shared by every request; "
                    "model work runs one request at a time, in arrival order. Needs the [serve] extra.",
    )
    serve.add_argument("--store", required=True, metavar="DIR", help="folder of corpora (one saved pipeline each)")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1, this machine only)")
    serve.add_argument("--port", type=int, default=8000, help="port (default: 8000)")
    serve.add_argument("--max-loaded", type=int, default=4, metavar="N",
                       help="corpora kept in memory at once; others are reloaded from --store when asked (default: 4)")
    serve.add_argument("--log-level", default="info", choices=("critical", "error", "warning", "info", "debug"),
                       help="uvicorn's log level (default: info)")
    model_options(serve, True)


def run_server(args: argparse.Namespace, settings: dict, info: Callable[[str], None]) -> int:
    """Load the models, then serve until interrupted."""
    try:
        import starlette  # noqa: F401
        import uvicorn
    except ImportError as error:
        raise ImportError(
            f"memorag serve needs the [serve] extra ({error.name} is missing); install it with "
            "`pip install -e '.[serve]'`"
        ) from error
    from memorag.errors import CliInputError
    from memorag.serve.app import create_app
    from memorag.serve.store import CorpusStore

    if args.max_loaded < 1:
        raise CliInputError(f"--max-loaded {args.max_loaded}: keep at least 1 corpus loaded")
    if not 1 <= args.port <= 65535:
        raise CliInputError(f"--port {args.port} is not a port number (1-65535)")
    store = CorpusStore(args.store, settings, max_loaded=args.max_loaded)
    info(f"loading the models for {args.store}...")
    models = store.load_models()
    info("models: " + ", ".join(f"{key} {value}" for key, value in models.items()))
    info(f"corpora in {args.store}: {', '.join(store.names()) or 'none yet'}")
    config = uvicorn.Config(create_app(store), host=args.host, port=args.port, log_level=args.log_level,
                            timeout_graceful_shutdown=5)
    uvicorn.Server(config).run()
    return 0
