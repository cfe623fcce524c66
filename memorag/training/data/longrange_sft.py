"""Long-range QA samples for clue SFT: questions the memory must answer from what it read.

Clue SFT on HotpotQA (memorag/training/data/hotpotqa_sft.py) teaches the memory model the pipeline's
instructions over ten short paragraphs; a fact read once among thousands of tokens of other
text, and asked for later, is what these samples add. Each is a generated long-range task of
`memorag.evaluation.datasets.synthetic` (single, multi-key, multi-value and multi-query needles, variable
tracking and bAbI facts by default; any generated task on request, e.g. Hash-Hop chains) as an SFT
record (`memorag.training.data.sft`):

- `context`: the task's context (KJV filler with the facts hidden in it);
- `instruction`: the pipeline's own `MEMORY_ANSWER` instruction with the task's question, the
  prompt of the `memorag:qa` mode (the memory answering from its memory alone);
- `target`: the task's answers, joined by ", " (one answer: the answer itself).

Held out: the seeds start at `LONGRANGE_SEED` (20,000), far from the evaluation's (the harness's
`seed`, 0 in the configs) and the pretraining mixture's (`SYNTHETIC_SEED`, 10,000, plus the
config's seed), and every example is drawn from its own `f"{task}:{seed}:{index}"` generator, so
no evaluated example is trained on (a key, drawn from a small adjective-noun vocabulary, may recur
with another value; the 7-digit values are independent draws); a context holding a verse of the
held-out books (Ruth, Esther, Jonah) is skipped. These are proxy tasks: a memory trained on them and scored on
the generated needles is scored in the tasks' own distribution, which the README says beside
any such figure.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from memorag.prompting.prompts import MEMORY_ANSWER

from .mixture import held_out_verses, holds_held_out_verse

LONGRANGE_SEED = 20_000
# the default tasks; Hash-Hop is left out because its hashes take about 8 tokens per approximate one, so
# its contexts come out far longer than asked unless counted with the tokenizer (`tokenizer=`)
LONGRANGE_TASKS = ("niah_single", "niah_multikey", "niah_multivalue", "niah_multiquery", "variable_tracking",
                   "babilong_qa1", "babilong_qa2")
ANSWER_SEPARATOR = ", "


def build_samples(num_samples: int, context_tokens: Sequence[int] = (3072,),
                  tasks: Sequence[str] = LONGRANGE_TASKS, seed: int = 0, tokenizer: Any = None,
                  language: str = "en", progress: Callable[[int], Any] | None = None) -> list[dict[str, Any]]:
    """`num_samples` SFT records, the tasks in turn, each context `context_tokens` long (one of them,
    drawn per sample with the seed; counted by `tokenizer`, else approximately in words), from seed
    `LONGRANGE_SEED + seed` (see the module docstring); `progress(1)` after each sample."""
    from memorag.evaluation.datasets.synthetic import SYNTHETIC_TASKS, generate_example

    if num_samples < 1:
        raise ValueError(f"num_samples={num_samples}: ask for at least one sample")
    unknown = sorted(set(tasks) - set(SYNTHETIC_TASKS))
    if unknown or not tasks:
        raise ValueError(f"tasks {unknown or 'none'}: choose from {', '.join(SYNTHETIC_TASKS)}")
    if not context_tokens or min(context_tokens) < 256:
        raise ValueError(f"context_tokens={list(context_tokens)}: give lengths of at least 256 tokens")
    if language not in MEMORY_ANSWER:
        raise ValueError(f"language {language!r}: the instruction exists in {', '.join(MEMORY_ANSWER)}")
    generation_seed = LONGRANGE_SEED + seed
    lengths = random.Random(f"{generation_seed}:longrange-lengths")
    held = held_out_verses()
    samples: list[dict[str, Any]] = []
    index = 0
    while len(samples) < num_samples:
        task = tasks[index % len(tasks)]
        example = generate_example(task, lengths.choice(list(context_tokens)), seed=generation_seed, index=index,
                                   tokenizer=tokenizer)
        index += 1
        if holds_held_out_verse(example.context, held):
            continue
        samples.append({
            "context": example.context,
            "instruction": MEMORY_ANSWER[language].format(question=example.question),
            "target": ANSWER_SEPARATOR.join(example.answers),
            "task": f"longrange-{task}",
            "id": example.id,
        })
        if progress is not None:
            progress(1)
    return samples
