"""`memorag serve`'s server loop over the tests' fake models, in a process of its own, so that tests
can send it real signals:

    python -m tests.serve.fake_server --store DIR --port N [--pieces 2000 --delay 0.05]

It serves with `memorag.serve.command.serve` (what `memorag serve` runs after loading its
models) and prints one line, `ready`, once the app is built.
"""

from __future__ import annotations

import argparse

from memorag.serve.app import create_app
from memorag.serve.command import serve
from tests.serve.conftest import FakeSlowGenerator, fake_store


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--pieces", type=int, default=40, help="words of each fake answer")
    parser.add_argument("--delay", type=float, default=0.02, help="seconds between the words")
    args = parser.parse_args()
    app = create_app(fake_store(args.store, generator=FakeSlowGenerator(args.pieces, args.delay)))
    print("ready", flush=True)
    serve(app, "127.0.0.1", args.port, log_level="warning")


if __name__ == "__main__":
    main()
