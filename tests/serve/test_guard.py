"""Who may ask `memorag serve` and how much they may send (memorag/serve/guard.py), over real HTTP on 127.0.0.1."""

from __future__ import annotations

import select
import socket
import time

import httpx
import pytest

from memorag.serve.guard import AccessPolicy, host_name, is_loopback, normalize_origin
from memorag.serve.limits import ServeLimits
from tests.serve.conftest import JSON, fake_store, raw_request, serving, topic

DOCUMENTS = {"documents": [{"id": "mine", "title": "", "text": topic(0, 60)}]}


def documents_of(url: str, name: str) -> list[str]:
    return httpx.get(f"{url}/corpora/{name}").json()["documents"]


def test_a_foreign_page_or_host_cannot_overwrite_a_corpus(server):
    url, _ = server
    port = url.rsplit(":", 1)[1]
    assert httpx.post(f"{url}/corpora/victim/memorize", json=DOCUMENTS, timeout=60).status_code == 200
    attack = b'{"text": "pwned", "overwrite": true}'
    memorize = f"{url}/corpora/victim/memorize"

    # the request: a foreign Origin and Host, a form-like text/plain body
    refused = httpx.post(memorize, content=attack, headers={"origin": "http://evil.example",
                                                            "host": f"attacker.example:{port}",
                                                            "content-type": "text/plain"})
    assert refused.status_code == 403 and refused.json()["type"] == "ForbiddenHost"
    origin = httpx.post(memorize, content=attack, headers={**JSON, "origin": "http://evil.example"})
    assert origin.status_code == 403 and "--allow-origin" in origin.json()["error"]
    assert "access-control-allow-origin" not in origin.headers
    host = httpx.post(memorize, content=attack, headers={**JSON, "host": f"attacker.example:{port}"})
    assert host.status_code == 403 and "attacker.example" in host.json()["error"]
    plain = httpx.post(memorize, content=attack, headers={"content-type": "text/plain"})
    assert plain.status_code == 415 and "application/json" in plain.json()["error"]
    form = httpx.post(memorize, data={"text": "pwned"})  # what an HTML form sends
    assert form.status_code == 415
    null_origin = httpx.post(memorize, content=attack, headers={**JSON, "origin": "null"})  # sandboxed frame
    assert null_origin.status_code == 403
    preflight = httpx.options(memorize, headers={"origin": "http://evil.example",
                                                 "access-control-request-method": "POST"})
    assert preflight.status_code == 403
    # a read by a rebound DNS name is refused too
    assert httpx.get(f"{url}/corpora", headers={"host": f"rebound.example:{port}"}).status_code == 403
    assert documents_of(url, "victim") == ["mine"]

    # a page on another port of this machine may neither write nor read (the request: port 5555)
    for other in ("http://127.0.0.1:5555", "http://localhost:3000", f"https://127.0.0.1:{port}"):
        refused = httpx.post(memorize, content=attack, headers={**JSON, "origin": other})
        assert refused.status_code == 403 and refused.json()["type"] == "ForbiddenOrigin", other
        assert httpx.get(f"{url}/corpora", headers={"origin": other}).status_code == 403, other
        assert httpx.options(memorize, headers={"origin": other, "access-control-request-method": "POST"}
                             ).status_code == 403, other
    assert httpx.post(f"{url}/corpora/made/memorize", json=DOCUMENTS,
                      headers={"origin": "http://127.0.0.1:5555"}).status_code == 403
    assert httpx.get(f"{url}/corpora/made").status_code == 404  # nothing was created
    # the server's own page (scheme, host and port exactly) may, under each name it answers to
    for own in (f"http://127.0.0.1:{port}", f"http://localhost:{port}"):
        host = own.removeprefix("http://")
        local = httpx.post(f"{url}/corpora/victim/clues", json={"query": topic(0, 4)},
                           headers={"origin": own, "host": host}, timeout=60)
        assert local.status_code == 200 and "access-control-allow-origin" not in local.headers, own
    for host in (f"localhost:{port}", f"127.0.0.1:{port}", "[::1]", "LOCALHOST."):
        assert httpx.get(f"{url}/corpora", headers={"host": host}).status_code == 200, host


