"""A second reader: the harness runs every mode with an OpenAI-compatible endpoint as the generator
(`generator=http://...`), here a FAKE server on 127.0.0.1 started by the test, with every model
loaded from the configuration (a tiny local memory model, BM25, the endpoint)."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from memorag.config import config_from_dict
from memorag.evaluation import EvalConfig, run_evaluation
from memorag.evaluation.results_store import EXAMPLES_FILE
from tests.memory.conftest import tiny_base
from tests.memory.test_persistence import tiny_tokenizer

_NUMBER = re.compile(r"\b\d{7}\b")
ALL_MODES = ["rag", "dos", "hyde", "rqrag", "memorag", "memorag:qa", "longrag", "mixpr", "full", "cic"]


class FakeNumberServer:
    """A FAKE OpenAI-compatible server: lists one model, and answers every chat completion (streamed)
    with the first 7-digit number in the user message, or "none"."""

    def __init__(self):
        self.prompts: list[str] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                body = json.dumps({"data": [{"id": "fake-reader"}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self):
                request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                prompt = request["messages"][-1]["content"]
                fake.prompts.append(prompt)
                match = _NUMBER.search(prompt)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                event = {"choices": [{"delta": {"content": match.group() if match else "none"}}]}
                self.wfile.write(f"data: {json.dumps(event)}\n\ndata: [DONE]\n\n".encode())

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    fake = FakeNumberServer()
    yield fake
    fake.close()


def test_every_mode_reads_with_the_endpoint(tmp_path, server, data_files):
    base = tmp_path / "tiny-base"
    tiny_base("llama").save_pretrained(base)
    tiny_tokenizer().save_pretrained(base)
    needles, corpus = data_files
    config = config_from_dict(EvalConfig, {
        "out_dir": str(tmp_path / "out"), "modes": ALL_MODES, "num_examples": 2, "progress": False,
        "plots": False, "recall_k": [1], "generator": server.url,
        "pipeline": {"memory_model": str(base), "memory": {"window": 16, "ratios": [4]}, "retriever": "bm25",
                     "chunk_tokens": 16, "overlap_tokens": 4, "clue_max_new_tokens": 6, "max_clues": 2,
                     "evidence_tokens": 64, "answer_max_new_tokens": 8, "generator_window": 2048,
                     "hyde": {"max_new_tokens": 8}, "rqrag": {"max_new_tokens": 8}, "longrag": {"long_answer_tokens": 8}},
        "tasks": [{"name": "needles", "source": "examples", "path": str(needles)},
                  {"name": "corpus", "source": "corpus_dir", "path": str(corpus)}],
    })
    assert config.pipeline.generator == server.url
    cells, _ = run_evaluation(config, command="pytest")
    records = [json.loads(line) for line in (tmp_path / "out" / EXAMPLES_FILE).read_text().splitlines()]
    assert {record["mode"] for record in records} == set(ALL_MODES) and len(cells) == 2 * len(ALL_MODES)
    for record in records:
        if record["mode"] == "memorag:qa":  # the memory model answers from its memory: no reader
            assert record["generator_prompt_tokens"] == []
            continue
        assert record["generator"] == f"fake-reader@{server.url}"
        assert record["generator_prompt_tokens"], record["mode"]
    # the endpoint read what each mode gave it and answered: the needles' numbers come back
    by_cell = {(cell["mode"], cell["task"]): cell for cell in cells}
    assert by_cell["rag", "needles"]["score"] == 100.0 and by_cell["full", "needles"]["score"] == 100.0
    assert any(prompt.startswith("Answer the question based on the given documents.") for prompt in server.prompts)
