"""Whether an answer answers: an empty reply, one that only says the question again, or a refusal is no answer.

`no_answer_reason(question, answer)` is None for an answer, else why it is none:

- ``EMPTY``: nothing is left once punctuation and whitespace are gone;
- ``DECLINES``: the reply says the evidence does not hold the answer, or refuses ("Not in the evidence.",
  `NO_ANSWER_REPLY`, the one reply a reader trained by ``train/reader.py`` gives; "Not enough
  evidence."; "I don't know."; "The text does not say."). Only a reply that opens so counts: a reply
  that answers after a hedge is an answer;
- ``REPEATS_QUESTION``: the reply says nothing the question did not. Replies are compared by their
  meaning words (`meaning_words`): contractions spelled out ("What's" is "what is"), case, punctuation
  and word order ignored, function words (articles, auxiliaries, question words, "used to") left out
  and plain inflections folded ("performs" is "perform"). A reply is an echo when it has no meaning
  word the question lacks (labels such as "Question:" aside) and carries at least `ECHO_COVERAGE` of
  the question's meaning words; or when it is the start of the question, at least `MIN_ECHO_WORDS`
  words long (a generator cut off while echoing). "Jonah was sent to Nineveh" answers "Which city was
  Jonah sent to?" ("nineveh" is new); "X" answers "Which is older, X or Y?" (it carries too few of the
  question's words to be an echo); "X is older than Y" answers it too ("than" is a meaning word).

`EchoGate` holds back a streamed answer while it could still turn out to be no answer, so that no
non-answer is ever shown as if it were one. `MemoRAG.ask` streams every answer through it, so every
front door (the CLI, the demo, the server, Python's `on_text`) shows the same text, and
`Answer.answered` / `Answer.no_answer` read the same judgement.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter

EMPTY = "empty"
REPEATS_QUESTION = "repeats the question"
DECLINES = "says the evidence does not answer"
# The one reply a reader trained by `train/reader.py` gives when its evidence lacks the answer; reported
# as no answer (`DECLINES`), like any refusal.
NO_ANSWER_REPLY = "Not in the evidence."

MIN_ECHO_WORDS = 3
ECHO_COVERAGE = 0.75  # the share of the question's meaning words an echo carries

# Words an echo may add without saying anything: labels, and the padding of a reworded question.
ECHO_FILLERS = frozenset("question questions q answer answers a please tell me us you know used".split())

# Function words: they carry no fact of their own. "or", "than", "not", "no", "yes", "both", "neither",
# "only", numbers and every content word are meaning words: an answer that adds one says something.
FUNCTION_WORDS = frozenset("""
    a the an this that these those there here it its it's they them their he him his she her we our
    is are was were be been being am do does did done doing has have had having will would shall should
    can could may might must ought get got
    what which who whom whose when where why how whatever whichever
    of to in on at by for from with into onto about as upon within out up off over
    and so then also
    kind type sort some any
