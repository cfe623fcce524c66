"""The failure kinds that were already handled, one test each, so none regresses: empty,
whitespace-only, binary and mis-encoded files; a BOM and CRLF line ends; empty and huge queries;
folders that are not saves; truncated files; mismatched settings; unreachable endpoints; bad
keys; Chinese text. (kill -9 during memorize and during a save: tests/reliability/test_writers.py.)"""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from tests.conftest import isolated_cache
from tests.reliability.conftest import SHORT, text_of

BAD_FILES = {
    "empty": (b"", "is empty"),
    "whitespace": (b"  \n\t \r\n", "only whitespace"),
    "binary": (bytes(range(256)) * 4, "looks like a binary file"),
}


@pytest.mark.parametrize("kind", sorted(BAD_FILES))
def test_bad_files_are_refused_and_nothing_is_written(cli, tmp_path, kind):
    data, fragment = BAD_FILES[kind]
    path = tmp_path / f"{kind}.txt"
    path.write_bytes(data)
    for args in (("memorize", path, "--out", tmp_path / "out"), ("ask", "--context", path, "a question")):
        result = cli(*args)
        assert result.returncode == 2 and fragment in result.stderr, (args, result)
        assert result.stderr.startswith("memorag: error:") and "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


def _saved_document(out: Path) -> tuple[dict, list[dict]]:
    documents = [json.loads(line) for line in (out / "documents.jsonl").read_text(encoding="utf-8").splitlines()]
    chunks = [json.loads(line) for line in (out / "chunks.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(documents) == 1
    return documents[0], chunks


def test_a_byte_order_mark_is_not_part_of_the_text(cli, tiny_args, tmp_path):
    path = tmp_path / "bom.txt"
    text = text_of(200, seed=30)
    path.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    assert cli("memorize", path, "--out", tmp_path / "out", *tiny_args).returncode == 0
    document, _ = _saved_document(tmp_path / "out")
    assert document["text"] == text and not document["text"].startswith("\ufeff")


def test_crlf_line_ends_keep_offsets_into_the_text(cli, tiny_args, tmp_path):
    path = tmp_path / "crlf.txt"
    lines = [text_of(12, seed=seed).strip() for seed in range(40)]
    path.write_bytes("\r\n".join(lines).encode("utf-8") + b"\r\n")
    out = tmp_path / "out"
    assert cli("memorize", path, "--out", out, *tiny_args).returncode == 0
    document, chunks = _saved_document(out)
    assert document["text"] == path.read_bytes().decode("utf-8")
    assert len(chunks) > 2 and all(document["text"][c["start_char"]:c["end_char"]] == c["text"] for c in chunks)
    asked = cli("ask", out, lines[7], *tiny_args, *SHORT, "--mode", "rag", "--json")
    assert asked.returncode == 0, asked
    assert json.loads(asked.stdout)["evidence"]
    for item in json.loads(asked.stdout)["evidence"]:
        assert document["text"][item["start_char"]:item["end_char"]] == item["text"]


@pytest.fixture
def small_save(cli, tiny_args, tmp_path) -> Path:
    path = tmp_path / "book.txt"
    path.write_text(text_of(300, seed=31))
    out = tmp_path / "save"
    assert cli("memorize", path, "--out", out, *tiny_args).returncode == 0
    return out


def test_an_empty_query_is_refused(cli, tiny_args, small_save):
    for query in ("", "   \n"):
        result = cli("ask", small_save, query, *tiny_args)
        assert result.returncode == 2 and "the query is empty" in result.stderr, result


def test_a_huge_query_is_refused_quickly_and_clearly(cli, tiny_args, small_save):
    result = cli("ask", small_save, "where is the king? " * 1000, *tiny_args, *SHORT)
    assert result.returncode == 2 and "leaves no room for evidence" in result.stderr, result
    assert "clues:" not in result.stderr and "Traceback" not in result.stderr


def test_a_missing_target_or_a_foreign_manifest_is_refused_and_documents_are_memorized(cli, tiny_args, tmp_path,
                                                                                        monkeypatch):
    monkeypatch.setenv("MEMORAG_CACHE", str(isolated_cache(tmp_path / "cache")))
    missing = cli("ask", tmp_path / "missing", "a question", *tiny_args)
    assert missing.returncode in (1, 2) and "missing" in missing.stderr and "Traceback" not in missing.stderr, missing
    # a folder of documents, or a document, in DIR's place: memorized once (cached), then answered
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "notes.txt").write_text(text_of(60, seed=3))
    (tmp_path / "a-file.txt").write_text(text_of(60, seed=4))
    for target in (tmp_path / "plain", tmp_path / "a-file.txt"):
        result = cli("ask", target, "where is the king", *tiny_args, *SHORT, "--mode", "rag")
        assert result.returncode == 0, result
    assert (tmp_path / "cache" / "asked").is_dir()
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "manifest.json").write_text('{"format": "something-else"}')
    result = cli("ask", fake, "a question", *tiny_args)
    assert result.returncode == 1 and "does not describe a memorag-pipeline" in result.stderr, result


