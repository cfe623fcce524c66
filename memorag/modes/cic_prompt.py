"""LOFT's corpus-in-context prompt: the instructions, every document tagged with its number,
few-shot examples over the same corpus, then the query (the texts: `prompts.CIC_*`).

Everything before the query depends only on the corpus, the task and the examples, so it is
one prefix that every query shares (and that a local generator computes once, see
`LocalGenerator.generate_with_prefix`).

Few-shot examples are built as LOFT builds them where the task has labelled questions
(`MemoRAG.few_shot`: real questions of the same task with their gold documents; LOFT's
``few_shot_queries.jsonl``, or HotpotQA training rows): each lists its gold documents
(``TITLE: t | ID: n``) and gives ``Final Answer: ['n', ...]`` (retrieval) or its answers (qa).
Gold documents the corpus lacks are put into the prompt's corpus at seeded places. Only a
task without labelled questions gets examples generated from the corpus itself
(`build_examples`). Documents are numbered by their place in the prompt, from 0; the answer
parser (`cic_answer.py`) maps the numbers back to document ids.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from memorag.modes.results import FewShotExample
from memorag.prompting import prompts
from memorag.prompting.clues import text_units, truncate_units
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
    """A few-shot example: its query, the numbers of the documents it needs, its short answer
    (a generated example) or answers (a labelled one)."""

    query: str
    numbers: tuple[int, ...]
    answer: str
    answers: tuple[str, ...] = ()


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
        examples.append(Example(query, tuple(number for number, _ in group), "; ".join(rest for _, rest in cuts),
                                tuple(rest for _, rest in cuts)))
    return examples


def _cut(sentence: str) -> tuple[str, str]:
    """The sentence's lead (quoted by the query) and the words after it (the answer, without
    the sentence's final punctuation)."""
    lead = truncate_units(sentence, min(LEAD_UNITS, text_units(sentence) // 2))
    rest = truncate_units(sentence[len(lead) :].strip(), CONTINUATION_UNITS)
    return lead, rest.rstrip(_SENTENCE_END)


def place_documents(documents: Sequence[Document], few_shot: Sequence[FewShotExample], seed: int) -> list[Document]:
    """`documents` with the few-shot examples' gold documents they lack, each at a seeded place
    (the examples' answers are then not all at one end of the corpus)."""
    placed = list(documents)
    known = {document.id for document in placed}
    rng = random.Random(f"cic-few-shot:{seed}")
    for example in few_shot:
        for document in example.documents:
            if document.id not in known:
                known.add(document.id)
                placed.insert(rng.randint(0, len(placed)), document)
    return placed


def labelled_examples(few_shot: Sequence[FewShotExample], documents: Sequence[Document], count: int) -> list[Example]:
    """The first `count` labelled examples whose gold documents are all among `documents` (numbered
    by position); their answer is their answers (qa)."""
    number_of = {document.id: number for number, document in enumerate(documents)}
    examples = []
    for item in few_shot:
        numbers = [number_of.get(document.id) for document in item.documents]
        if None not in numbers:
            examples.append(Example(item.query, tuple(numbers), "", tuple(item.answers)))
        if len(examples) == count:
            break
    return examples


def render_document(number: int, document: Document) -> str:
    """`ID: n | TITLE: ... | CONTENT: ... | END ID: n`, the document's text exactly as it is."""
    return prompts.CIC_DOCUMENT.format(id=number, title=document.title or prompts.CIC_NO_TITLE, content=document.text)


def _answer_list(items: Sequence[str]) -> str:
    """A list as LOFT writes final answers: ``['a', 'b']``."""
    return str([str(item) for item in items])


def render_example(position: int, example: Example, documents: Sequence[Document], task: str) -> str:
    """Example `position` (from 1): its query, the documents it needs, and its final answer."""
    lines = [prompts.CIC_EXAMPLE_SEPARATOR.format(number=position) + prompts.CIC_QUERY[_kind(task)].format(
        query=example.query)]
    lines += [prompts.CIC_NEEDED_DOCUMENT.format(id=number, title=documents[number].title or prompts.CIC_NO_TITLE)
              for number in example.numbers]
    if task == "retrieval":
        answer = _answer_list([str(number) for number in example.numbers])
    else:
        answer = _answer_list(example.answers or (example.answer,))
    lines.append(prompts.CIC_FINAL_ANSWER.format(answer=answer))
    return "\n\n".join(lines)


def _kind(task: str) -> str:
    return "retrieval" if task == "retrieval" else "qa"


def corpus_prefix(documents: Sequence[Document], task: str, language: str, examples: Sequence[Example]) -> str:
    """Everything before the query: the instructions, the corpus and the examples, each followed by a
    blank line. (`language` is unused: LOFT's prompts are English.)"""
    kind = _kind(task)
    parts = [prompts.CIC_INSTRUCTION[kind], prompts.CIC_FORMATTING_INSTRUCTION[kind]]
    parts += [render_document(number, document) for number, document in enumerate(documents)]
    parts += [render_example(position, example, documents, task) for position, example in enumerate(examples, 1)]
    return "\n\n".join(parts) + "\n\n"


def query_suffix(query: str, task: str) -> str:
    """The part after the shared prefix: the test query."""
    return prompts.CIC_TEST_SEPARATOR + prompts.CIC_QUERY[_kind(task)].format(query=query) + "\n"
