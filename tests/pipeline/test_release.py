"""A dropped pipeline frees its memory, index and chunks at once (no reference cycle waits for
Python's cyclic collector), whichever mode it answered in."""

from __future__ import annotations

import gc
import weakref

import pytest

from memorag.pipeline import available_modes
from memorag.runtime.memtrim import can_trim, release_memory
from tests.pipeline.conftest import FakeEchoGenerator, corpus_documents, make_rag, topic


@pytest.fixture
def no_cyclic_collector():
    enabled = gc.isenabled()
    gc.disable()
    yield
    if enabled:
        gc.enable()


@pytest.mark.parametrize("mode", available_modes())
def test_a_dropped_pipeline_is_freed_at_once(mode, no_cyclic_collector):
    rag = make_rag(generator=FakeEchoGenerator(context_window=512))
    rag.memorize(corpus_documents())
    rag.ask(topic(1, 6), mode=mode)
    memory, retriever, chunk = weakref.ref(rag.memory), weakref.ref(rag.retriever), weakref.ref(rag.chunks[0])
    del rag
    assert memory() is None and retriever() is None and chunk() is None


@pytest.mark.parametrize("mode", available_modes())
def test_a_mode_keeps_nothing_of_its_pipeline(mode, no_cyclic_collector):
    """A mode is handed a context per question and keeps only what it builds: it outlives its
    pipeline without keeping the pipeline's memory or index alive."""
    rag = make_rag(generator=FakeEchoGenerator(context_window=512))
    rag.memorize(corpus_documents())
    rag.ask(topic(1, 6), mode=mode)
    kept = rag.mode(mode)
    memory, retriever, pipeline = weakref.ref(rag.memory), weakref.ref(rag.retriever), weakref.ref(rag)
    del rag
    assert pipeline() is None and memory() is None and retriever() is None
    assert kept.name == mode


def test_release_memory_trims_where_glibc_can():
    import platform

    assert release_memory() is can_trim()
    if platform.system() == "Linux" and platform.libc_ver()[0] == "glibc":
        assert can_trim()