def test_allow_host_and_allow_origin_extend_the_list(tmp_path):
    policy = AccessPolicy.for_address("127.0.0.1", 2**20, allow_hosts=["MyServer.lan"],
                                      allow_origins=["https://app.example.com"])
    with serving(fake_store(tmp_path / "store"), policy=policy) as url:
        port = url.rsplit(":", 1)[1]
        assert httpx.get(f"{url}/corpora", headers={"host": f"myserver.lan:{port}"}).status_code == 200
        assert httpx.get(f"{url}/corpora", headers={"host": f"other.lan:{port}"}).status_code == 403
        assert httpx.get(f"{url}/corpora", headers={"origin": "https://app.example.com"}).status_code == 200
        assert httpx.get(f"{url}/corpora", headers={"origin": "https://app.example.com:444"}).status_code == 403
        assert httpx.get(f"{url}/corpora", headers={"origin": "http://app.example.com"}).status_code == 403


def test_allow_origin_lets_a_page_on_another_port_write_and_read(tmp_path):
    policy = AccessPolicy.for_address("127.0.0.1", 2**20, allow_origins=["http://127.0.0.1:5555",
                                                                         "http://localhost:3000"])
    with serving(fake_store(tmp_path / "store"), policy=policy) as url:
        memorize = f"{url}/corpora/made/memorize"
        for origin in ("http://127.0.0.1:5555", "http://localhost:3000"):
            written = httpx.post(memorize, json={**DOCUMENTS, "overwrite": True}, headers={"origin": origin},
                                 timeout=60)
            assert written.status_code == 200 and written.headers["access-control-allow-origin"] == origin
            preflight = httpx.options(memorize, headers={"origin": origin, "access-control-request-method": "POST"})
            assert preflight.status_code == 204 and "content-type" in preflight.headers["access-control-allow-headers"]
        assert documents_of(url, "made") == ["mine"]
        # only those: another port, or the same port over https, is still refused
        for origin in ("http://127.0.0.1:5556", "https://127.0.0.1:5555", "http://localhost:5555"):
            assert httpx.post(memorize, json=DOCUMENTS, headers={"origin": origin}).status_code == 403, origin


def test_every_reply_says_nosniff(server):
    url, _ = server
    assert httpx.post(f"{url}/corpora/a/memorize", json=DOCUMENTS, timeout=60).status_code == 200
    replies = {
        "json": httpx.get(f"{url}/corpora"),
        "health": httpx.get(f"{url}/health"),
        "not found": httpx.get(f"{url}/corpora/none"),
        "no route": httpx.get(f"{url}/nowhere"),
        "bad input": httpx.post(f"{url}/corpora/a/ask", json={"query": ""}),
        "refused by the guard": httpx.post(f"{url}/corpora/a/ask", content=b"{}", headers={"origin": "null",
                                                                                          **JSON}),
        "wrong media type": httpx.post(f"{url}/corpora/a/ask", content=b"{}"),
        "the page": httpx.get(f"{url}/"),
        "its script": httpx.get(f"{url}/inspector.js"),
    }
    with httpx.stream("POST", f"{url}/corpora/a/ask", json={"query": topic(0, 4)}, timeout=60) as stream:
        replies["event stream"] = stream
        stream.read()
    assert replies["not found"].status_code == 404 and replies["refused by the guard"].status_code == 403
    assert replies["bad input"].status_code == 400 and replies["wrong media type"].status_code == 415
    for kind, reply in replies.items():
        assert reply.headers.get_list("x-content-type-options") == ["nosniff"], kind


