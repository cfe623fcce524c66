"""A running `memorag serve` app on 127.0.0.1 (a free port, in a thread), over tiny fake models."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

pytest.importorskip("starlette", reason="the [serve] extra is not installed")
uvicorn = pytest.importorskip("uvicorn", reason="the [serve] extra is not installed")
httpx = pytest.importorskip("httpx", reason="the [serve] extra is not installed")

from memorag.generation import Generator  # noqa: E402
from memorag.serve.app import create_app  # noqa: E402
from memorag.serve.store import CorpusStore  # noqa: E402
from tests.pipeline.conftest import (  # noqa: E402
    ASK_SETTINGS,
    FakeEchoGenerator,
    FakeHashEmbedder,
    one_thread,  # noqa: F401 -- autouse fixture: tiny models on one torch thread
    tiny_model,
    topic,
)

SETTINGS = {**ASK_SETTINGS, "chunk_tokens": 16, "overlap_tokens": 4}
JSON = {"content-type": "application/json"}


class FakeSlowGenerator(FakeEchoGenerator):
    """A fake generator that streams `pieces` words, `delay` seconds apart, and records how many it
    sent and how many generations ran at the same time (the server must run one at a time).

    `gate`: an event every generation waits for before it starts (up to a minute), so that a test
    decides when the first job may end instead of racing it."""

    name = "fake-slow"

    def __init__(self, pieces: int = 40, delay: float = 0.02, gate: threading.Event | None = None):
        super().__init__(reply=" ".join(f"w{i}" for i in range(pieces)))
        self.delay = delay
        self.gate = gate
        self.sent = 0
        self.running = 0
        self.most_running = 0
        self.calls = 0
        self._lock = threading.Lock()

    def generate(self, prompt, *, system=None, max_new_tokens=256, on_text=None) -> str:
        with self._lock:
            self.running += 1
            self.calls += 1
            self.most_running = max(self.most_running, self.running)
        try:
            if self.gate is not None:
                assert self.gate.wait(60), "the test never opened the fake generator's gate"
            for piece in self.reply.split(" "):
                time.sleep(self.delay)
                if on_text is not None:
                    on_text(piece + " ")
                self.sent += 1
            return self.reply
        finally:
            with self._lock:
                self.running -= 1


def fake_store(root, generator: Generator | None = None, **kwargs) -> CorpusStore:
    """A store over a tiny random memory model, the fake hashed embedder and a fake generator."""
    return CorpusStore(root, SETTINGS, memory_model=kwargs.pop("memory_model", None) or tiny_model(),
                       embedder=FakeHashEmbedder(),
                       embedder_name="fake-hash", generator=generator or FakeEchoGenerator(), **kwargs)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def serving(store: CorpusStore, **app_options) -> Iterator[str]:
    """Run the app (`create_app(store, **app_options)`) with uvicorn on 127.0.0.1 in a thread; yields
    its base URL, stops it after."""
    server = uvicorn.Server(uvicorn.Config(create_app(store, **app_options), host="127.0.0.1", port=free_port(),
                                           log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, name="test-uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{server.config.port}"
    finally:
        server.should_exit = True
        thread.join(15)


def raw_request(url: str, head: str, body: bytes = b"", timeout: float = 10) -> tuple[int, bytes]:
    """Send `head` (request line and headers, CRLF-separated, without the blank line) and `body` over
    a plain socket; the response's status and raw bytes (read until the server closes or `timeout`)."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=timeout) as connection:
        connection.sendall(head.encode("latin-1") + b"\r\n\r\n" + body)
        received = b""
        deadline = time.monotonic() + timeout
        while b"\r\n\r\n" not in received or not _complete(received):
            if time.monotonic() > deadline:
                break
            try:
                piece = connection.recv(65536)
            except TimeoutError:
                break
            if not piece:
                break
            received += piece
    return int(received.split(b" ", 2)[1]) if received else 0, received


def _complete(response: bytes) -> bool:
    head, _, body = response.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return len(body) >= int(line.split(b":")[1])
    return False


def read_events(response) -> list[tuple[str, object]]:
    """The server-sent events of a streamed response, as (event, decoded data)."""
    events, event, data = [], None, []
    for line in response.iter_lines():
        if line.startswith("event: "):
            event = line[len("event: "):]
        elif line.startswith("data: "):
            data.append(line[len("data: "):])
        elif not line and event is not None:
            events.append((event, json.loads("\n".join(data))))
            event, data = None, []
    return events


@pytest.fixture
def server(tmp_path) -> Iterator[tuple[str, CorpusStore]]:
    store = fake_store(tmp_path / "store")
    with serving(store) as url:
        yield url, store


__all__ = ["JSON", "FakeSlowGenerator", "fake_store", "raw_request", "read_events", "serving", "topic"]


def wait_until(condition, seconds: float = 20, step: float = 0.02) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(step)
    return True


def wait_up(url: str, process: subprocess.Popen) -> None:
    def up() -> bool:
        assert process.poll() is None, process.stdout.read()
        try:
            return httpx.get(f"{url}/health", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    assert wait_until(up, 300, 0.2), "the server did not start"  # imports alone can take a minute on a loaded host
