"""`MemoRAG.memorize(on_progress=...)` (and `MemoryModel.memorize` below it) reports the memory's
tokens after each window, and reporting changes nothing memorized."""

from __future__ import annotations

import torch

from memorag.retrieval.chunking import Document
from tests.pipeline.conftest import make_rag, one_thread, tiny_model, topic  # noqa: F401 -- one_thread: autouse


def test_progress_counts_every_window_up_to_the_whole_and_changes_nothing():
    text = topic(0, 40)
    steps: list[tuple[int, int]] = []
    reported = tiny_model().memorize(text, on_progress=lambda done, total: steps.append((done, total)))
    silent = tiny_model().memorize(text)
    window = 16
    total = steps[-1][1]
    assert len(steps) == -(-total // window) > 2
    assert [done for done, _ in steps] == [min(total, window * (n + 1)) for n in range(len(steps))]
    assert {whole for _, whole in steps} == {total}
    assert reported.num_tokens == silent.num_tokens
    for mine, theirs in zip(reported.keys, silent.keys, strict=True):
        assert torch.equal(mine, theirs)

    rag = make_rag()
    first: list[int] = []
    rag.memorize([Document(id="a", text=topic(0, 30))], on_progress=lambda done, total: first.append(done))
    more: list[tuple[int, int]] = []
    rag.memorize([Document(id="b", text=topic(1, 30))], on_progress=lambda done, total: more.append((done, total)))
    assert first and more and more[-1][0] == more[-1][1]  # the extension reports its own new tokens
