"""LOFT's corpus-in-context prompt: the instruction, every document tagged with its number,
few-shot examples grounded in the same corpus, then the query.

Everything before the query depends only on the corpus, the task, the language and the
example settings, so it is one prefix that every query shares (and that a local
generator computes once, see `LocalGenerator.generate_with_prefix`).

Documents are numbered by their position in the corpus, from 0; the answer parser
(`cic_answer.py`) maps the numbers back to document ids.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from memorag import prompts
from memorag.clues import text_units, truncate_units
from memorag.retrieval.chunking import Document, split_sentences_for_mixpr

# An example sentence needs this many units (words; characters of Chinese): a lead to quote
# and a continuation to answer with.
MIN_SENTENCE_UNITS = 6
# At most this many units of the sentence are quoted, and at most this many answer.
LEAD_UNITS = 8
CONTINUATION_UNITS = 8
_SENTENCE_END = ".!?;:,\u3002\uff01\uff1f\uff1b\uff1a\uff0c"


@dataclass(frozen=True)
class Example:
    """A few-shot example: its query, the numbers of the documents it needs, its short answer."""

    query: str
    numbers: tuple[int, ...]
    answer: str


def build_examples(documents: Sequence[Document], count: int, seed: int, language: str) -> list[Example]:
    """`count` examples over `documents` (numbered by position), the same for the same corpus and seed.

    An arbitrary corpus has no labelled queries, so each example is made from the corpus
    itself: a sentence of a document is cut in two, the query quotes its first part (at
    most `LEAD_UNITS` units, at most half the sentence) and asks what follows, and the
    answer is what follows (at most `CONTINUATION_UNITS` units) for qa, the document's
    number for retrieval. When `count` >= 2 and the corpus has enough usable documents,
    the last example asks about two documents, to show a final answer with several IDs.

    Choice: `random.Random(seed)` samples `count` (+1 for the two-document example)
    distinct documents among those with a sentence of at least `MIN_SENTENCE_UNITS` units,
    then one such sentence in each. Fewer usable documents give fewer examples.
    """
    if count < 1:
        return []
    rng = random.Random(seed)
    usable = []
    for number, document in enumerate(documents):
        sentences = [span.text for span in split_sentences_for_mixpr(document.text)
                     if text_units(span.text) >= MIN_SENTENCE_UNITS]
        if sentences:
            usable.append((number, sentences))
    two_documents = count >= 2 and len(usable) >= count + 1
    picked = rng.sample(usable, min(count + 1 if two_documents else count, len(usable)))
    if two_documents:
        groups = [[item] for item in picked[: count - 1]] + [picked[count - 1 :]]
    else:
        groups = [[item] for item in picked]
    examples = []
    for group in groups:
        cuts = [_cut(rng.choice(sentences)) for _, sentences in group]
        if len(cuts) == 1:
            query = prompts.fill(prompts.CIC_EXAMPLE_ONE, language, lead=cuts[0][0])
        else:
            query = prompts.fill(prompts.CIC_EXAMPLE_TWO, language, lead=cuts[0][0], other_lead=cuts[1][0])
        examples.append(Example(query, tuple(number for number, _ in group), "; ".join(rest for _, rest in cuts)))
    return examples


def _cut(sentence: str) -> tuple[str, str]:
    """The sentence's lead (quoted by the query) and the words after it (the answer, without
    the sentence's final punctuation)."""
    lead = truncate_units(sentence, min(LEAD_UNITS, text_units(sentence) // 2))
    rest = truncate_units(sentence[len(lead) :].strip(), CONTINUATION_UNITS)
    return lead, rest.rstrip(_SENTENCE_END)


def render_document(number: int, document: Document) -> str:
    """`ID: n | TITLE: ... | CONTENT: ... | END ID: n`, the document's text exactly as it is."""
    return prompts.fill(prompts.CIC_DOCUMENT, id=str(number), title=document.title, content=document.text)


def render_example(example: Example, documents: Sequence[Document], task: str, language: str) -> str:
    """The example's query line, the documents it needs, and its final answer."""
    lines = [prompts.fill(prompts.CIC_QUERY, language, query=example.query).rstrip("\n"),
             prompts.fill(prompts.CIC_EXAMPLE_REASONING, language)]
    lines += [prompts.fill(prompts.CIC_NEEDED_DOCUMENT, id=str(number), title=documents[number].title)
              for number in example.numbers]
    if task == "retrieval":
        answer = "[" + ", ".join(str(number) for number in example.numbers) + "]"
    else:
        answer = example.answer
    lines.append(prompts.fill(prompts.CIC_FINAL_ANSWER, answer=answer))
    return "\n".join(lines)


def corpus_prefix(documents: Sequence[Document], task: str, language: str, examples: Sequence[Example]) -> str:
    """Everything before the query: instruction, corpus, examples, and the line that
    introduces the query. Ends with a blank line, so the query can follow directly."""
    instruction = prompts.CIC_RETRIEVAL_INSTRUCTION if task == "retrieval" else prompts.CIC_QA_INSTRUCTION
    parts = [prompts.fill(instruction, language),
             "\n".join(render_document(number, document) for number, document in enumerate(documents))]
    if examples:
        parts.append(prompts.fill(prompts.CIC_EXAMPLES_HEADER, language))
        parts += [render_example(example, documents, task, language) for example in examples]
    parts.append(prompts.fill(prompts.CIC_QUERY_INTRO, language))
    return "\n\n".join(parts) + "\n\n"


def query_suffix(query: str, language: str) -> str:
    """The part after the shared prefix: the query."""
    return prompts.fill(prompts.CIC_QUERY, language, query=query)