def test_the_api_key_guards_every_route_but_health(tmp_path):
    policy = AccessPolicy.for_address("127.0.0.1", 2**20, api_key="s3cret-key")
    store = fake_store(tmp_path / "store")
    with serving(store, policy=policy) as url:
        key = {"authorization": "Bearer s3cret-key"}
        requests = [("GET", "/corpora", None), ("GET", "/corpora/a", None), ("DELETE", "/corpora/a", None),
                    ("POST", "/corpora/a/memorize", {"text": topic(1, 40)}), ("POST", "/corpora/a/ask", {"query": "x"}),
                    ("POST", "/corpora/a/clues", {"query": "x"})]
        for method, path, body in requests:
            for headers in ({}, {"authorization": "Bearer wrong"}, {"authorization": "s3cret-key"}):
                response = httpx.request(method, url + path, json=body, headers=headers)
                assert response.status_code == 401, (method, path, headers)
                assert response.headers["www-authenticate"] == "Bearer" and "API key" in response.json()["error"]
        assert not (store.root / "a").exists()
        health = httpx.get(f"{url}/health")
        assert health.status_code == 200 and "loaded" not in health.json()  # corpus names need the key
        assert "loaded" in httpx.get(f"{url}/health", headers=key).json()
        made = httpx.post(f"{url}/corpora/a/memorize", json={"text": topic(1, 40)}, headers=key, timeout=60)
        assert made.status_code == 200
        assert httpx.get(f"{url}/corpora", headers=key).json()["corpora"][0]["name"] == "a"


def test_a_declared_1gb_body_is_refused_before_it_is_read(server):
    url, store = server
    host = url.removeprefix("http://")
    started = time.monotonic()
    status, reply = raw_request(url, f"POST /corpora/big/memorize HTTP/1.1\r\nHost: {host}\r\n"
                                     "Content-Type: application/json\r\nContent-Length: 1000000000",
                                body=b'{"text": "a', timeout=10)
    assert status == 413 and b"--max-body-mb" in reply
    assert time.monotonic() - started < 5  # answered at once, not after waiting for the body
    assert not (store.root / "big").exists()
    bad = raw_request(url, f"POST /corpora/big/memorize HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json"
                           "\r\nContent-Length: 12\r\nContent-Length: 13", body=b"{}")[0]
    assert bad == 400  # conflicting lengths: refused by the HTTP layer


def test_a_chunked_body_is_counted_while_it_arrives(tmp_path):
    limit = 64 * 1024
    with serving(fake_store(tmp_path / "store"), limits=ServeLimits(max_body_bytes=limit)) as url:
        host, port = url.removeprefix("http://").split(":")
        chunk = b"a" * 65536
        sent = 0
        with socket.create_connection((host, int(port)), timeout=10) as connection:
            connection.sendall(f"POST /corpora/big/memorize HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: "
                               "application/json\r\nTransfer-Encoding: chunked\r\n\r\n".encode())
            deadline = time.monotonic() + 20
            answered = False
            while sent < 256 * 2**20 and time.monotonic() < deadline:  # at most 256 MiB, 20 s
                if select.select([connection], [], [], 0)[0]:
                    answered = True
                    break
                try:
                    connection.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
                except OSError:  # the server closed the connection after answering
                    answered = True
                    break
                sent += len(chunk)
            assert answered, f"no answer after {sent:,} bytes"
            reply = b""
            while b"\r\n\r\n" not in reply or reply.endswith(b"\r\n\r\n"):  # the head, then the body
                part = connection.recv(65536)  # the reply may come in more than one segment
                if not part:
                    break
                reply += part
        assert reply.split(b" ", 2)[1] == b"413" and b"more than 65,536 bytes" in reply
        assert sent < 32 * 2**20  # refused while arriving (loopback buffers hold a few MiB), not at the end
        small = httpx.post(f"{url}/corpora/ok/memorize", json={"text": topic(2, 30)}, timeout=60)
        assert small.status_code == 200  # the limit refuses only what passes it


def test_policy_parsing():
    assert host_name("Example.COM:8000") == "example.com" and host_name("[::1]:80") == "::1"
    assert host_name("localhost.") == "localhost"
    assert is_loopback("127.0.0.5") and is_loopback("::1") and is_loopback("localhost") and is_loopback("[::1]")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.2") and not is_loopback("example.com")
    assert normalize_origin("HTTPS://App.Example.com:443/") == "https://app.example.com"
    with pytest.raises(ValueError, match="not an origin"):
        normalize_origin("app.example.com")
    wildcard = AccessPolicy.for_address("0.0.0.0", 10)
    assert "0.0.0.0" not in wildcard.hosts and {"localhost", "127.0.0.1", "::1"} <= wildcard.hosts
    bound = AccessPolicy.for_address("192.168.1.2", 10, api_key="")
    assert "192.168.1.2" in bound.hosts and bound.api_key is None and bound.key_matches(None)