@pytest.mark.parametrize("name", ["documents.jsonl", "chunks.jsonl", "manifest.json", "memory/memory.safetensors",
                                  "index/manifest.json"])
def test_truncated_files_are_refused_naming_them(cli, tiny_args, small_save, name):
    path = small_save / name
    path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])
    result = cli("ask", small_save, "where is the king", *tiny_args, *SHORT)
    assert result.returncode == 1 and name.split("/")[0] in result.stderr, result
    assert "Traceback" not in result.stderr


def test_mismatched_settings_are_refused_naming_the_setting(cli, tiny_args, small_save):
    for args, fragment in ((["--chunk-tokens", "64"], "chunk_tokens=160, not 64"),
                           (["--ratio", "8"], "memory="),
                           (["--retriever", "dense"], "retriever='bm25', not 'dense'")):
        result = cli("ask", small_save, "where is the king", *tiny_args, *SHORT, *args)
        assert result.returncode == 1 and fragment in result.stderr, (args, result)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_an_unreachable_endpoint_fails_before_any_work(cli, tiny_args, tmp_path):
    book = tmp_path / "book.txt"
    book.write_text(text_of(100, seed=32))
    result = cli("ask", "--context", book, "a question", *tiny_args, "--generator",
                 f"http://127.0.0.1:{_free_port()}/v1", "--generator-model", "m", "--retries", "0")
    assert result.returncode == 1 and "cannot reach" in result.stderr, result
    assert "memorizing" not in result.stderr


class _Refusing(BaseHTTPRequestHandler):
    """A fake endpoint that refuses every request as unauthorized."""

    def _refuse(self) -> None:
        body = json.dumps({"error": {"message": "Incorrect API key provided"}}).encode()
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _refuse

    def log_message(self, *args) -> None:
        pass


def test_bad_keys_are_named(cli, tiny_args, tmp_path, monkeypatch):
    book = tmp_path / "book.txt"
    book.write_text(text_of(100, seed=33))
    unknown = cli("ask", "--context", book, "a question", *tiny_args, "--set", "evidence_token=10")
    assert unknown.returncode == 2 and "unknown key" in unknown.stderr and "evidence_tokens" in unknown.stderr
    server = HTTPServer(("127.0.0.1", 0), _Refusing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        monkeypatch.setenv("MY_KEY", "sk-wrong")
        result = cli("ask", "--context", book, "a question", *tiny_args, "--generator",
                     f"http://127.0.0.1:{server.server_port}/v1", "--generator-model", "m", "--api-key-env", "MY_KEY",
                     "--retries", "0")
    finally:
        server.shutdown()
        server.server_close()
    assert result.returncode == 1 and "HTTP 401" in result.stderr and "MY_KEY" in result.stderr, result
    assert "memorizing" not in result.stderr


def test_chinese_text_is_memorized_and_asked(cli, tiny_args, tmp_path):
    sentences = ["\u6cb3\u8fb9\u6709\u4e00\u5ea7\u57ce\uff0c\u57ce\u91cc\u4f4f\u7740\u4e00\u4f4d\u56fd\u738b\u3002",
                 "\u738b\u540e\u6bcf\u5929\u5728\u82b1\u56ed\u91cc\u70b9\u4eae\u706f\u7b3c\u3002",
                 "\u6e2f\u53e3\u7684\u5c71\u4e0a\u6709\u4e00\u5ea7\u77f3\u5934\u623f\u5b50\u3002"]
    book = tmp_path / "\u4e66.txt"
    book.write_text("".join(sentences * 20), encoding="utf-8")
    out = tmp_path / "save"
    # the default dense retriever (BM25's \w+ words would make each Chinese sentence one word)
    tiny_args = [arg for arg in tiny_args if arg not in ("--retriever", "bm25")]
    memorized = cli("memorize", book, "--out", out, *tiny_args, "--json")
    assert memorized.returncode == 0, memorized
    assert json.loads(memorized.stdout)["added"] == ["\u4e66.txt"]
    asked = cli("ask", out, "\u56fd\u738b\u4f4f\u5728\u54ea\u91cc\uff1f", *tiny_args, *SHORT, "--json")
    assert asked.returncode == 0, asked
    answer = json.loads(asked.stdout)
    assert answer["evidence"] and all("\u7684" in item["text"] or "\u738b" in item["text"] for item in answer["evidence"])
