"""`memorag ask` never prints an echo of the question, or nothing, as if it were the answer: stdout
stays empty, stderr says "no answer" beside the evidence, and `--json` says `"answered": false`.

The pipeline is a FAKE (`FakeRag`): it streams a fixed reply and returns it as the `Answer`, with one
piece of evidence, so only the command's printing is under test.
"""

from __future__ import annotations

import json

import pytest

from memorag.commands import main as cli
from memorag.modes.results import Answer, Evidence, FoundBy

QUESTION = "Who went to Moab?"


class FakeRag:
    """A FAKE pipeline for `cmd_ask`: streams `reply` word by word and answers it, over one chunk."""

    def __init__(self, reply: str):
        self.reply = reply

    def ask(self, query, task=None, on_text=None, on_clues=None, on_evidence=None, show_progress=False):
        evidence = [Evidence(0, "ruth1.txt", "ruth1.txt", 0, 40, 9, 1.0, [0], "a man of Bethlehem went to Moab",
                             found_by=[FoundBy(0, query, 1, 0.83)])]
        on_clues([])
        on_evidence(evidence)
        for piece in self.reply.split(" "):
            on_text(piece + " ")
        return Answer(query, task, "memorag", self.reply, evidence=evidence, timings={"total": 0.1}, generator="fake")


@pytest.fixture
def asked(monkeypatch, tmp_path, capsys):
    text = tmp_path / "ruth1.txt"
    text.write_text("A man of Bethlehem went to Moab with his wife and two sons.", encoding="utf-8")

    def run(reply: str, *options: str) -> tuple[int, str, str]:
        monkeypatch.setattr(cli, "_open_pipeline", lambda *args, **kwargs: FakeRag(reply))
        status = cli.main(["ask", "--context", str(text), QUESTION, *options])
        out = capsys.readouterr()
        return status, out.out, out.err

    return run


@pytest.mark.parametrize("reply", ["who went to MOAB", "Who went to Moab? Who went to Moab?", "  "])
def test_an_echo_or_nothing_is_reported_as_no_answer_with_the_evidence(asked, reply):
    status, out, err = asked(reply)
    assert status == 0 and out == ""
    assert "no answer: the generator" in err and "[ruth1.txt" in err and "query #1" in err


def test_no_answer_is_reported_even_when_quiet(asked):
    status, out, err = asked(QUESTION, "--quiet")
    assert out == "" and err.strip().startswith("no answer: the generator only repeated the question")


def test_json_says_no_answer_and_keeps_the_evidence(asked):
    status, out, _ = asked(QUESTION, "--json")
    data = json.loads(out)
    assert data["answered"] is False and data["no_answer"] == "repeats the question"
    assert data["evidence"][0]["found_by"] == [{"query_index": 0, "query": QUESTION, "rank": 1, "score": 0.83}]


def test_an_answer_is_printed_as_one(asked):
    status, out, err = asked("Elimelech and his family went to Moab.")
    assert out.strip() == "Elimelech and his family went to Moab." and "no answer" not in err
    status, out, _ = asked("Who went to Moab? Elimelech did.")  # the question, then an answer
    assert out.strip() == "Who went to Moab? Elimelech did."
    status, out, _ = asked("Elimelech.", "--json")
    assert json.loads(out)["answered"] is True
