"""Fakes and small data for the evaluation harness tests: the pipeline's tiny memory model and
fake embedder, a fake generator that reads a number out of its prompt, and hand-made examples."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from memorag.config import config_from_dict
from memorag.evaluation import EvalConfig, Models
from memorag.evaluation.datasets.schema import CorpusTask, EvalExample, save_corpus_task, write_examples
from memorag.generation import Generator
from memorag.retrieval.chunking import Document
from tests.pipeline.conftest import TEST_SETTINGS, FakeHashEmbedder, one_thread, tiny_model  # noqa: F401 - one_thread: autouse

FILLER = "The grass is green and the sky is blue over the quiet town today ."
_NUMBER = re.compile(r"\b\d{7}\b")


class FakeNumberGenerator(Generator):
    """Stands in for a generator: answers with the first 7-digit number in its prompt (or says it
    found none), and records every (prompt, system) it was given."""

    name = "fake-number"

    def __init__(self, context_window: int | None = None):
        self.context_window = context_window
        self.calls: list[tuple[str, str | None]] = []

    def generate(self, prompt, *, system=None, max_new_tokens=256, on_text=None) -> str:
        self.calls.append((prompt, system))
        match = _NUMBER.search(prompt)
        reply = match.group() if match else "no number found"
        if on_text is not None:
            on_text(reply)
        return reply

    def count_tokens(self, prompt, system=None) -> int:
        return len(prompt.split()) + (len(system.split()) if system else 0)


def needle_context(key: str, number: str, before: int, after: int) -> tuple[str, int, int]:
    """Filler sentences, the needle, more filler; returns the text and the needle's offsets."""
    head = " ".join([FILLER] * before) + " "
    needle = f"The {key} code is {number} ."
    return head + needle + " " + " ".join([FILLER] * after), len(head), len(head) + len(needle)


def needle_examples() -> list[EvalExample]:
    """Two questions, each with its own context holding one needle (gold evidence by offsets)."""
    examples = []
    for index, (key, number) in enumerate((("river", "4817263"), ("castle", "9052718"))):
        context, start, end = needle_context(key, number, 3 + index, 4)
        examples.append(EvalExample(
            id=f"needle-{index}", task="handmade_needles", question=f"What is the {key} code ?", answers=[number],
            context=context, metric="string_match_all", proxy=True,
            gold_evidence=[{"kind": "needle", "text": context[start:end], "start": start, "end": end}],
        ))
    return examples


def corpus_task() -> CorpusTask:
    """Three documents and two questions, the gold documents named by id."""
    documents = [Document(id=f"doc-{key}", title=key.title(), text=needle_context(key, number, 1, 1)[0])
                 for key, number in (("harbor", "3141592"), ("meadow", "2718281"), ("lantern", "1618033"))]
    examples = [EvalExample(id=f"q-{key}", task="handmade_corpus", question=f"What is the {key} code ?",
                            answers=[number], metric="string_match_all", proxy=True,
                            gold_evidence=[{"kind": "document", "doc_id": f"doc-{key}"}])
                for key, number in (("harbor", "3141592"), ("lantern", "1618033"))]
    return CorpusTask("handmade_corpus", documents, examples)


@pytest.fixture
def data_files(tmp_path) -> tuple[Path, Path]:
    """The needle examples as JSON lines, and the corpus task as a folder."""
    return (write_examples(tmp_path / "needles.jsonl", needle_examples()),
            save_corpus_task(corpus_task(), tmp_path / "corpus"))


def fake_models() -> Models:
    return Models(tiny_model(), FakeHashEmbedder(), "fake-hash", FakeNumberGenerator())


def make_config(out_dir: Path, data_files: tuple[Path, Path], **overrides) -> EvalConfig:
    """A tiny run: the two hand-made tasks and a generated needle task at 120 tokens, three modes."""
    needles, corpus = data_files
    settings = {
        "out_dir": str(out_dir), "modes": ["rag", "memorag", "memorag:qa"], "num_examples": 2, "lengths": [120],
        "recall_k": [1, 2], "progress": False, "pipeline": dict(TEST_SETTINGS),
        "tasks": [
            {"name": "needles", "source": "examples", "path": str(needles)},
            {"name": "niah_single", "source": "synthetic", "options": {"filler": "noise"}},
            {"name": "corpus", "source": "corpus_dir", "path": str(corpus)},
        ],
        **overrides,
    }
    return config_from_dict(EvalConfig, settings)
