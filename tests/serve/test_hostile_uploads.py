"""The hostile documents of the documents suite (memorag.benchmarking.hostile_documents) sent to the
server as uploads while another client uses it: each is a 400 naming the file, the other client is
answered throughout, and a corpus saved before is untouched. The cheap cases, refused by the format
checks before anything is inflated, run by default; those stopped only by the reader process's
memory or time limit are slow."""

from __future__ import annotations

import base64
import concurrent.futures
import time

import httpx
import pytest

from memorag.benchmarking import hostile_documents as hostile
from memorag.documents.options import ReadOptions
from memorag.serve.limits import ServeLimits
from tests.serve.conftest import fake_store, serving, topic

GB = 10**9

CHEAP = {
    "ratio-bomb.docx": lambda: hostile.paragraphs_docx(int(1.2 * GB)),
    "laughs.docx": lambda: hostile.laughs_docx(),
    "span.docx": lambda: hostile.grid_span_docx(),
    "members.docx": lambda: hostile.many_members_docx(20_000),
    "cut.docx": lambda: hostile.truncated_docx(),
    "tree.pdf": lambda: hostile.page_tree_pdf(),
}
HEAVY = {
    "stream-bomb.pdf": lambda: hostile.stream_bomb_pdf(900_000_000, pages=4),
    "formatting-bomb.html": lambda: hostile.formatting_bomb_html(),
}


def refused_while_another_client_is_answered(tmp_path, name: str, data: bytes, read: ReadOptions) -> None:
    store = fake_store(tmp_path)
    limits = ServeLimits(max_body_bytes=64 * 2**20, read=read)
    with serving(store, limits=limits) as url:
        before = httpx.post(f"{url}/corpora/kept/memorize", json={"text": topic(0, 40)}, timeout=120)
        assert before.status_code == 200, before.text
        kept = httpx.get(f"{url}/corpora/kept", timeout=30).json()
        body = {"files": [{"name": name, "base64": base64.b64encode(data).decode()}]}
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            sent = pool.submit(httpx.post, f"{url}/corpora/bad/memorize", json=body, timeout=read.seconds + 120)
            waits = []
            while not sent.done():
                started = time.monotonic()
                assert httpx.get(f"{url}/health", timeout=30).status_code == 200
                waits.append(time.monotonic() - started)
                time.sleep(0.2)
            response = sent.result()
        assert response.status_code == 400, response.text
        assert name in response.json()["error"], response.text
        assert all(wait < 10 for wait in waits), waits  # the event loop never waited on the reading
        assert httpx.get(f"{url}/corpora/kept", timeout=30).json() == kept
    assert not store.exists("bad")


@pytest.mark.parametrize("name", sorted(CHEAP))
def test_a_hostile_upload_is_a_400_naming_it_while_others_are_answered(tmp_path, name):
    refused_while_another_client_is_answered(tmp_path, name, CHEAP[name](), ReadOptions())


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(HEAVY))
def test_an_upload_stopped_by_the_readers_limits_is_a_400_naming_it(tmp_path, name):
    refused_while_another_client_is_answered(tmp_path, name, HEAVY[name](), ReadOptions(memory_mb=1024, seconds=60))
