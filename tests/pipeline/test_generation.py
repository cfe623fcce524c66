"""Generators: incremental decoding, the local generator, and the OpenAI-compatible client
against a fake server in a thread (streaming, plain JSON, retries, refusals, timeouts)."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from memorag.generation import GeneratorError, LocalGenerator, OpenAIGenerator, TextStream, load_generator
from tests.memory.test_persistence import tiny_tokenizer

from .conftest import tiny_model


class FakeByteTokenizer:
    """Decodes ids as UTF-8 bytes, so a character can span several tokens (a fake)."""

    def decode(self, ids, skip_special_tokens=True):
        return bytes(ids).decode("utf-8", errors="replace")


def test_text_stream_holds_back_half_characters():
    pieces = []
    stream = TextStream(FakeByteTokenizer(), pieces.append)
    for byte in "Esther \u738b\u5983!".encode():
        stream.push([byte])
    assert stream.finish() == "Esther \u738b\u5983!"
    assert "".join(pieces) == "Esther \u738b\u5983!"
    assert all("\ufffd" not in piece for piece in pieces)


def test_local_generator_streams_and_counts_tokens():
    model = tiny_model()
    generator = LocalGenerator.from_memory_model(model, repetition_penalty=1.0)
    pieces = []
    text = generator.generate("ac ad ae", max_new_tokens=6, on_text=pieces.append)
    assert "".join(pieces).strip() == text and text
    assert generator.generate("ac ad ae", max_new_tokens=6) == text
    assert generator.count_tokens("ac ad ae") == 3
    assert generator.context_window == 1024
    with pytest.raises(GeneratorError, match="exceeds"):
        generator.generate("ac " * 1020, max_new_tokens=10)
    assert load_generator(None, memory_model=model).model is model.base_model
    assert load_generator("memory", memory_model=model).shared
    with pytest.raises(GeneratorError, match="no memory model"):
        load_generator(None)


def test_a_tokenizer_without_chat_template_reads_the_plain_prompt():
    tokenizer = tiny_tokenizer()
    assert not getattr(tokenizer, "chat_template", None)
    generator = LocalGenerator.from_memory_model(tiny_model())
    assert generator.count_tokens("ac ad", system="ae af") == 4


# -- a fake OpenAI-compatible server ---------------------------------------------------------------


class FakeServer:
    """Serves /v1/models and /v1/chat/completions; `script` lists how to answer each request."""

    def __init__(self):
        self.script: list[str] = []
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                body = json.dumps({"data": [{"id": "fake-model"}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                server.requests.append(json.loads(self.rfile.read(length)))
                server.headers.append(self.headers)  # header names are case-insensitive
                action = server.script.pop(0) if server.script else "stream"
                if action.startswith("status:"):
                    code = int(action.split(":")[1])
                    self.send_response(code)
                    self.send_header("Retry-After", "0")
                    self.end_headers()
                    self.wfile.write(b'{"error": "scripted"}')
                elif action == "json":
                    body = json.dumps({"choices": [{"message": {"content": "plain answer"}}]}).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                elif action in ("break", "error-event"):
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Content-Length", "1000")  # promises more than it sends
                    self.end_headers()
                    event = {"choices": [{"delta": {"content": "Mordecai "}}]}
                    self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
                    if action == "error-event":
                        self.wfile.write(b'data: {"error": {"message": "the model crashed"}}\n\n')
                    self.wfile.flush()
                    self.close_connection = True
                elif action == "slow":
                    time.sleep(1.5)
                    self.send_response(200)
                    self.end_headers()
                else:
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.end_headers()
                    for piece in ("Mordecai ", "raised ", "her."):
                        event = {"choices": [{"delta": {"content": piece}}]}
                        self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
                        self.wfile.flush()
                    self.wfile.write(b"data: [DONE]\n\n")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    fake = FakeServer()
    yield fake
    fake.close()


def test_openai_generator_streams_and_sends_the_key(server, monkeypatch):
    monkeypatch.setenv("MY_KEY", "secret-key")
    generator = load_generator(server.url, endpoint_model="fake-model", api_key_env="MY_KEY")
    assert isinstance(generator, OpenAIGenerator)
    pieces = []
    assert generator.generate("Who raised Esther?", system="Be brief.", on_text=pieces.append) == "Mordecai raised her."
    assert pieces == ["Mordecai ", "raised ", "her."]
    request = server.requests[-1]
    assert request["stream"] is True and request["model"] == "fake-model"
    assert request["messages"] == [{"role": "system", "content": "Be brief."},
                                   {"role": "user", "content": "Who raised Esther?"}]
    assert server.headers[-1]["Authorization"] == "Bearer secret-key"


def test_openai_generator_reads_a_plain_json_reply_and_learns_the_model(server, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    generator = OpenAIGenerator(server.url)
    generator.check()
    assert generator.model == "fake-model"
    server.script = ["json"]
    assert generator.generate("q") == "plain answer"
    assert "Authorization" not in server.headers[-1]


def test_openai_generator_retries_overload_then_succeeds(server):
    server.script = ["status:503", "status:429"]
    generator = OpenAIGenerator(server.url, "fake-model", max_retries=2)
    assert generator.generate("q") == "Mordecai raised her."
    assert len(server.requests) == 3


def test_openai_generator_gives_up_and_explains(server):
    server.script = ["status:503"] * 3
    generator = OpenAIGenerator(server.url, "fake-model", max_retries=1)
    with pytest.raises(GeneratorError, match="gave up after 2 attempts"):
        generator.generate("q")
    server.script = ["status:401"]
    with pytest.raises(GeneratorError, match="OPENAI_API_KEY"):
        generator.generate("q")
    server.script = ["status:404"]
    with pytest.raises(GeneratorError, match="/v1"):
        generator.generate("q")


def test_a_reply_that_breaks_off_is_an_error_not_a_retry(server):
    """Text already handed on is never repeated: a stream cut half-way, or an error event inside it,
    fails at once (one request), naming what happened."""
    generator = OpenAIGenerator(server.url, "fake-model", max_retries=3)
    for action, message in (("break", "broke off"), ("error-event", "the model crashed")):
        server.requests.clear()
        server.script = [action]
        pieces = []
        with pytest.raises(GeneratorError, match=message):
            generator.generate("q", on_text=pieces.append)
        assert pieces == ["Mordecai "] and len(server.requests) == 1


def test_openai_generator_times_out(server):
    server.script = ["slow"]
    generator = OpenAIGenerator(server.url, "fake-model", timeout=0.3, max_retries=0)
    with pytest.raises(GeneratorError, match="gave up"):
        generator.generate("q")


def test_an_unreachable_endpoint_fails_fast_with_a_clear_message():
    with socket.socket() as probe:  # a port with nothing listening
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    generator = OpenAIGenerator(f"http://127.0.0.1:{port}/v1", "m", max_retries=1)
    started = time.perf_counter()
    with pytest.raises(GeneratorError, match="cannot reach .* gave up after 2 attempts. Is the server running"):
        generator.check()
    assert time.perf_counter() - started < 5
    with pytest.raises(GeneratorError, match="must start with http"):
        OpenAIGenerator("localhost:8000/v1")