""".split())

_CONTRACTIONS = (
    (re.compile(r"\b(can)'t\b"), r"\1 not"),
    (re.compile(r"\bwon't\b"), "will not"),
    (re.compile(r"n't\b"), " not"),
    (re.compile(r"'re\b"), " are"),
    (re.compile(r"'ve\b"), " have"),
    (re.compile(r"'ll\b"), " will"),
    (re.compile(r"'d\b"), " would"),
    (re.compile(r"'m\b"), " am"),
    (re.compile(r"\b(what|who|where|when|how|why|which|it|that|there|here|he|she)'s\b"), r"\1 is"),
    (re.compile(r"'s\b"), ""),  # a possessive: "Jonah's" is "Jonah"
)

# The openings of a refusal, read on `_plain` text (contractions spelled out, punctuation gone).
_WHERE = r"(?:evidence|text|texts|context|passage|passages|document|documents|article|source|sources|information)"
_SAY = r"(?:say|says|mention|mentions|contain|contains|state|states|specify|specifies|provide|provides|include|" \
       r"includes|answer|answers|give|gives|tell|tells|show|shows)"
_DECLINE_OPENINGS = re.compile(
    r"^(?:"
    + rf"not (?:in|found in|mentioned in|stated in|given in|provided in|specified in|answered (?:in|by)) the {_WHERE}"
    + rf"|(?:the|this|that|these|my) {_WHERE} (?:does|do|did) not {_SAY}"
    + r"|there is no (?:information|mention|answer|evidence|data)"
    + rf"|(?:there is )?(?:not enough|insufficient) {_WHERE}"
    + r"|(?:i|we) (?:do not|cannot|can not|could not|am not able to|am unable to|are unable to) "
      r"(?:know|say|tell|answer|find|determine|be sure)"
    + r"|no answer|unanswerable|cannot be (?:answered|determined)|it cannot be (?:answered|determined)"
    + r"|the answer (?:is not|cannot be) (?:in|found|given|provided|mentioned|stated|determined)"
    + r"|(?:it is )?not (?:mentioned|stated|specified|provided|given|known)"
    + r")\b"
)


def _plain(text: str) -> str:
    """NFKC, case folded, contractions spelled out, punctuation gone, whitespace collapsed."""
    text = unicodedata.normalize("NFKC", text).casefold().replace("\u2019", "'").replace("\u2018", "'")
    for pattern, spelled in _CONTRACTIONS:
        text = pattern.sub(spelled, text)
    return " ".join(re.sub(r"[^\w\s]", " ", text).split())


def _fold(word: str) -> str:
    """A plain inflection folded off: "performs", "performed", "performing", "perform" -> "perform";
    "decode", "decoding" -> "decod"; "cities" -> "city"."""
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    for ending in ("ing", "ed", "es", "s"):
        if word.endswith(ending) and len(word) - len(ending) >= 3 and not word.endswith("ss"):
            word = word[: -len(ending)]
            break
    return word[:-1] if word.endswith("e") and len(word) >= 5 else word


def meaning_words(text: str) -> list[str]:
    """The words of `text` that carry meaning, folded (`_fold`), in order: function words left out."""
    return [_fold(word) for word in _plain(text).split() if word not in FUNCTION_WORDS]


def _declines(plain: str) -> bool:
    return _DECLINE_OPENINGS.match(plain) is not None


def _repeats(question: list[str], words: list[str]) -> bool:
    """Whether a reply of meaning words `words` says only what a question of meaning words `question` did:
    no word the question lacks, no word said more often than the question says it (naming one of its
    alternatives again picks it), the question's "or" kept when it offers alternatives, and at least
    `ECHO_COVERAGE` of its words."""
    asked, said = Counter(question), Counter(word for word in words if word not in ECHO_FILLERS)
    if not asked or any(count > asked[word] for word, count in said.items()):
        return False
    if said["or"] < asked["or"]:
        return False  # an "or" of the question's alternatives dropped: the reply chose
    return len(said) >= math.ceil(ECHO_COVERAGE * len(asked))


def _starts_the_question(question: list[str], plain: list[str]) -> bool:
    """Whether `plain` is the start of `question` (both plain words, labels aside), `MIN_ECHO_WORDS` long or the whole."""
    return bool(plain) and len(plain) >= min(MIN_ECHO_WORDS, len(question)) and question[: len(plain)] == plain


def no_answer_reason(question: str, answer: str) -> str | None:
    """Why `answer` is no answer to `question` (`EMPTY`, `DECLINES`, `REPEATS_QUESTION`), or None when it is one."""
    plain = _plain(answer)
    if not plain:
        return EMPTY
    if _declines(plain):
        return DECLINES
    asked = [word for word in _plain(question).split() if word not in ECHO_FILLERS]
    words = [word for word in plain.split() if word not in ECHO_FILLERS]
    if not asked:
        return None
    if words[: len(asked)] == asked:
        # the whole question, then more: the words after it are judged ("Who was born first, A or B? A.")
        while words[: len(asked)] == asked:
            words = words[len(asked):]
        return REPEATS_QUESTION if asked[: len(words)] == words else None  # nothing more, or a start of another copy
    if _starts_the_question(asked, words) or _repeats(meaning_words(question), meaning_words(answer)):
        return REPEATS_QUESTION
    return None


def describe_no_answer(reason: str) -> str:
    """The line a reader sees in place of a non-answer."""
    if reason == EMPTY:
        return "no answer: the generator's reply was empty (the evidence it read is shown)"
    if reason == DECLINES:
        return "no answer: the generator found no answer in the evidence (the evidence it read is shown)"
    return "no answer: the generator only repeated the question (the evidence it read is shown)"


def _could_become_a_refusal(plain: str) -> bool:
    """Whether `plain` (a reply so far) is a refusal or may still become one."""
    if _declines(plain):
        return True
    probes = ("not in the evidence", "the evidence does not say", "the text does not say", "the context does not say",
              "there is no information", "i do not know", "i cannot answer", "no answer", "unanswerable",
              "it is not mentioned", "cannot be determined", "the answer is not in")
    return any(probe.startswith(plain) for probe in probes)


class EchoGate:
    """Passes a streamed answer on, holding it back while it could still be no answer to `question`:
    while it is empty, a refusal or the start of one, or says nothing the question did not (the last,
    unfinished word aside). `push` returns what may be shown now; `finish(answer)` what is left to
    show once the whole answer is known."""

    def __init__(self, question: str):
        self.question = question
        self.asked = set(meaning_words(question)) - ECHO_FILLERS
        self.held: list[str] = []
        self.open = False

    def _could_be_no_answer(self, text: str) -> bool:
        plain = _plain(text)
        if not plain or _could_become_a_refusal(plain):
            return True
        if text[-1:].isalnum():  # the last word may be unfinished: judge the words before it
            text = text.rsplit(None, 1)[0] if len(text.split()) > 1 else ""
        said = {word for word in meaning_words(text) if word not in ECHO_FILLERS}
        return said <= self.asked

    def push(self, piece: str) -> str:
        if self.open:
            return piece
        self.held.append(piece)
        if self._could_be_no_answer("".join(self.held)):
            return ""
        self.open = True
        return self._release()

    def finish(self, answer: str) -> str:
        """What is left to show of the whole `answer`: nothing once shown in part or when it is no
        answer; else all of it (the streamed pieces held so far, or an answer that was never streamed)."""
        self.held.clear()
        if self.open or no_answer_reason(self.question, answer) is not None:
            return ""
        self.open = True
        return answer

    def _release(self) -> str:
        text = "".join(self.held)
        self.held.clear()
        return text
