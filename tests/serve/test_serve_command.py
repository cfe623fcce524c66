"""`memorag serve` started by its one command in a subprocess, with the real embedded models,
driven by httpx on 127.0.0.1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from memorag.commands.main import main as cli_main
from memorag.serve.command import exposure
from tests.serve.conftest import free_port, read_events

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "kjv_ruth_esther_jonah.txt"


def test_serve_help_names_the_api():
    result = subprocess.run([sys.executable, "-m", "memorag.commands.main", "serve", "--help"], capture_output=True,
                            text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 0
    assert "--store" in result.stdout and "/corpora/NAME/ask" in result.stdout and "--max-loaded" in result.stdout
    for option in ("--api-key", "--allow-host", "--allow-origin", "--allow-public-without-key", "--max-body-mb",
                   "--max-memorize-tokens", "--max-query-chars", "--job-timeout", "--max-connections"):
        assert option in result.stdout, option


@pytest.mark.parametrize("argv, message", [
    (["--host", "0.0.0.0"], "--host 0.0.0.0 is reachable from other machines and no API key is set"),
    (["--host", "192.168.1.2", "--api-key", ""], "no API key is set"),
    (["--allow-origin", "example.com"], "'example.com' is not an origin"),
    (["--max-body-mb", "0"], "max_body_bytes=0 must be at least 1"),
    (["--job-timeout", "-1"], "job_timeout=-1.0 must be positive"),
])
def test_serve_refuses_unsafe_or_bad_options_before_loading_models(tmp_path, monkeypatch, capsys, argv, message):
    monkeypatch.delenv("MEMORAG_SERVE_API_KEY", raising=False)
    assert cli_main(["serve", "--store", str(tmp_path), *argv]) == 2
    error = capsys.readouterr().err
    assert message in error and "loading the models" not in error, error


def test_allow_origin_is_repeatable_and_the_only_way_past_the_own_origin():
    from memorag.commands.main import build_parser
    from memorag.serve.command import access_policy, serve_options

    def policy(*argv: str):
        args = build_parser().parse_args(["serve", "--store", "corpora", *argv])
        limits, key = serve_options(args)
        return access_policy(args, limits, key)

    default = policy()
    assert default.origins == frozenset() and not default.origin_allowed("http://127.0.0.1:5555")
    assert default.own_origin("http://127.0.0.1:8000", "http", "127.0.0.1:8000")
    assert not default.own_origin("http://127.0.0.1:5555", "http", "127.0.0.1:8000")
    allowed = policy("--allow-origin", "http://127.0.0.1:5555", "--allow-origin", "HTTPS://App.Example.com:443")
    assert allowed.origins == {"http://127.0.0.1:5555", "https://app.example.com"}
    assert allowed.origin_allowed("http://127.0.0.1:5555") and not allowed.origin_allowed("http://127.0.0.1:5556")


def test_serve_help_is_true_about_batching():
    from memorag.commands.main import build_parser

    serve = build_parser()._subparsers._group_actions[0].choices["serve"]
    assert "one request at a time" not in " ".join(serve.format_help().split())
    assert "up to --batch-size requests (8) run at once" in serve.description
    assert next(action for action in serve._actions if action.dest == "batch_size").default == 8


def test_the_startup_line_says_how_the_server_is_exposed():
    hosts = frozenset({"localhost", "127.0.0.1", "::1"})
    assert "this machine only (loopback); no API key" in exposure("127.0.0.1", 8000, None, hosts)
    public = exposure("0.0.0.0", 8000, "key", hosts | {"myserver.lan"})
    assert "other machines too" in public and "needs the API key" in public and "myserver.lan" in public
    assert exposure("::", 8000, None, hosts).startswith("WARNING: serving http://[::]:8000")


@pytest.mark.slow
def test_serve_refuses_bad_arguments_before_loading_models(tmp_path):
    result = subprocess.run([sys.executable, "-m", "memorag.commands.main", "serve", "--store", str(tmp_path), "--port",
                             "70000"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 2 and "--port 70000 is not a port number" in result.stderr


@pytest.mark.slow
def test_serve_answers_a_real_http_client_with_the_embedded_models(tmp_path):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    command = [sys.executable, "-m", "memorag.commands.main", "serve", "--host", "127.0.0.1", "--port", str(port),
               "--store", str(tmp_path / "store"), "--log-level", "warning",
               "--set", "clue_max_new_tokens=16", "--set", "answer_max_new_tokens=24",
               "--set", "generator=embedded-base"]  # the model as it comes always writes tokens to stream
    server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 240
        while True:
            assert server.poll() is None, f"memorag serve exited: {server.stdout.read()}"
            assert time.monotonic() < deadline, "memorag serve did not start in time"
            try:
                health = httpx.get(f"{url}/health", timeout=5).json()
                break
            except httpx.TransportError:
                time.sleep(0.5)
        assert health["status"] == "ok" and health["models"]["memory_weights"] == "embedded (shipped, trained)"

        text = EXAMPLE.read_text(encoding="utf-8")
        ruth = text[: text.index("Chapter 2")]  # the first chapter of Ruth, about 800 tokens
        memorized = httpx.post(f"{url}/corpora/ruth/memorize", json={"documents": [
            {"id": "ruth1", "title": "Ruth 1", "text": ruth}]}, timeout=300)
        assert memorized.status_code == 200, memorized.text
        assert memorized.json()["memory_tokens"] > 500

        question = "Where did Naomi's family go to live?"
        with httpx.stream("POST", f"{url}/corpora/ruth/ask", json={"query": question}, timeout=300) as response:
            assert response.status_code == 200
            events = read_events(response)
        names = [event for event, _ in events]
        assert names[:2] == ["clues", "evidence"] and names[-1] == "answer" and "token" in names
        answer = events[-1][1]
        streamed = "".join(data["text"] for event, data in events if event == "token")
        assert answer["answer"] and streamed.strip() == answer["answer"].strip()
        assert "moab" in " ".join(item["text"] for item in answer["evidence"]).lower()

        clues = httpx.post(f"{url}/corpora/ruth/clues", json={"query": question}, timeout=300).json()
        assert set(clues["raw"]) == {"spans", "questions", "draft"}
        listed = httpx.get(f"{url}/corpora").json()["corpora"]
        assert [(corpus["name"], corpus["documents"]) for corpus in listed] == [("ruth", ["ruth1"])]
        bad = httpx.post(f"{url}/corpora/ruth/ask", content=b"{not json", headers={"content-type": "application/json"})
        assert bad.status_code == 400 and "not valid JSON" in bad.json()["error"]
        assert httpx.delete(f"{url}/corpora/ruth").json() == {"deleted": "ruth"}
        assert json.loads(httpx.get(f"{url}/corpora").text) == {"corpora": []}
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    assert server.returncode in (0, -15)
    assert "to this machine only (loopback); no API key" in server.stdout.read()
