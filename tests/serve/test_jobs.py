"""Nothing runs for nobody: jobs of clients who left are dropped or stopped, jobs past the time
limit are stopped and their clients told, SIGTERM stops a busy server within seconds."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
import torch

from memorag.pipeline import read_manifest
from memorag.retrieval.chunking import Document
from memorag.serve.limits import ServeLimits
from memorag.serve.worker import JobCancelled, ModelWorker
from tests.serve.conftest import (
    FakeSlowGenerator,
    fake_store,
    free_port,
    read_events,
    serving,
    topic,
    wait_until,
    wait_up,
)

ROOT = Path(__file__).resolve().parents[2]


def send_and_leave(url: str, path: str, body: bytes, after: float = 0.3) -> None:
    """POST `body` over a plain socket and close the connection `after` seconds later, unread."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as connection:
        connection.sendall(f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
                           f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        time.sleep(after)


class LeaverCounter(logging.Handler):
    """Counts the server's "client left; cancelled ..." records."""

    def __init__(self) -> None:
        super().__init__()
        self.left = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.left += record.getMessage().startswith("client left")


def test_a_client_that_leaves_while_queued_never_runs_its_job(tmp_path):
    # The first job waits on a gate until every leaver's job is queued and cancelled, so the outcome
    # does not depend on how fast the host notices a closed connection.
    gate = threading.Event()
    generator = FakeSlowGenerator(pieces=100, delay=0.02, gate=gate)
    store = fake_store(tmp_path / "store", generator=generator)
    counter = LeaverCounter()
    server_log = logging.getLogger("memorag.serve")
    server_log.addHandler(counter)
    level = server_log.level
    server_log.setLevel(logging.INFO)
    try:
        _leavers_while_queued(store, generator, gate, counter)
    finally:
        server_log.removeHandler(counter)
        server_log.setLevel(level)
        gate.set()


def _leavers_while_queued(store, generator, gate, counter) -> None:
    with serving(store) as url:
        assert httpx.post(f"{url}/corpora/books/memorize", json={"text": topic(0, 60)}, timeout=60).status_code == 200
        first: list = []

        def stay() -> None:
            with httpx.stream("POST", f"{url}/corpora/books/ask", json={"query": topic(0, 4), "mode": "rag"},
                              timeout=60) as response:
                first.extend(read_events(response))

        holder = threading.Thread(target=stay)
        holder.start()
        assert wait_until(lambda: generator.calls == 1)
        ask = b'{"query": "%s", "mode": "rag"}' % topic(0, 4).encode()
        leavers = [threading.Thread(target=send_and_leave, args=(url, "/corpora/books/ask", ask)) for _ in range(3)]
        leavers.append(threading.Thread(target=send_and_leave, args=(
            url, "/corpora/books/ask", ask.replace(b"}", b', "stream": false}'))))
        leavers.append(threading.Thread(target=send_and_leave, args=(
            url, "/corpora/late/memorize", b'{"text": "%s"}' % topic(1, 40).encode())))
        for thread in leavers:
            thread.start()
        for thread in leavers:
            thread.join(10)
        assert wait_until(lambda: counter.left == len(leavers)), f"{counter.left} of {len(leavers)} leavers seen"
        assert generator.calls == 1
        gate.set()
        holder.join(30)
        assert first[-1][0] == "answer"  # the client that stayed got its whole answer
        assert wait_until(lambda: httpx.get(f"{url}/health").json()["pending"] == 0, 10)
        assert generator.calls == 1, "a job ran for a client who had left while it was queued"
        assert not (store.root / "late").exists()
        again = httpx.post(f"{url}/corpora/books/ask", json={"query": topic(0, 4), "mode": "rag", "stream": False},
                           timeout=30)
        assert again.status_code == 200 and generator.calls == 2


def test_a_job_past_its_time_limit_is_stopped_and_its_client_told(tmp_path):
    generator = FakeSlowGenerator(pieces=100, delay=0.02)  # 2 s per answer, the limit 0.5 s
    store = fake_store(tmp_path / "store", generator=generator)
    with serving(store, limits=ServeLimits(job_timeout=0.5)) as url:
        assert httpx.post(f"{url}/corpora/books/memorize", json={"text": topic(0, 60)}, timeout=60).status_code == 200
        body = {"query": topic(0, 4), "mode": "rag"}
        with httpx.stream("POST", f"{url}/corpora/books/ask", json=body, timeout=30) as response:
            events = read_events(response)
        assert events[-1][0] == "error" and events[-1][1]["type"] == "JobCancelled"
        assert "--job-timeout" in events[-1][1]["error"] and generator.sent < 60
        plain = httpx.post(f"{url}/corpora/books/ask", json={**body, "stream": False}, timeout=30)
        assert plain.status_code == 503 and "time limit (0.5 s" in plain.json()["error"]
        assert httpx.get(f"{url}/health").json()["pending"] == 0


def test_model_forward_passes_are_safe_points_of_the_running_job():
    module = torch.nn.Linear(2, 2)
    calls = []

    def busy() -> int:
        for _ in range(500):
            module(torch.zeros(1, 2))
            calls.append(1)
            time.sleep(0.01)
        return len(calls)

    async def scenario() -> None:
        worker = ModelWorker()
        worker.watch(module)
        running = worker.submit(busy)
        queued = worker.submit(busy)
        await asyncio.sleep(0.2)
        queued.cancel("the client left")
        running.cancel("stop now")
        with pytest.raises(JobCancelled, match="stop now"):
            await asyncio.wait_for(running.future, 2)
        with pytest.raises(JobCancelled, match="the client left"):
            await asyncio.wait_for(queued.future, 2)
        assert 5 < len(calls) < 100  # it ran, then stopped at a forward pass; the queued one never started
        module(torch.zeros(1, 2))  # passes outside the worker are not its jobs' safe points
        assert await worker.run(len, "abc") == 3
        worker.stop()
        with pytest.raises(JobCancelled, match="shutting down"):
            worker.submit(len, "abc")
        worker.shutdown()

    asyncio.run(scenario())


def test_a_cancelled_memorize_leaves_the_corpus_as_saved(tmp_path):
    store = fake_store(tmp_path / "store")
    store.memorize("books", [Document("a", topic(0, 60), "")])
    saved = read_manifest(store.root / "books")

    async def cancelled(*args) -> None:
        worker = ModelWorker(time_limit=1e-6)  # out of time at the first safe point
        for module in store.model_modules():
            worker.watch(module)
        with pytest.raises(JobCancelled, match="time limit"):
            await worker.run(store.memorize, "books", *args)
        worker.shutdown()

    asyncio.run(cancelled([Document("b", topic(1, 60), "")]))
    assert "books" not in store.loaded  # the half-built state was dropped
    asyncio.run(cancelled([Document("c", topic(2, 60), "")], True))  # an overwrite
    assert read_manifest(store.root / "books") == saved
    assert [document.id for document in store.pipeline("books").documents] == ["a"]


@pytest.mark.slow
def test_sigterm_stops_a_busy_server_within_seconds(tmp_path):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    server = subprocess.Popen([sys.executable, "-m", "tests.serve.fake_server", "--store", str(tmp_path / "store"),
                               "--port", str(port), "--pieces", "5000", "--delay", "0.02"],  # 100 s per answer
                              cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_up(url, server)
        assert httpx.post(f"{url}/corpora/books/memorize", json={"text": topic(0, 60)}, timeout=60).status_code == 200
        with httpx.stream("POST", f"{url}/corpora/books/ask", json={"query": topic(0, 4), "mode": "rag"},
                          timeout=30) as response:
            lines = response.iter_lines()
            assert any(line == "event: token" for line in lines)  # the worker is busy generating
            server.send_signal(signal.SIGTERM)
            signalled = time.monotonic()
            rest = list(lines)
        server.wait(timeout=30)
        stopped = time.monotonic() - signalled
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    assert stopped < 8, f"the server took {stopped:.1f} s to stop"
    assert server.returncode in (0, -signal.SIGTERM)
    assert "event: error" in rest and any("shutting down" in line for line in rest)
    manifest = read_manifest(tmp_path / "store" / "books")  # the store is whole
    assert [document["id"] for document in manifest["documents"]]


def test_the_safe_points_run_once_a_step_in_the_memory_model_and_a_separate_generator(tmp_path):
    """The worker's safe points (`CorpusStore.model_modules`) are modules every path runs once a step: a
    memorize and an ask reach the memory model's, and a separate local generator decoded by the one loop
    (the plain decoder, which calls no layer as a module) reaches its own."""
    from memorag.generation import LocalGenerator
    from tests.memory.conftest import tiny_base
    from tests.memory.test_persistence import tiny_tokenizer

    generator = LocalGenerator(tiny_base("llama", seed=5), tiny_tokenizer())
    assert generator.loop_decodes
    store = fake_store(tmp_path / "store", generator=generator)
    modules = store.model_modules()
    assert modules[:2] == [store.models.memory_model.embed_tokens, generator.model.get_input_embeddings()]
    calls = [0] * len(modules)
    for index, module in enumerate(modules):
        module.register_forward_pre_hook(lambda *_, index=index: calls.__setitem__(index, calls[index] + 1))
    store.memorize("books", [Document("a", topic(0, 60), "")])
    memorized = list(calls)
    assert memorized[0] > 0
    store.ask("books", topic(0, 6), mode="memorag")
    assert calls[0] > memorized[0] and calls[1] > memorized[1]
