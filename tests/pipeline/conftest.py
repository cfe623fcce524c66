"""Fakes for pipeline tests: a tiny random memory model over a fake word tokenizer, a fake
hashed embedder, and a fake generator that echoes what it was given (all in-process)."""

from __future__ import annotations

import pytest

from memorag.generation import Generator
from memorag.memory import MemoryConfig, MemoryModel
from memorag.pipeline import MemoRAG
from memorag.retrieval import Document
from tests.memory.conftest import perturb_memory_parameters, tiny_base
from tests.memory.test_persistence import tiny_tokenizer, word
from tests.retrieval.conftest import FakeHashEmbedder

__all__ = ["ASK_SETTINGS", "FakeEchoGenerator", "FakeHashEmbedder", "corpus_documents", "make_rag", "tiny_model", "topic", "words"]


def tiny_model(seed: int = 0, **config) -> MemoryModel:
    """A 2-layer random llama with memory (window 16, ratio 4) and the fake letter-pair tokenizer."""
    settings = {"window": 16, "ratios": [4], **config}
    model = MemoryModel(tiny_base("llama", seed), MemoryConfig(**settings), tokenizer=tiny_tokenizer())
    perturb_memory_parameters(model, seed)
    return model.eval()


def words(start: int, count: int, step: int = 1) -> str:
    """Words of the fake tokenizer's vocabulary ("ac", "ad", ...), cycling through ids 2..95."""
    return " ".join(word(2 + (start + i * step) % 94) for i in range(count))


def topic(number: int, count: int = 60) -> str:
    """Text over the 30-word vocabulary of topic `number` (0, 1 or 2): topics share no word."""
    return " ".join(word(2 + 30 * number + (i * 7) % 30) for i in range(count))


def corpus_documents() -> list[Document]:
    """Three documents on disjoint vocabularies, so a query's words pick its document."""
    return [Document(id=name, title="", text=topic(number)) for number, name in enumerate(("alpha", "beta", "gamma"))]


class FakeEchoGenerator(Generator):
    """Stands in for a generator: records prompts, answers with a fixed text, streams it in pieces."""

    name = "fake-echo"

    def __init__(self, reply: str = "the fake answer", context_window: int | None = None):
        self.reply = reply
        self.context_window = context_window
        self.prompts: list[str] = []

    def generate(self, prompt, *, system=None, max_new_tokens=256, on_text=None) -> str:
        self.prompts.append(prompt)
        if on_text is not None:
            for piece in self.reply.split(" "):
                on_text(piece + " ")
        return self.reply

    def count_tokens(self, prompt, system=None) -> int:
        return len(prompt.split()) + (len(system.split()) if system else 0)


# Small settings for tiny models; the ask-time ones are not saved, so `load_rag` gives them again.
TEST_SETTINGS = {"chunk_tokens": 16, "overlap_tokens": 4, "clue_max_new_tokens": 12, "max_clues": 4,
                 "hits_per_query": 3, "evidence_tokens": 48, "answer_max_new_tokens": 8}
ASK_SETTINGS = {key: value for key, value in TEST_SETTINGS.items() if key not in ("chunk_tokens", "overlap_tokens")}


def make_rag(model: MemoryModel | None = None, embedder: FakeHashEmbedder | None = None,
             generator: Generator | None = None, **overrides) -> MemoRAG:
    settings = {**TEST_SETTINGS, **overrides}
    return MemoRAG(
        memory_model=model or tiny_model(),
        embedder=embedder or FakeHashEmbedder(),
        embedder_name="fake-hash",
        generator=generator or FakeEchoGenerator(),
        **settings,
    )


@pytest.fixture
def rag() -> MemoRAG:
    return make_rag()


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny models run fastest on one thread; two threads on a busy shared machine can be 100x slower."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
