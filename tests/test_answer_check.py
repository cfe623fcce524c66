"""What counts as no answer (`memorag.prompting.answer_check`), and the stream gate that holds an echo back."""

from __future__ import annotations

import re

import pytest

from memorag.modes.results import Answer, Evidence
from memorag.prompting.answer_check import (
    DECLINES,
    EMPTY,
    NO_ANSWER_REPLY,
    REPEATS_QUESTION,
    EchoGate,
    meaning_words,
    no_answer_reason,
)

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
    ("I don't know.", DECLINES),
    (NO_ANSWER_REPLY, DECLINES),
    ("The text does not say who wrote it.", DECLINES),
    ("Not mentioned in the evidence.", DECLINES),
    ("Not enough evidence.", DECLINES),  # the embedded reader's variant of its fixed reply
    ("Insufficient information to say.", DECLINES),
    ("Enough evidence says Ada wrote it.", None),
    ("Written by Ada; the text does not say when.", None),  # an answer, then a hedge: an answer
    ("A", None),  # a label word alone, with no echo beside it, is an answer (a choice)
    ("Ada", None),
])
def test_no_answer_reason(answer, reason):
    assert no_answer_reason(QUESTION, answer) == reason


# Echoes seen from the embedded generator (the reply, reworded, for the question asked), and answers
# that reuse the question's words and add the fact.
REAL_ECHOES = [
    ("Which option of asn1Decoding performs a benchmark on decoding?",
     "Which option of asn1Decoding is used to perform a benchmark on decoding?"),
    ("What is ASN1_MAX_NAME_SIZE?", "What's ASN1_MAX_NAME_SIZE?"),
    ("What's the default port?", "What is the default port?"),
    ("Which city was Jonah sent to?", "Which city was Jonah sent to?"),
    ("Which city was Jonah sent to?", "Jonah was sent to which city?"),  # word order
    ("Who raised Esther?", "Esther was raised by whom?"),
    ("Who raised Esther?", "Question: Who raised Esther? Answer: Who raised Esther?"),
    ("Which is older, the bridge or the tower?", "The bridge or the tower is older."),
]
REAL_ANSWERS = [
    ("Which city was Jonah sent to?", "Jonah was sent to Nineveh."),
    ("Which city was Jonah sent to?", "Nineveh"),
    ("Who raised Esther?", "Mordecai raised Esther, his uncle's daughter."),
    ("What is ASN1_MAX_NAME_SIZE?", "ASN1_MAX_NAME_SIZE is 64."),
    ("Which is older, the bridge or the tower?", "The tower"),  # a choice: words of the question alone
    ("Which is older, the bridge or the tower?", "The tower is older than the bridge."),
    ("Which is older, the bridge or the tower?", "The tower is older."),
    ("Which band, Letters to Cleo or Screaming Trees, had more members?", "Letters to Cleo had more members."),
    ("Were Scott Derrickson and Ed Wood of the same nationality?", "Yes, both were American."),
    ("Were Scott Derrickson and Ed Wood of the same nationality?", "No"),
    ("How many books did she write?", "She wrote 12 books."),
]


@pytest.mark.parametrize(("question", "reply"), REAL_ECHOES)
def test_a_reworded_echo_is_no_answer(question, reply):
    assert no_answer_reason(question, reply) == REPEATS_QUESTION


@pytest.mark.parametrize(("question", "reply"), REAL_ANSWERS)
def test_an_answer_in_the_question_s_words_is_an_answer(question, reply):
    assert no_answer_reason(question, reply) is None


def test_meaning_words_spell_out_contractions_and_fold_inflections():
    assert meaning_words("What's the option used to perform benchmarks?") == ["option", "used", "perform", "benchmark"]
    assert meaning_words("Which option performs a benchmark?") == ["option", "perform", "benchmark"]
    assert meaning_words("It isn't Jonah's.") == ["not", "jonah"]


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


def test_the_gate_holds_a_reworded_echo_and_a_refusal_to_the_end():
    question = "What is ASN1_MAX_NAME_SIZE?"
    assert stream(question, ["What", "'s ", "ASN", "1_MAX", "_NAME_SIZE", "?"]) == ("", "")
    assert stream(question, ["Not ", "in the ", "evidence."]) == ("", "")
    assert stream(question, ["I ", "don't ", "know."]) == ("", "")
    shown, rest = stream(question, ["ASN", "1_MAX_NAME_SIZE ", "is ", "64."])
    assert shown + rest == "ASN1_MAX_NAME_SIZE is 64." and shown  # shown once a new word is whole


_WH = re.compile(r"^(?:which|what|who|whom|whose|where|when|how many|how much|how long|how old|how)\b(?:\s+\w+)?",
                 re.IGNORECASE)
_ALTERNATIVES = re.compile(r",?\s*[^,]*\bor\b[^,]*$")


def gold_phrasings(question: str, gold: str) -> list[str]:
    """A gold answer said as a reader might say it with the question's words: alone, after "The answer
    is", after the question, after the question's words and a colon, and in the question's place
    (its question word replaced by the answer; alternatives offered at the end dropped, as a reply
    that picks one would drop them)."""
    body = question.strip().rstrip("?").strip()
    statement = _WH.sub(gold, body, count=1) if _WH.match(body) else f"{body}: {gold}"
    picked = _ALTERNATIVES.sub("", statement)
    return [f"{gold}.", f"The answer is {gold}.", f"{question} {gold}.", f"{body}: {gold}.",
            (picked if gold in picked else statement) + "."]


# The one tunable row whose gold answer ("The club") names only words of its question: said in the
# question's place, the reply is the question's own words, which no check can tell from an echo.
GOLD_THAT_ADDS_NOTHING = "Which club, founded in 1928, did Bob Johnson played for"


def test_no_gold_answer_of_the_tunable_hotpotqa_rows_is_flagged():
    from memorag.evaluation.datasets.hotpotqa import HOTPOTQA_TRAIN_ROWS
    from memorag.evaluation.datasets.packaged import load_hotpotqa

    rows = load_hotpotqa()[:HOTPOTQA_TRAIN_ROWS]
    flagged = [(row["question"], reply) for row in rows for reply in gold_phrasings(row["question"], row["answer"])
               if no_answer_reason(row["question"], reply) is not None]
    assert len(rows) == HOTPOTQA_TRAIN_ROWS
    assert [question.strip() for question, _ in flagged] == [GOLD_THAT_ADDS_NOTHING], flagged[:5]


def test_python_s_ask_passes_no_piece_of_a_reworded_echo_and_says_why():
    """`MemoRAG.ask` (over FAKE models) streams its answer through the gate: `on_text` gets nothing of a
    reworded echo, the whole of an answer, and `Answer` says which it was."""
    from memorag.retrieval import Document
    from tests.pipeline.conftest import FakeEchoGenerator, make_rag

    question = "What is ASN1_MAX_NAME_SIZE?"
    for reply, shown, reason in [("What's ASN1_MAX_NAME_SIZE?", "", REPEATS_QUESTION),
                                 ("ASN1_MAX_NAME_SIZE is 64.", "ASN1_MAX_NAME_SIZE is 64. ", None)]:
        rag = make_rag(generator=FakeEchoGenerator(reply), mode="rag")
        rag.memorize(Document(id="manual", title="", text="The limit is sixty-four characters."), with_memory=False)
        pieces: list[str] = []
        answer = rag.ask(question, on_text=pieces.append)
        assert "".join(pieces) == shown and answer.no_answer == reason and answer.answered is (reason is None)
