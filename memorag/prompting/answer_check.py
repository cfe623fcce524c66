"""Whether an answer answers: an empty reply, or one that only repeats the question, is no answer.

`no_answer_reason(question, answer)` is None for an answer, else why it is none. Text is compared as
`memorag.prompting.clues.normalize` compares it (NFKC, case folded, punctuation removed, whitespace collapsed):

- ``EMPTY``: nothing is left (whitespace and punctuation only);
- ``REPEATS_QUESTION``: what is left is the question (once or several times over), the start of the
  question (a generator cut off while echoing it: at least `MIN_ECHO_WORDS` words, or the whole of a
  shorter question; any start after a whole copy), or copies of it with only labels between them
  ("Question: ... Answer:"; the words of `ECHO_LABELS`, read as labels only beside an echo, so that
  "A" alone is an answer).
- The question followed by more ("Who wrote it? Shakespeare wrote it.") is an answer: the words after
  the echo are judged, not the echo. The question inside a longer sentence is an answer too, and so
  is a refusal ("I don't know."): the generator said something of its own.

`EchoGate` holds back a streamed answer while it could still turn out to be no answer, so that an
echo is never printed as if it were one (the CLI and the server stream through it).
"""

from __future__ import annotations

from memorag.prompting.clues import normalize

EMPTY = "empty"
REPEATS_QUESTION = "repeats the question"
DECLINES = "says the evidence does not answer"
# The one reply a reader trained by `train/reader.py` gives when its evidence lacks the answer; reported
# as no answer (`DECLINES`), like any refusal.
NO_ANSWER_REPLY = "Not in the evidence."
MIN_ECHO_WORDS = 3
ECHO_LABELS = frozenset({"question", "questions", "q", "answer", "answers", "a"})


def _drop_labels(words: list[str]) -> list[str]:
    start = 0
    while start < len(words) and words[start] in ECHO_LABELS:
        start += 1
    return words[start:]


def no_answer_reason(question: str, answer: str) -> str | None:
    """Why `answer` is no answer to `question` (`EMPTY`, `REPEATS_QUESTION`), or None when it is one."""
    words = normalize(answer).split()
    if not words:
        return EMPTY
    asked = normalize(question).split()
    if not asked:
        return None
    rest, echoed = words, False
    while True:
        unlabelled = _drop_labels(rest)
        if unlabelled[: len(asked)] != asked:
            break
        rest, echoed = unlabelled[len(asked):], True
    if echoed:
        rest = _drop_labels(rest)
        return REPEATS_QUESTION if rest == asked[: len(rest)] else None
    if len(rest) < len(asked) and rest == asked[: len(rest)] and len(rest) >= min(MIN_ECHO_WORDS, len(asked)):
        return REPEATS_QUESTION
    return None


def describe_no_answer(reason: str) -> str:
    """The line a reader sees in place of a non-answer."""
    if reason == EMPTY:
        return "no answer: the generator's reply was empty (the evidence it read is shown)"
    return "no answer: the generator only repeated the question (the evidence it read is shown)"


class EchoGate:
    """Passes a streamed answer on, holding it back while it could still be no answer to `question`:
    while it is empty, or (labels aside) the start of the question, of the question said twice, or
    a run of whole copies. `push` returns what may be shown now; `finish(answer)` what is left to show
    once the whole answer is known: nothing when it is no answer."""

    def __init__(self, question: str):
        self.asked = normalize(question)
        self.held: list[str] = []
        self.open = False

    def _could_be_echo(self, text: str) -> bool:
        words = _drop_labels(normalize(text).split())
        said = " ".join(words)
        if not said or not self.asked:
            return not said
        copies = (len(said) // (len(self.asked) + 1)) + 2
        return (" ".join([self.asked] * copies)).startswith(said) or no_answer_reason(self.asked, text) is not None

    def push(self, piece: str) -> str:
        if self.open:
            return piece
        self.held.append(piece)
        if self._could_be_echo("".join(self.held)):
            return ""
        self.open = True
        return self._release()

    def finish(self, answer: str) -> str:
        if self.open or no_answer_reason(self.asked, answer) is not None:
            self.held.clear()
            return ""
        return self._release()

    def _release(self) -> str:
        text = "".join(self.held)
        self.held.clear()
        return text
