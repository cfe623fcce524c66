"""`make demo` is a thin printer over `memorag ask`: each question runs the command with the book's path,
so the demo and the command read the same tokens, write the same clues and print the same answer.
The command is replaced by a FAKE that records its arguments, so only the demo's own work is under test."""

from __future__ import annotations

from memorag.commands import demo
from memorag.commands import main as command


def test_the_demo_asks_each_question_as_memorag_ask_does(monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(command, "main", lambda argv: calls.append(argv) or 0)
    assert demo.main(["--question", "Who raised Esther?", "--memory-answer"]) == 0
    book = str(demo._text_path())
    assert calls == [["ask", book, "Who raised Esther?", "--task", "memorag", "--memory-weights", "auto"],
                     ["ask", book, "Who raised Esther?", "--task", "qa", "--memory-weights", "auto"]]
    shown = capsys.readouterr().out
    assert "$ memorag ask examples/kjv_ruth_esther_jonah.txt 'Who raised Esther?' --task memorag" in shown
    assert "memory weights: the trained weights shipped with memorag" in shown


def test_the_demo_exits_as_the_command_did(monkeypatch):
    monkeypatch.setattr(command, "main", lambda argv: 2)
    assert demo.main([]) == 2
