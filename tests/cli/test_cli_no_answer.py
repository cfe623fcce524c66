"""`memorag ask` never prints an echo of the question, a refusal or nothing as if it were the answer:
stdout stays empty, stderr says "no answer" beside the evidence, and `--json` says `"answered": false`.

The pipeline is real over FAKE models (a tiny random memory model, a hashed embedder and
`FakeEchoGenerator`, which streams a fixed reply word by word), so the judgement the command prints is
the one `MemoRAG.ask` makes in the answer stream.
"""

from __future__ import annotations

import json

import pytest

from memorag.commands import main as cli
from memorag.retrieval import Document
from tests.pipeline.conftest import FakeEchoGenerator, make_rag

QUESTION = "Who went to Moab?"
TEXT = "A man of Bethlehem went to Moab with his wife and two sons."


@pytest.fixture
def asked(monkeypatch, tmp_path, capsys):
    text = tmp_path / "ruth1.txt"
    text.write_text(TEXT, encoding="utf-8")

    def run(reply: str, *options: str) -> tuple[int, str, str]:
        rag = make_rag(generator=FakeEchoGenerator(reply), mode="rag")
        rag.memorize(Document(id="ruth1.txt", title="", text=TEXT), with_memory=False)
        monkeypatch.setattr(cli, "_open_pipeline", lambda *args, **kwargs: rag)
        status = cli.main(["ask", "--mode", "rag", "--context", str(text), QUESTION, *options])
        out = capsys.readouterr()
        return status, out.out, out.err

    return run


@pytest.mark.parametrize("reply", ["who went to MOAB", "Who went to Moab? Who went to Moab?", "  ",
                                   "Moab: who went there?", "Not in the evidence."])
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
    assert data["evidence"][0]["found_by"][0]["query"] == QUESTION and data["evidence"][0]["doc_id"] == "ruth1.txt"


def test_an_answer_is_printed_as_one(asked):
    status, out, err = asked("Elimelech and his family went to Moab.")
    assert out.strip() == "Elimelech and his family went to Moab." and "no answer" not in err
    status, out, _ = asked("Who went to Moab? Elimelech did.")  # the question, then an answer
    assert out.strip() == "Who went to Moab? Elimelech did."
    status, out, _ = asked("Elimelech.", "--json")
    assert json.loads(out)["answered"] is True
