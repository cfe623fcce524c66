"""Long filler text for generated tasks: the King James Bible, and repeated noise.

Two kinds of filler, each a sequence of short *units* (sentence-like pieces)
that generators join and mix needles or facts into:

* ``"kjv"``: the King James Version of the Bible (1611, public domain), one unit
  per verse: 31,102 verses, 789,634 whitespace words (about 1.03M tokens at
  1.3 tokens per word). It is read from the Debian packages ``bible-kjv`` (the
  ``bible`` command) and ``bible-kjv-text`` (its compressed data,
  ``/usr/lib/bible.data``, 1.7 MB, plus ``/usr/lib/bible.data.conc``)::

      apt-get update && apt-get install -y bible-kjv bible-kjv-text
      bible -f "Gen1:1-Rev22:21"      # what this module runs

  ``-f`` turns pretty-printing off, giving one ``Ge1:1 In the beginning ...``
  line per verse; the reference is stripped. Where the command is missing, the
  books of Ruth, Esther and Jonah in ``examples/kjv_ruth_esther_jonah.txt`` (in
  the repository, about 9,600 words) are used instead, with a logged warning;
  longer targets then repeat that text cyclically.
* ``"noise"``: the classic repeated haystack of the passkey tests,
  ``The grass is green. The sky is blue. The sun is yellow. Here we go. There
  and back again.``, one sentence per unit, repeated as far as needed.

Units are plain strings without newlines. Generators take consecutive units,
starting at a seeded offset and wrapping around at the end.
"""

from __future__ import annotations

import functools
import logging
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

logger = logging.getLogger(__name__)

FillerKind = Literal["kjv", "noise"]
FILLER_KINDS: tuple[str, ...] = ("kjv", "noise")

KJV_INSTALL_COMMAND = "apt-get update && apt-get install -y bible-kjv bible-kjv-text"
KJV_FULL_RANGE = "Gen1:1-Rev22:21"
KJV_FALLBACK_FILE = Path(__file__).resolve().parents[3] / "examples" / "kjv_ruth_esther_jonah.txt"

NOISE_SENTENCES: tuple[str, ...] = (
    "The grass is green.",
    "The sky is blue.",
    "The sun is yellow.",
    "Here we go.",
    "There and back again.",
)

_VERSE_LINE = re.compile(r"^[1-3]?[A-Za-z]+\d+:\d+ (?P<text>.+)$")
_FALLBACK_HEADING = re.compile(r"^(THE BOOK OF .+|Chapter \d+|The Books of .+|King James Version .+)$")


class FillerUnavailableError(RuntimeError):
    """No filler text can be found: neither the Debian packages nor the repository copy."""


@dataclass(frozen=True)
class Filler:
    """A filler: its units in reading order, the separator to join them, and where it came from."""

    kind: str
    units: tuple[str, ...]
    separator: str
    source: str

    def describe(self) -> dict[str, object]:
        """What to record in an example's ``meta`` about the filler."""
        return {"kind": self.kind, "source": self.source, "num_units": len(self.units)}


def _run_bible(reference: str, bible_command: str) -> str:
    result = subprocess.run(
        [bible_command, "-f", reference],
        check=True,
        capture_output=True,
        text=True,
        encoding="utf-8",
        errors="replace",
        timeout=120,
    )
    return result.stdout


def parse_bible_output(text: str) -> list[str]:
    """Verse texts from ``bible -f`` output (``Ge1:1 In the beginning ...`` lines); references stripped."""
    verses = []
    for line in text.splitlines():
        match = _VERSE_LINE.match(line.strip())
        if match:
            verses.append(match.group("text").strip())
    return verses


def parse_fallback_file(text: str) -> list[str]:
    """Verse lines of ``examples/kjv_ruth_esther_jonah.txt`` (headings and blank lines dropped)."""
    return [
        line.strip()
        for line in text.splitlines()
        if line.strip() and not _FALLBACK_HEADING.match(line.strip())
    ]


@functools.lru_cache(maxsize=2)
def kjv_filler(fallback_file: Path | None = None) -> Filler:
    """The whole KJV Bible, one verse per unit, from the ``bible`` command (cached).

    Falls back to the Ruth/Esther/Jonah excerpt in ``examples/`` with a warning
    naming the install command; raises :class:`FillerUnavailableError` when
    neither is there.
    """
    bible_command = shutil.which("bible")
    if bible_command is not None:
        try:
            verses = parse_bible_output(_run_bible(KJV_FULL_RANGE, bible_command))
        except (OSError, subprocess.SubprocessError) as error:
            logger.warning("`bible -f %s` failed (%s); trying the repository excerpt", KJV_FULL_RANGE, error)
            verses = []
        if verses:
            return Filler("kjv", tuple(verses), "\n", f"bible -f {KJV_FULL_RANGE} (Debian bible-kjv-text)")
    path = fallback_file or KJV_FALLBACK_FILE
    if path.is_file():
        verses = parse_fallback_file(path.read_text(encoding="utf-8"))
        if verses:
            logger.warning(
                "the `bible` command (Debian bible-kjv, bible-kjv-text) is not installed; using the "
                "%d-verse excerpt %s instead, repeated as needed. For the whole KJV Bible run: %s",
                len(verses),
                path,
                KJV_INSTALL_COMMAND,
            )
            return Filler("kjv", tuple(verses), "\n", str(path))
    raise FillerUnavailableError(
        f"no KJV filler text: the `bible` command is missing and {path} does not exist. "
        f"Install the Bible with: {KJV_INSTALL_COMMAND}"
    )


def noise_filler() -> Filler:
    """The repeated "The grass is green..." haystack (five sentences, cycled)."""
    return Filler("noise", NOISE_SENTENCES, " ", "built-in noise sentences")


def get_filler(kind: str = "kjv") -> Filler:
    """The filler of that kind (``"kjv"`` or ``"noise"``)."""
    if kind == "kjv":
        return kjv_filler()
    if kind == "noise":
        return noise_filler()
    raise ValueError(f"unknown filler kind {kind!r}; choose one of {', '.join(FILLER_KINDS)}")


def filler_text(num_words: int, kind: str = "kjv", start_unit: int = 0) -> str:
    """At least ``num_words`` whitespace words of filler, whole units, from unit ``start_unit`` on (cyclic)."""
    if num_words < 0:
        raise ValueError(f"num_words must be >= 0, got {num_words}")
    filler = get_filler(kind)
    pieces: list[str] = []
    words = 0
    position = start_unit % len(filler.units)
    while words < num_words:
        unit = filler.units[position]
        pieces.append(unit)
        words += len(unit.split())
        position = (position + 1) % len(filler.units)
    return filler.separator.join(pieces)


def cycle_units(units: Sequence[str], start: int, count: int) -> list[str]:
    """``count`` consecutive units from ``start``, wrapping around the end."""
    if not units:
        raise ValueError("no units to take from")
    total = len(units)
    start %= total
    taken: list[str] = []
    while count > 0:
        piece = units[start : start + count]
        taken.extend(piece)
        count -= len(piece)
        start = 0
    return taken
