"""Every bad input gets a 4xx before any model work, and no response carries a path or a traceback."""

from __future__ import annotations

import json
from contextlib import contextmanager

import httpx

from memorag.serve.limits import ServeLimits
from tests.pipeline.conftest import FakeEchoGenerator, tiny_model
from tests.serve.conftest import JSON, fake_store, raw_request, serving, topic


@contextmanager
def counted_server(tmp_path, **app_options):
    """A server over a store whose memory model counts its steps (model work: its token embedding runs once
    a step) and whose generator has a 200-token window."""
    model = tiny_model()
    passes = []
    model.embed_tokens.register_forward_pre_hook(lambda *_: passes.append(1))
    store = fake_store(tmp_path / "store", generator=FakeEchoGenerator(context_window=200), memory_model=model)
    with serving(store, **app_options) as url:
        assert httpx.post(f"{url}/corpora/books/memorize", json={"documents": [{"id": "doc0", "text": topic(0, 60)}]},
                          timeout=60).status_code == 200
        passes.clear()
        yield url, store, passes


def refused(response: httpx.Response, status: int = 400) -> str:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    return response.json()["error"]


def test_deep_json_surrogates_and_invalid_text_are_refused_before_model_work(tmp_path):
    with counted_server(tmp_path) as (url, store, passes):
        ask, clues, memorize = (f"{url}/corpora/books/{route}" for route in ("ask", "clues", "memorize"))
        deep = b"[" * 100_000
        assert "nested too deeply" in refused(httpx.post(ask, content=deep, headers=JSON))
        assert "nested too deeply" in refused(httpx.post(memorize, content=b'{"documents": ' + deep, headers=JSON))
        nested = json.dumps({"query": "x", "extra": [[[[[[[[[[[[[[[[[["x"]]]]]]]]]]]]]]]]]]})
        assert "at most 16 levels" in refused(httpx.post(ask, content=nested, headers=JSON))

        bodies = [(ask, r'{"query": "\ud800"}'), (clues, r'{"query": "ab \ud800"}'),
                  (ask, r'{"query": "x", "mode": "\ud800"}'), (memorize, r'{"text": "\ud800"}'),
                  (memorize, r'{"documents": [{"id": "\ud800", "text": "ab ac"}]}'),
                  (memorize, r'{"documents": [{"id": "d", "title": "\udfff", "text": "ab ac"}]}'),
                  (memorize, r'{"documents": [{"id": "d", "text": "ab ac \ud800"}]}'),
                  (memorize, r'{"\ud800": 1, "text": "ab"}')]
        for route, body in bodies:  # a lone surrogate: valid JSON, not valid text
            message = refused(httpx.post(route, content=body, headers=JSON))
            assert "lone surrogate" in message, (route, body, message)
        invalid_utf8 = b'{"query": "caf\xe9"}'
        assert "not valid JSON" in refused(httpx.post(ask, content=invalid_utf8, headers=JSON))
        assert passes == []  # no model work for any of them
        assert httpx.get(f"{url}/corpora/books").json()["documents"] == ["doc0"]


def test_long_queries_are_refused_on_every_route_before_model_work(tmp_path):
    with counted_server(tmp_path) as (url, store, passes):
        huge = "ab " * 350_000  # about 1 MB
        for route in ("clues", "ask"):
            message = refused(httpx.post(f"{url}/corpora/books/{route}", json={"query": huge}, timeout=30))
            assert "1,050,000 characters" in message and "--max-query-chars" in message
        assert passes == []
    # under the character limit but beyond the generator's window: refused by tokens, as ask does
    with counted_server(tmp_path / "2", limits=ServeLimits(max_query_chars=10_000)) as (url, store, passes):
        long_query = " ".join(["ab"] * 400)
        for route in ("clues", "ask"):
            message = refused(httpx.post(f"{url}/corpora/books/{route}", json={"query": long_query}, timeout=30))
            assert "leaves no room for evidence" in message and "shorten the query" in message, route
        assert passes == []


def test_a_memorize_over_the_token_limit_is_refused_before_model_work(tmp_path):
    with counted_server(tmp_path, limits=ServeLimits(max_memorize_tokens=100)) as (url, store, passes):
        response = httpx.post(f"{url}/corpora/books/memorize", timeout=30, json={"documents": [
            {"id": "a", "text": topic(1, 60)}, {"id": "b", "title": "ab ac", "text": topic(2, 60)}]})
        message = refused(response, 413)
        assert "more than 100 tokens" in message and "--max-memorize-tokens" in message
        assert passes == []
        assert httpx.get(f"{url}/corpora/books").json()["documents"] == ["doc0"]
        small = httpx.post(f"{url}/corpora/books/memorize", json={"documents": [{"id": "a", "text": topic(1, 60)}]},
                           timeout=60)
        assert small.status_code == 200 and passes


def test_errors_carry_no_paths_no_tracebacks_and_short_echoes(tmp_path):
    class BrokenGenerator(FakeEchoGenerator):
        def generate(self, prompt, **kwargs):
            raise RuntimeError(f"cannot open {tmp_path}/secret/weights.bin\nTraceback (most recent call last):")

    store = fake_store(tmp_path / "store", generator=BrokenGenerator())
    with serving(store) as url:
        assert httpx.post(f"{url}/corpora/books/memorize", json={"text": topic(0, 60)}, timeout=60).status_code == 200
        failed = httpx.post(f"{url}/corpora/books/ask", json={"query": topic(0, 4), "stream": False}, timeout=60)
        assert failed.status_code == 500 and failed.json()["type"] == "InternalError"
        assert str(tmp_path) not in failed.text and "Traceback" not in failed.text and "secret" not in failed.text

        store.drop("books")
        with open(store.root / "books" / "documents.jsonl", "a") as damaged_file:
            damaged_file.write("x")
        damaged = httpx.post(f"{url}/corpora/books/clues", json={"query": topic(0, 4)}, timeout=60)
        assert damaged.status_code == 500 and damaged.json()["type"] == "SaveFormatError"
        assert str(tmp_path) not in damaged.text and "books/documents.jsonl" in damaged.json()["error"]

        long_name = "a" * 100_000  # too long for httpx's URLs: sent over a plain socket
        host = url.removeprefix("http://")
        status, named = raw_request(url, f"POST /corpora/-{long_name}/ask HTTP/1.1\r\nHost: {host}\r\n"
                                         "Content-Type: application/json\r\nContent-Length: 14\r\n"
                                         "Connection: close", b'{"query": "x"}')
        assert status == 400 and b"is not allowed" in named and len(named) < 600
        status, missing = raw_request(url, f"GET /{long_name} HTTP/1.1\r\nHost: {host}\r\nConnection: close")
        assert status == 404 and b"no route" in missing and len(missing) < 600
        conflict = httpx.post(f"{url}/corpora/x/memorize", json={"documents": [{"id": long_name, "text": ""}]})
        assert "is empty" in refused(conflict) and len(conflict.text) < 400
