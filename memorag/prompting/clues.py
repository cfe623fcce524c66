"""Turning what the memory model writes into clean retrieval clues, in any language.

A small model's reply is noisy: numbered or bulleted lines, labels ("Question 2:"),
headings, an acknowledgement ("Sure, here are the passages:"), the prompt or the
question echoed back, the same line twice, or a phrase repeated until the token
limit. `parse_clues` keeps the lines worth retrieving with.

Length is measured in *units* that work for every script: each character of a
script written without spaces between words (Chinese, Japanese kana, Thai, Lao,
Khmer, Myanmar) is one unit, and elsewhere each whitespace-separated word is one.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence

from memorag.prompting.prompts import ACKNOWLEDGEMENTS

# Scripts written without spaces between words: one character is one unit.
_NO_SPACE = (
    "\u0e00-\u0e7f"  # Thai
    "\u0e80-\u0eff"  # Lao
    "\u1000-\u109f"  # Myanmar
    "\u1780-\u17ff"  # Khmer
    "\u3040-\u30ff"  # Hiragana, Katakana
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # CJK ideographs
    "\U00020000-\U0002ffff"  # CJK extensions
)
_UNIT = re.compile(rf"[{_NO_SPACE}]|[^\s{_NO_SPACE}]+")
_WORDLIKE = re.compile(r"\w")
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ffff]")

# "1." "2)" "(3)" "iv." "a)" "-" "*" "•" "一、" at the start of a line (repeated: "1. - x").
_MARKER = re.compile(
    r"^\s*(?:[-*\u2022\u00b7\u2023\u25aa\u25cf\u2013\u2014>#]+|\(?\d{1,3}[.)\]:\uff0e\u3001]|\(\d{1,3}\)"
    r"|\(?[a-zA-Z][.)](?=\s)|\(?(?:i{1,3}|iv|v|vi{1,3}|ix|x)[.)](?=\s)|[\u4e00\u4e8c\u4e09\u56db\u4e94\u516d\u4e03\u516b\u4e5d\u5341]+[\u3001.\uff0e])\s*",
    re.IGNORECASE,
)
# "Clue 2:", "Question:", "Q:", "Draft answer:", "The answer to the question is", "要点：" before the clue.
_LABEL = re.compile(
    r"^\s*(?:(?:evidence|clues?|spans?|passages?|questions?|q|answers?|a|draft(?: answer)?|key points?|points?"
    r"|sub-?questions?)\s*\d{0,3}\s*[:\uff1a]"
    r"|(?:the |my )?(?:draft |short )?answer(?: to (?:the|this|your) question)? is\b\s*[:\uff1a]?|(?:\u7ebf\u7d22|\u95ee\u9898|\u7b54\u6848|\u8981\u70b9|\u8bc1\u636e)\s*\d{0,3}\s*[:\uff1a])\s*",
    re.IGNORECASE,
)
_INLINE_NUMBER = re.compile(r"\s+(?=\(?\d{1,2}[.)]\s+\S)")
_SENTENCE_END = re.compile(r"(?<=[.!?\u3002\uff01\uff1f])\s+|(?<=[\u3002\uff01\uff1f])")
_QUOTES = "\"'`\u201c\u201d\u2018\u2019\u300c\u300d\u300e\u300f\u00ab\u00bb*_"
_ACKNOWLEDGEMENTS = tuple(
    sorted({phrase for phrases in ACKNOWLEDGEMENTS.values() for phrase in phrases}, key=len, reverse=True)
)


def text_units(text: str) -> int:
    """Length of `text` in units: characters of space-less scripts plus words elsewhere."""
    return sum(1 for _ in _units(text))


def truncate_units(text: str, max_units: int) -> str:
    """`text` cut after its first `max_units` units (unchanged when it is short enough)."""
    end = None
    for count, match in enumerate(_units(text), start=1):
        if count == max_units:
            end = match.end()
        elif count > max_units:
            return text[:end].rstrip()
    return text


def _units(text: str) -> Iterable[re.Match[str]]:
    return (match for match in _UNIT.finditer(text) if _WORDLIKE.search(match.group()))


def detect_language(text: str) -> str:
    """"zh" when Chinese characters make up at least a fifth of the letters, else "en"."""
    letters = sum(1 for char in text if char.isalpha())
    han = len(_HAN.findall(text))
    return "zh" if letters and han / letters >= 0.2 else "en"


def normalize(text: str) -> str:
    """Compare key: NFKC, case-folded, punctuation removed, whitespace collapsed."""
    text = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(re.sub(r"[^\w\s]", " ", text).split())


def _clean(piece: str) -> str:
    previous = None
    while previous != piece:
        previous = piece
        piece = _MARKER.sub("", piece, count=1)
        piece = _LABEL.sub("", piece, count=1)
        piece = piece.strip().strip(_QUOTES).strip()
    return piece


def _is_acknowledgement(key: str) -> bool:
    return any(key == phrase or key.startswith(phrase + " ") for phrase in _ACKNOWLEDGEMENTS)


def _is_degenerate(text: str) -> bool:
    """A phrase repeated until the token limit: few distinct units among many."""
    units = [match.group().casefold() for match in _units(text)]
    return len(units) >= 8 and len(set(units)) / len(units) < 0.4


def _paraphrases_instruction(key: str, instruction_words: set[str]) -> bool:
    """Most of the clue's words come from the prompt's instructions (not from the question):
    the model restated what it was asked ("the text answers the question directly")."""
    words = set(key.split())
    return len(words) >= 3 and len(words & instruction_words) / len(words) >= 0.7


class _EchoFilter:
    """Drops the parts of a reply that repeat the prompt, the question or an acknowledgement."""

    def __init__(self, prompt: str, query: str):
        self.prompt_key, self.query_key = normalize(prompt), normalize(query)
        self.instruction_words = set(self.prompt_key.split()) - set(self.query_key.split())

    def is_echo(self, text: str) -> bool:
        key = normalize(text)
        if not key or _is_acknowledgement(key) or key == self.query_key:
            return True
        if self.prompt_key and f" {key} " in f" {self.prompt_key} ":
            return True
        return _paraphrases_instruction(key, self.instruction_words) or self.restates_query(text, key)

    def restates_query(self, text: str, key: str) -> bool:
        """A question made mostly of the query's own words: it retrieves what the query
        does, or worse when garbled. (A statement is kept: "Mordecai brought up Esther"
        shares most words with the query but carries the answer.)"""
        words = key.split()
        if not text.rstrip().endswith(("?", "\uff1f")) or not self.query_key or len(words) < 2:
            return False
        query_words = set(self.query_key.split())
        return sum(word in query_words for word in words) / len(words) >= 0.6

    def clean(self, piece: str) -> str:
        """The piece without markers and labels, and without its echoed sentences or headings."""
        kept = []
        for sentence in _SENTENCE_END.split(_clean(piece)):
            sentence = _clean(sentence)
            if sentence and not sentence.endswith((":", "\uff1a")) and not self.is_echo(sentence):
                kept.append(sentence)
        return " ".join(kept)


def parse_clues(
    text: str,
    *,
    prompt: str = "",
    query: str = "",
    split_lines: bool = True,
    max_clues: int = 8,
    min_units: int = 2,
    max_units: int = 64,
) -> list[str]:
    """The clues in a memory model's reply, cleaned, filtered and de-duplicated, in order.

    - `split_lines`: one clue per line (also splitting "1. x 2. y" written on one
      line); False reads the whole reply as one clue (a draft answer).
    - dropped: numbering, bullets and labels; headings (ending in ":"); sentences that
      acknowledge, echo `query` or a part of `prompt`, mostly restate the prompt's
      instructions in other words, or ask the query again in mostly its own words; clues shorter than `min_units`; runaway repetitions;
      repeats of an earlier clue (compared without case and punctuation). Clues longer
      than `max_units` are cut to that length.
    - at most `max_clues` are returned.
    """
    if max_clues < 1:
        return []
    echoes = _EchoFilter(prompt, query)
    if split_lines:
        pieces = [echoes.clean(part) for line in text.splitlines() for part in _INLINE_NUMBER.split(line)]
    else:
        pieces = [" ".join(part for part in (echoes.clean(line) for line in text.splitlines()) if part)]
    clues: list[str] = []
    seen: set[str] = set()
    for piece in pieces:
        clue = truncate_units(piece, max_units)
        key = normalize(clue)
        if not key or key in seen or text_units(clue) < min_units or _is_degenerate(clue):
            continue
        seen.add(key)
        clues.append(clue)
        if len(clues) == max_clues:
            break
    return clues


def combine_clues(groups: Sequence[Sequence[str]], max_clues: int, query: str = "") -> list[str]:
    """Merge clue lists of several kinds round-robin (each kind gets its turn), without
    repeats or echoes of `query`, up to `max_clues`."""
    combined: list[str] = []
    seen = {normalize(query)} if query else set()
    depth = max((len(group) for group in groups), default=0)
    for position in range(depth):
        for group in groups:
            if position < len(group) and len(combined) < max_clues:
                key = normalize(group[position])
                if key not in seen:
                    seen.add(key)
                    combined.append(group[position])
    return combined
