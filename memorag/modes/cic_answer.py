"""Reading a corpus-in-context reply: the `Final Answer:` line, and the document IDs it names.

A model's reply is often malformed; the policy for each case:

- several `Final Answer:` lines: the first is read (a model that goes on writing after
  its answer invents further queries of its own); a note says how many there were.
- the marker may be decorated (`**Final Answer:**`, any case, a full-width colon, or
  Chinese `最终答案`); an empty marker line is followed to the next non-empty line.
- retrieval: the IDs inside the first `[...]` after the marker, or on the rest of the
  line when there is no bracket (a missing `]` reads to the end of the reply). Items are
  split at commas and semicolons; an item is an ID when it is a number once quotes are
  removed (`'3'`, `"3"`), or holds `ID: n` (`TITLE: x | ID: 3`), or is numbers separated
  by spaces (`3 5`). Other items are ignored, with a note. Text after the `]` is ignored.
- IDs that are not documents of the prompt (out of range, or dropped for the window)
  are ignored, with a note; a repeated ID counts once, at its first place.
- qa: the text after the marker, without surrounding quotes; a bracketed list of quoted
  strings (`['Paris', 'Lyon']`) becomes them joined with `; `. The documents are the
  `ID: n` the reply names before the marker.
- no `Final Answer:` at all: retrieval reads no IDs (the IDs the reasoning names are
  not taken as the answer); qa takes the whole reply as the answer. A note says so.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

_FINAL = re.compile(r"\**\s*(?:final\s*answer|最终答案)\s*\**\s*[:\uff1a]\s*\**", re.IGNORECASE)
_ID = re.compile(r"\bID\s*[:#\uff1a]?\s*(\d+)", re.IGNORECASE)
_NUMBERS = re.compile(r"\d+(?:\s+\d+)*")
_SEPARATORS = re.compile(r"[,;\uff0c\uff1b\u3001]")
_QUOTED = re.compile(r"'([^']*)'|\"([^\"]*)\"|\u201c([^\u201d]*)\u201d|\u2018([^\u2019]*)\u2019")
_QUOTES = "'\"`\u2018\u2019\u201c\u201d\u300c\u300d*"


@dataclass
class ParsedReply:
    """What was read: the documents' numbers, the answer text (qa), and notes on what was not."""

    numbers: list[int]
    answer: str = ""
    notes: list[str] = field(default_factory=list)


def parse_reply(reply: str, task: str, num_documents: int) -> ParsedReply:
    """Read `reply` for `task` ("retrieval" or "qa"); valid numbers are 0..num_documents-1."""
    markers = list(_FINAL.finditer(reply))
    notes: list[str] = []
    if len(markers) > 1:
        notes.append(f"the reply has {len(markers)} 'Final Answer:' lines; the first was read")
    if not markers:
        if task == "retrieval":
            return ParsedReply([], "", ["the reply has no 'Final Answer:' line; no document IDs were read"])
        numbers = _valid(_cited(reply), num_documents, notes)
        notes.append("the reply has no 'Final Answer:' line; the whole reply is taken as the answer")
        return ParsedReply(numbers, reply.strip(), notes)
    marker = markers[0]
    content = _content(reply[marker.end() :])
    if task == "retrieval":
        found, ignored = _ids(content)
        if ignored:
            notes.append(f"ignored parts of the final answer that are not document IDs: {ignored[:5]}")
        return ParsedReply(_valid(found, num_documents, notes), "", notes)
    return ParsedReply(_valid(_cited(reply[: marker.start()]), num_documents, notes), _answer_text(content), notes)


def _content(after: str) -> str:
    """The final answer's text: the rest of its line (or the next non-empty line), with a
    bracket opened there read to its `]`, across lines if need be."""
    lines = after.split("\n")
    index = next((i for i, line in enumerate(lines) if line.strip()), None)
    if index is None:
        return ""
    line = lines[index].strip()
    if "[" in line and "]" not in line[line.index("[") :]:
        rest = "\n".join(lines[index:])
        close = rest.find("]", rest.index("["))
        return rest.strip() if close < 0 else rest[: close + 1].strip()
    return line


def _ids(content: str) -> tuple[list[int], list[str]]:
    """The IDs of a final answer and the items that are not IDs."""
    if "[" in content:
        inner = content[content.index("[") + 1 :]
        inner = inner[: inner.index("]")] if "]" in inner else inner
    else:
        inner = content
    found: list[int] = []
    ignored: list[str] = []
    for item in _SEPARATORS.split(inner):
        item = item.strip().strip(_QUOTES + "[]() ").strip()
        if not item:
            continue
        tagged = _ID.search(item)
        if tagged:
            found.append(int(tagged.group(1)))
        elif _NUMBERS.fullmatch(item):
            found.extend(int(number) for number in item.split())
        else:
            ignored.append(item)
    return found, ignored


def _cited(text: str) -> list[int]:
    return [int(match.group(1)) for match in _ID.finditer(text)]


def _valid(numbers: Iterable[int], num_documents: int, notes: list[str]) -> list[int]:
    """The numbers that name a document of the prompt, each once, in order."""
    kept: list[int] = []
    unknown: list[int] = []
    for number in numbers:
        if not 0 <= number < num_documents:
            unknown.append(number)
        elif number not in kept:
            kept.append(number)
    if unknown:
        notes.append(f"ignored IDs that are not documents of the prompt (0..{num_documents - 1}): {unknown[:10]}")
    return kept


def _answer_text(content: str) -> str:
    if content.startswith("["):
        inner = content[1:]
        inner = inner[: inner.rindex("]")] if "]" in inner else inner
        quoted = [next(group for group in match.groups() if group is not None) for match in _QUOTED.finditer(inner)]
        quoted = [text.strip() for text in quoted if text.strip()]
        return "; ".join(quoted) if quoted else inner.strip().strip(_QUOTES).strip()
    return content.strip().strip(_QUOTES).strip()
