"""What counts as no answer (`memorag.prompting.answer_check`), and the stream gate that holds an echo back."""

from __future__ import annotations

import pytest

from memorag.modes.results import Answer, Evidence
from memorag.prompting.answer_check import EMPTY, REPEATS_QUESTION, EchoGate, no_answer_reason

QUESTION = "Who wrote the manual for the ASN.1 library?"


@pytest.mark.parametrize(("answer", "reason"), [
    ("", EMPTY),
    ("  \n ", EMPTY),
    ("...?!", EMPTY),
    (QUESTION, REPEATS_QUESTION),
    ("who wrote the manual for the asn 1 library", REPEATS_QUESTION),  # case, punctuation, spacing
    ("  Who   wrote the MANUAL for the ASN.1 library ", REPEATS_QUESTION),
    ("Who wrote the manual", REPEATS_QUESTION),  # cut off while echoing: a start of 3 words or more
    (f"{QUESTION} {QUESTION}", REPEATS_QUESTION),
    (f"{QUESTION} Who wrote", REPEATS_QUESTION),  # a whole copy, then a start of another
    (f"Question: {QUESTION} Answer:", REPEATS_QUESTION),  # labels beside an echo count as nothing
    ("Who wrote", None),  # two words: too short to call an echo
    (f"{QUESTION} Ada Lovelace wrote it.", None),  # the question, then an answer
    ("The manual for the ASN.1 library was written by Ada.", None),
    ("I don't know.", None),
    ("A", None),  # a label word alone, with no echo beside it, is an answer (a choice)
    ("Ada", None),
])
def test_no_answer_reason(answer, reason):
    assert no_answer_reason(QUESTION, answer) == reason


def test_with_no_question_only_an_empty_reply_is_no_answer():
    assert no_answer_reason("", "") == EMPTY and no_answer_reason("", "A summary.") is None


def test_the_answer_says_whether_it_answers_and_keeps_its_evidence():
    evidence = [Evidence(0, "doc", "", 0, 5, 2, 1.0, [0], "hello")]
    echoed = Answer(QUESTION, "memorag", "rag", QUESTION.lower(), evidence=evidence)
    assert not echoed.answered and echoed.no_answer == REPEATS_QUESTION
    data = echoed.to_dict()
    assert data["answered"] is False and data["no_answer"] == REPEATS_QUESTION and data["evidence"]
    real = Answer(QUESTION, "memorag", "rag", "Ada wrote it.")
    assert real.answered and real.to_dict()["answered"] is True and real.to_dict()["no_answer"] is None


def stream(question: str, pieces: list[str]) -> tuple[str, str]:
    """What `EchoGate` shows while `pieces` stream, and what it shows once the answer is whole."""
    gate = EchoGate(question)
    shown = "".join(gate.push(piece) for piece in pieces)
    return shown, gate.finish("".join(pieces))


def test_the_gate_never_shows_an_echo():
    assert stream(QUESTION, ["Who ", "wrote ", "the ", "manual ", "for ", "the ", "ASN.1 ", "library?"]) == ("", "")
    assert stream(QUESTION, ["Question: ", "Who wrote ", "the manual for the ASN.1 library?"]) == ("", "")
    assert stream(QUESTION, ["", " "]) == ("", "")


def test_the_gate_shows_an_answer_as_soon_as_it_leaves_the_question():
    shown, rest = stream(QUESTION, ["Ada ", "wrote ", "it."])
    assert (shown, rest) == ("Ada wrote it.", "")
    assert stream(QUESTION, ["Who ", "wrote ", "it? ", "Ada."]) == ("Who wrote it? Ada.", "")
    shown, rest = stream(QUESTION, [QUESTION, " Ada", " wrote it."])
    assert shown + rest == f"{QUESTION} Ada wrote it."


def test_the_gate_gives_a_short_answer_it_held_once_the_answer_is_whole():
    assert stream(QUESTION, ["Who ", "wrote"]) == ("", "Who wrote")  # two words: an answer, shown at the end
    assert stream(QUESTION, ["A"]) == ("", "A")
