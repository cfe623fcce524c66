"""Two `memorag serve` replicas (processes of their own, on 127.0.0.1) over one store folder: a
corpus written through one is answered by the other without a restart, writes to one corpus
through both at once all end in it, and a replica killed while writing leaves the store whole."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.serve.conftest import free_port, topic, wait_up

ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def replica(store: Path) -> Iterator[tuple[str, subprocess.Popen]]:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen([sys.executable, "-m", "tests.serve.fake_server", "--store", str(store), "--port",
                                str(port), "--pieces", "3", "--delay", "0"], cwd=ROOT, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        yield url, process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()


def documents(url: str, name: str) -> list[str]:
    return httpx.get(f"{url}/corpora/{name}", timeout=60).json()["documents"]


def add(url: str, name: str, doc_id: str, number: int) -> httpx.Response:
    return httpx.post(f"{url}/corpora/{name}/memorize", timeout=300,
                      json={"documents": [{"id": doc_id, "text": topic(number, 120)}]})


@pytest.mark.slow
def test_two_replicas_share_one_store(tmp_path):
    store = tmp_path / "store"
    with replica(store) as (first, first_process), replica(store) as (second, second_process):
        wait_up(first, first_process)
        wait_up(second, second_process)
        assert add(first, "books", "one", 0).status_code == 200
        answer = httpx.post(f"{second}/corpora/books/ask", timeout=60,
                            json={"query": topic(0, 6), "mode": "rag", "stream": False})
        assert answer.status_code == 200 and {item["doc_id"] for item in answer.json()["evidence"]} == {"one"}
        # each has "books" in memory now; a write through one is seen by the other at once
        assert add(second, "books", "two", 1).status_code == 200
        assert documents(first, "books") == ["one", "two"]
        answer = httpx.post(f"{first}/corpora/books/ask", timeout=60,
                            json={"query": topic(1, 6), "mode": "rag", "stream": False})
        assert "two" in {item["doc_id"] for item in answer.json()["evidence"]}
        # writes to one corpus through both replicas at once: both end in it
        results = {}
        writers = [threading.Thread(target=lambda url=url, n=n: results.setdefault(n, add(url, "shared", f"d{n}", n)))
                   for n, url in enumerate([first, second, first, second])]
        for writer in writers:
            writer.start()
        for writer in writers:
            writer.join(600)
        assert all(response.status_code == 200 for response in results.values()), results
        assert sorted(documents(first, "shared")) == sorted(documents(second, "shared")) == ["d0", "d1", "d2", "d3"]
        # a replica killed while it writes leaves the corpus whole: as it was, or with the new document
        killer = threading.Timer(0.3, lambda: first_process.send_signal(signal.SIGKILL))
        killer.start()
        try:
            add(first, "books", "three", 2)
        except httpx.TransportError:
            pass
        killer.join()
        first_process.wait(30)
        assert documents(second, "books") in (["one", "two"], ["one", "two", "three"])
        assert add(second, "books", "four", 3).status_code == 200  # the dead lock is gone; a text of its own (one already memorized is skipped)
        assert documents(second, "books")[-1] == "four"
        assert sorted(entry.name for entry in store.iterdir() if not entry.name.endswith(".lock")) == \
            ["books", "shared"]
