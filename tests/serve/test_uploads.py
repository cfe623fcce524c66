"""Uploads are read off the event loop: while one is read, /health and other clients' questions
are answered; the job time limit bounds the wait for it; a file that cannot be read (a truncated
Word file, a reader that fails in a way nobody foresaw) is a 400 naming it, never a 500.

The slow reader is a fake (`memorag.documents.extract` replaced), held on an event the test
opens, so that "while it is read" is a fact, not a timing guess."""

from __future__ import annotations

import base64
import threading
import time

import httpx
import pytest

import memorag.documents
from memorag.retrieval.chunking import Document
from memorag.serve.limits import ServeLimits
from tests.documents.builders import docx_bytes
from tests.serve.conftest import fake_store, serving, topic


def upload(name: str, data: bytes) -> dict:
    return {"name": name, "base64": base64.b64encode(data).decode()}


class FakeHeldReader:
    """A fake document reader that blocks until `release` is set, recording the thread it ran on."""

    def __init__(self) -> None:
        self.started, self.release = threading.Event(), threading.Event()
        self.threads: list[str] = []
        self.real = memorag.documents.extract

    def __call__(self, data: bytes, name: str, *args, **kwargs):
        self.threads.append(threading.current_thread().name)
        self.started.set()
        assert self.release.wait(60), "the test never released the fake reader"
        return self.real(data, name, *args, **kwargs)


@pytest.fixture
def held_reader(monkeypatch) -> FakeHeldReader:
    reader = FakeHeldReader()
    monkeypatch.setattr(memorag.documents, "extract", reader)
    yield reader
    reader.release.set()


def test_health_and_other_questions_are_answered_while_an_upload_is_read(tmp_path, held_reader):
    store = fake_store(tmp_path / "store")
    store.memorize("other", [Document(id="a", title="", text=topic(0, 200))])
    with serving(store) as url:
        with httpx.Client(timeout=60) as client:
            outcome = {}
            sender = threading.Thread(target=lambda: outcome.setdefault("upload", client.post(
                f"{url}/corpora/docs/memorize", json={"files": [upload("guide.md", f"# Guide\n\n{topic(1, 80)}\n"
                                                                        .encode())]})))
            sender.start()
            assert held_reader.started.wait(30)
            began = time.monotonic()
            with httpx.Client(timeout=30) as other:
                assert other.get(f"{url}/health").status_code == 200
                answer = other.post(f"{url}/corpora/other/ask", json={"query": topic(0, 6), "stream": False,
                                                                      "mode": "rag"})
            waited = time.monotonic() - began
            assert answer.status_code == 200, answer.text
            assert not outcome and sender.is_alive()  # the upload was still being read all along
            held_reader.release.set()
            sender.join(60)
    assert outcome["upload"].status_code == 200, outcome["upload"].text
    assert outcome["upload"].json()["added"] == ["guide.md"]
    assert held_reader.threads == ["memorag-uploads_0"]
    assert waited < 30  # generous: answered while the read was held, not after


def test_the_job_time_limit_bounds_the_wait_for_an_upload(tmp_path, held_reader):
    store = fake_store(tmp_path / "store")
    with serving(store, limits=ServeLimits(job_timeout=0.5)) as url:
        response = httpx.post(f"{url}/corpora/docs/memorize", timeout=60,
                              json={"files": [upload("slow.md", b"# Slow\n\nsome text\n")]})
        held_reader.release.set()
    assert response.status_code == 503, response.text
    assert "slow.md" in response.json()["error"] and "--job-timeout" in response.json()["error"]
    assert not store.exists("docs")


def test_a_truncated_word_file_is_a_400_naming_it(server):
    url, store = server
    whole = docx_bytes([("h1", "Title"), ("p", topic(0, 60))])
    response = httpx.post(f"{url}/corpora/docs/memorize", timeout=60,
                          json={"files": [upload("cut.docx", whole[: len(whole) * 2 // 3])]})
    assert response.status_code == 400, response.text
    assert "cut.docx" in response.json()["error"]
    assert not store.exists("docs")


def test_any_exception_of_a_reader_is_a_400_naming_the_file(server, monkeypatch):
    url, store = server

    def broken(data: bytes, name: str, *args, **kwargs):
        raise RuntimeError("a parser failed in a way nobody foresaw")

    monkeypatch.setattr(memorag.documents, "extract", broken)
    response = httpx.post(f"{url}/corpora/docs/memorize", timeout=60,
                          json={"files": [upload("odd.html", b"<p>hello</p>")]})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error.startswith("odd.html: cannot be read (RuntimeError: a parser failed") and "save it again" in error
    assert httpx.get(f"{url}/health", timeout=30).status_code == 200
