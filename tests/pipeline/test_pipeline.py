"""The pipeline's plumbing on a tiny random memory model, a fake embedder and a fake generator."""

from __future__ import annotations

import json

import pytest
import torch

from memorag.pipeline import (
    Answer,
    DocumentConflictError,
    EmptyCorpusError,
    InputError,
    ManifestMismatchError,
    MemoRAG,
    Mode,
    PipelineError,
    SaveDirectoryError,
    SaveFormatError,
    UnknownModeError,
    UnsupportedTaskError,
    available_modes,
    register_mode,
)
from memorag.retrieval import Document

from .conftest import (
    ASK_SETTINGS,
    FakeEchoGenerator,
    FakeHashEmbedder,
    corpus_documents,
    make_rag,
    tiny_model,
    topic,
)


def test_memorize_keeps_document_ids_titles_and_offsets():
    rag = make_rag()
    documents = [Document(id="a", title="First", text=topic(0)), Document(id="b", title="Second", text=topic(1))]
    report = rag.memorize(documents)
    assert report.added == ["a", "b"] and report.skipped == []
    assert report.num_chunks == len(rag.chunks) > 2
    texts = {d.id: d.text for d in documents}
    for chunk in rag.chunks:
        assert chunk.text == texts[chunk.doc_id][chunk.start_char : chunk.end_char]
        assert chunk.title == {"a": "First", "b": "Second"}[chunk.doc_id]
        assert 0 < chunk.num_tokens <= 16
    assert [chunk.id for chunk in rag.chunks] == list(range(len(rag.chunks)))
    # the memory read both documents, titles included
    assert rag.memory.num_tokens == 1 + 60 + 1 + 60  # title, text, title, text (one token per word)


def test_ask_memorag_returns_clues_and_the_whole_union_in_document_order():
    generator = FakeEchoGenerator("an answer streamed in pieces")
    rag = make_rag(generator=generator)
    rag.memorize(corpus_documents())
    pieces, seen = [], {}
    answer = rag.ask(topic(2, 6), on_text=pieces.append, on_clues=lambda c: seen.setdefault("clues", c),
                     on_evidence=lambda e: seen.setdefault("evidence", e))
    assert isinstance(answer, Answer) and answer.task == "memorag" and answer.mode == "memorag"
    assert answer.answer == "an answer streamed in pieces" and "".join(pieces).strip() == answer.answer
    assert seen["clues"] == answer.clues and seen["evidence"] == answer.evidence
    assert set(answer.raw_clues) == {"spans", "questions", "draft"}
    assert len(answer.clues) <= 4
    evidence = answer.evidence
    # the reference rule: every list's hits (3 each), no budget; the draft offered to the generator
    assert evidence and len(evidence) <= 3 * (1 + len(answer.clues))
    assert all(len([f for f in item.found_by if f.query_index == 0]) <= 1 for item in evidence)
    assert answer.offered_draft == "" or f"The answer might be {answer.offered_draft.rstrip('.')}." in generator.prompts[-1]
    order = [(["alpha", "beta", "gamma"].index(item.doc_id), item.start_char) for item in evidence]
    assert order == sorted(order)
    assert any(0 in item.queries for item in evidence)  # the query always retrieves
    assert any(item.doc_id == "gamma" and 0 in item.queries for item in evidence)
    assert {"clues", "retrieve", "generate", "total"} <= set(answer.timings)
    prompt = generator.prompts[-1]
    for item in evidence:
        assert item.text in prompt
    assert topic(2, 6) in prompt
    json.dumps(answer.to_dict())  # serialisable for --json


def test_the_query_outweighs_each_clue_and_the_union_is_kept():
    rag = make_rag(hits_per_query=2)
    rag.memorize(corpus_documents())
    query, clue = topic(2, 8), topic(0, 8)
    fused, found_by = rag.retrieve([query, clue], weights=[2.0, 1.0])
    by_id = {chunk.id: chunk for chunk in rag.chunks}
    assert by_id[fused[0].chunk_id].doc_id == "gamma"  # the query's best hit ranks first
    assert {by_id[hit.chunk_id].doc_id for hit in fused} == {"alpha", "gamma"}  # the union of both
    assert len(fused) == 4 and all(len(found_by[hit.chunk_id]) == 1 for hit in fused)
    scores = [hit.score for hit in fused]
    assert scores == sorted(scores, reverse=True)


def test_evidence_fits_the_generators_window():
    roomy = make_rag(evidence_tokens=200, hits_per_query=8)
    roomy.memorize(corpus_documents())
    tight_generator = FakeEchoGenerator(context_window=120)
    tight = make_rag(generator=tight_generator, evidence_tokens=200, hits_per_query=8)
    tight.memorize(corpus_documents())
    query = topic(1, 6)
    wide = roomy.ask(query, mode="rag").evidence
    narrow = tight.ask(query, mode="rag").evidence
    assert len(narrow) < len(wide)
    used = tight_generator.count_tokens(tight_generator.prompts[-1]) + tight.config.answer_max_new_tokens
    assert used <= 120


def test_a_window_with_no_room_for_evidence_is_a_clear_error():
    rag = make_rag(generator=FakeEchoGenerator(context_window=30))
    rag.memorize(corpus_documents())
    with pytest.raises(PipelineError, match="leaves no room for evidence"):
        rag.ask(topic(1, 6), mode="rag")


def test_adding_a_document_embeds_only_its_chunks_and_extends_the_memory():
    embedder = FakeHashEmbedder()
    model = tiny_model()
    rag = make_rag(model=model, embedder=embedder)
    first, second, third = corpus_documents()
    rag.memorize([first, second])
    old_memory, old_chunks = rag.memory, list(rag.chunks)
    encoded_before = embedder.texts_encoded
    report = rag.memorize(third)
    new_chunks = rag.chunks[len(old_chunks) :]
    assert report.added == ["gamma"] and report.num_chunks == len(new_chunks)
    assert embedder.texts_encoded - encoded_before == len(new_chunks)  # nothing re-embedded
    assert [chunk.id for chunk in new_chunks] == list(range(len(old_chunks), len(rag.chunks)))
    assert rag.chunks[: len(old_chunks)] == old_chunks
    assert rag.memory.num_tokens == old_memory.num_tokens + 60 and old_memory.num_tokens == 120  # extended
    # the extended memory is the memory of all three read one after the other
    at_once = make_rag(model=model)
    at_once.memorize([first, second, third])
    assert at_once.memory.num_tokens == rag.memory.num_tokens
    for a, b in zip(at_once.memory.keys + at_once.memory.values, rag.memory.keys + rag.memory.values):
        torch.testing.assert_close(a, b)
    fused, _ = rag.retrieve([topic(2, 6)])
    assert rag.chunks[fused[0].chunk_id].doc_id == "gamma"


def test_memorizing_known_content_is_skipped_and_a_changed_document_is_refused():
    embedder = FakeHashEmbedder()
    rag = make_rag(embedder=embedder)
    rag.memorize(corpus_documents())
    memory, encoded = rag.memory, embedder.texts_encoded
    report = rag.memorize(corpus_documents())
    assert report.added == [] and report.skipped == ["alpha", "beta", "gamma"]
    assert rag.memory is memory and embedder.texts_encoded == encoded
    same_text_new_id = Document(id="alpha-copy", title="", text=topic(0))
    assert rag.memorize(same_text_new_id).skipped == ["alpha-copy"]
    with pytest.raises(DocumentConflictError, match="already memorized with another text"):
        rag.memorize(Document(id="alpha", title="", text=topic(0, 30)))
    assert rag.memory is memory and len(rag.documents) == 3


def test_save_and_load_round_trip(tmp_path):
    model = tiny_model()
    rag = make_rag(model=model)
    rag.memorize(corpus_documents())
    rag.save(tmp_path / "saved")
    manifest = json.loads((tmp_path / "saved" / "manifest.json").read_text())
    assert manifest["format"] == "memorag-pipeline" and manifest["format_version"] == 2
    assert manifest["models"]["memory_identity"]["memory_weights_sha256"] == model.memory_weights_hash()
    assert manifest["models"]["embedder"] == "fake-hash"
    assert manifest["content_sha256"] == rag.content_sha256 and manifest["settings"]["chunk_tokens"] == 16
    fresh_embedder = FakeHashEmbedder()
    loaded = MemoRAG.load(tmp_path / "saved", memory_model=model, embedder=fresh_embedder,
                          embedder_name="fake-hash", generator=FakeEchoGenerator(), **ASK_SETTINGS)
    assert MemoRAG.load(tmp_path / "saved", memory_model=model, embedder=fresh_embedder,
                        embedder_name="fake-hash").config.hits_per_query == 6  # ask settings are not saved
    assert fresh_embedder.texts_encoded == 0  # the index is read, not rebuilt
    assert loaded.chunks == rag.chunks and loaded.documents == rag.documents
    for a, b in zip(rag.memory.keys + rag.memory.values, loaded.memory.keys + loaded.memory.values):
        assert torch.equal(a, b)
    query = topic(1, 6)
    before, after = rag.ask(query), loaded.ask(query)
    assert before.clues == after.clues and before.evidence == after.evidence and before.answer == after.answer
    assert loaded.ask(query, task="qa").answer == rag.ask(query, task="qa").answer
    # memorizing the same content into the loaded pipeline does nothing
    assert loaded.memorize(corpus_documents()).added == []


def test_load_refuses_other_models_and_settings(tmp_path):
    rag = make_rag()
    rag.memorize(corpus_documents())
    rag.save(tmp_path / "saved")
    kwargs = {"embedder": FakeHashEmbedder(), "embedder_name": "fake-hash", "generator": FakeEchoGenerator()}
    with pytest.raises(ManifestMismatchError, match="memory_weights_sha256"):
        MemoRAG.load(tmp_path / "saved", memory_model=tiny_model(seed=7), **kwargs)
    with pytest.raises(ManifestMismatchError, match="memory_config"):
        MemoRAG.load(tmp_path / "saved", memory_model=tiny_model(ratios=[8]), **kwargs)
    with pytest.raises(ManifestMismatchError, match="chunk_tokens"):
        MemoRAG.load(tmp_path / "saved", memory_model=tiny_model(), chunk_tokens=32, **kwargs)
    with pytest.raises(ManifestMismatchError, match="retriever"):
        MemoRAG.load(tmp_path / "saved", memory_model=tiny_model(), retriever="bm25", **kwargs)
    with pytest.raises(ManifestMismatchError, match="embedder"):
        MemoRAG.load(tmp_path / "saved", memory_model=tiny_model(), embedder=FakeHashEmbedder(),
                     embedder_name="another-embedder")
    with pytest.raises(ManifestMismatchError, match="embedder"):
        MemoRAG.load(tmp_path / "saved", memory_model=tiny_model(), embedder_name=None)
    # settings that are free to change do change
    loaded = MemoRAG.load(tmp_path / "saved", memory_model=tiny_model(), hits_per_query=5, **kwargs)
    assert loaded.config.hits_per_query == 5


def test_damaged_or_foreign_saves_are_refused(tmp_path):
    rag = make_rag()
    rag.memorize(corpus_documents())
    rag.save(tmp_path / "saved")
    kwargs = {"memory_model": tiny_model(), "embedder": FakeHashEmbedder(), "embedder_name": "fake-hash"}
    with pytest.raises(SaveFormatError, match="not a saved memorag pipeline"):
        MemoRAG.load(tmp_path / "nothing", **kwargs)
    chunks = tmp_path / "saved" / "chunks.jsonl"
    chunks.write_text(chunks.read_text()[:-20])
    with pytest.raises(SaveFormatError, match="differs from the manifest's checksum"):
        MemoRAG.load(tmp_path / "saved", **kwargs)
    rag.save(tmp_path / "saved")
    manifest_path = tmp_path / "saved" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["format_version"] = 99
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(SaveFormatError, match="format version 99"):
        MemoRAG.load(tmp_path / "saved", **kwargs)


def test_save_refuses_a_folder_with_other_content_and_replaces_its_own(tmp_path):
    rag = make_rag()
    rag.memorize(corpus_documents()[:1])
    target = tmp_path / "busy"
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    with pytest.raises(SaveDirectoryError, match="holds other files"):
        rag.save(target)
    assert [p.name for p in target.iterdir()] == ["notes.txt"]
    (tmp_path / "file").write_text("x")
    with pytest.raises(SaveDirectoryError, match="not a folder"):
        rag.save(tmp_path / "file")
    rag.save(tmp_path / "saved")
    rag.memorize(corpus_documents()[1])
    rag.save(tmp_path / "saved")  # over its own earlier save
    assert len(json.loads((tmp_path / "saved" / "manifest.json").read_text())["documents"]) == 2
    left = sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock"))  # writers' lock files stay
    assert left == ["busy", "file", "saved"]  # no temporary folders
    with pytest.raises(EmptyCorpusError):
        make_rag().save(tmp_path / "empty")


def test_modes_tasks_and_bad_queries():
    rag = make_rag()
    with pytest.raises(EmptyCorpusError, match="nothing is memorized"):
        rag.ask("aa ab")
    rag.memorize(corpus_documents())
    with pytest.raises(InputError, match="query is empty"):
        rag.ask("   ")
    with pytest.raises(UnknownModeError, match="available modes: .*memorag.*rag"):
        rag.ask("ac ad", mode="longrag-not-registered")
    with pytest.raises(UnsupportedTaskError, match="its tasks: qa, summarize"):
        rag.ask("ac ad", task="memorag", mode="rag")
    assert {"memorag", "rag"} <= set(available_modes())


def test_a_new_mode_plugs_into_the_registry():
    @register_mode
    class LastChunkMode(Mode):
        name = "test-last-chunk"
        tasks = ("qa",)
        default_task = "qa"
        prepared: list[int] = []

        def prepare(self, context):
            self.prepared.append(len(context.corpus.chunks))

        def answer(self, context, query, task, hooks):
            last = context.corpus.chunks[-1]
            return Answer(query, task, self.name, last.text)

    try:
        rag = make_rag()
        rag.memorize(corpus_documents()[:2])
        assert rag.ask("ac ad", mode="test-last-chunk").answer == rag.chunks[-1].text
        rag.ask("ac ad", mode="test-last-chunk")
        rag.memorize(corpus_documents()[2])
        assert rag.ask("ac ad", mode="test-last-chunk").answer == rag.chunks[-1].text
        assert len(LastChunkMode.prepared) == 2  # prepared once per corpus version
    finally:
        from memorag.pipeline import _MODES

        _MODES.pop("test-last-chunk", None)


def test_rag_mode_builds_no_memory_and_memorag_builds_it_on_demand():
    rag = make_rag()
    rag.memorize(corpus_documents(), with_memory=False)
    assert rag.memory is None
    assert rag.ask(topic(0, 6), mode="rag").evidence
    assert rag.memory is None
    answer = rag.ask(topic(0, 6))
    assert rag.memory is not None and rag.memory.num_tokens == 180 and answer.evidence


def test_qa_and_summarize_tasks():
    rag = make_rag()
    rag.memorize(corpus_documents())
    pieces = []
    qa = rag.ask(topic(0, 4), task="qa", on_text=pieces.append)
    assert qa.evidence == [] and qa.clues == [] and qa.generator.endswith("(memory)")
    assert "".join(pieces).strip() == qa.answer
    summary = rag.ask("summarize " + topic(1, 3), task="summarize")
    assert set(summary.raw_clues) == {"key_points"} and summary.evidence
    clues, raw = rag.clues(topic(0, 4))
    assert set(raw) == {"spans", "questions", "draft"} and len(clues) <= 4


@pytest.mark.parametrize("kind", ["bm25", "hybrid"])
def test_sparse_and_hybrid_retrievers_save_and_load(tmp_path, kind):
    rag = make_rag(retriever=kind)
    rag.memorize(corpus_documents())
    fused, _ = rag.retrieve([topic(2, 6)])
    assert rag.chunks[fused[0].chunk_id].doc_id == "gamma"
    rag.save(tmp_path / kind)
    loaded = MemoRAG.load(tmp_path / kind, memory_model=tiny_model(), embedder=FakeHashEmbedder(),
                          embedder_name="fake-hash", generator=FakeEchoGenerator(), **ASK_SETTINGS)
    assert loaded.retrieve([topic(2, 6)])[0] == fused


def test_overlapping_evidence_is_merged_into_one_passage():
    rag = make_rag()
    rag.memorize(corpus_documents()[:1])
    fused, found = rag.retrieve([topic(0, 60)], k=len(rag.chunks))
    from memorag.pipeline import Evidence

    chunks = rag.chunks[:3]  # consecutive chunks sharing 4 tokens
    evidence = [Evidence(c.id, c.doc_id, c.title, c.start_char, c.end_char, c.num_tokens, 1.0, [0], c.text)
                for c in chunks]
    passages = rag.context().evidence.render_passages(evidence)
    assert passages.count("[1]") == 1 and "[2]" not in passages
    assert rag.documents[0].text[chunks[0].start_char : chunks[2].end_char] in passages


def test_the_default_generator_shares_the_memory_models_weights():
    model = tiny_model()
    rag = MemoRAG(memory_model=model, embedder=FakeHashEmbedder(), embedder_name="fake-hash", chunk_tokens=16,
                  overlap_tokens=4, answer_max_new_tokens=6, clue_max_new_tokens=6, evidence_tokens=48)
    rag.memorize(corpus_documents())
    parameters = {p.data_ptr() for p in model.parameters()}
    generator = rag.generator
    assert generator.model is model.base_model and generator.shared
    assert {p.data_ptr() for p in generator.model.parameters()} <= parameters  # no second copy
    pieces = []
    answer = rag.ask(topic(0, 4), mode="rag", on_text=pieces.append)
    assert "".join(pieces).strip() == answer.answer
    assert rag.ask(topic(0, 4), mode="rag").answer == answer.answer  # greedy: deterministic


def test_plain_texts_are_documents_and_empty_ones_are_refused():
    rag = make_rag()
    report = rag.memorize([topic(0), topic(1)])
    assert len(report.added) == 2 and all(doc_id.startswith("doc-") for doc_id in report.added)
    with pytest.raises(InputError, match="empty"):
        rag.memorize("   \n ")
    with pytest.raises(InputError, match="empty"):
        rag.memorize([])


def _clues_eager_and_compiled(monkeypatch, setting: str, factory: str, stand_in) -> tuple:
    """The clues of one question with the eager memory model and with `setting="default"`, whose compiler
    `memorag.memory.core.<factory>` is replaced by `stand_in(original)` (dynamo's eager backends stand in
    for inductor, so the clues must be equal); the compiled pipeline and the graphs dynamo captured."""
    import torch._dynamo
    from torch._dynamo.utils import counters

    from memorag.memory import core as memory_model_module

    monkeypatch.setattr(memory_model_module, factory, stand_in(getattr(memory_model_module, factory)))
    torch._dynamo.reset()
    counters.clear()
    eager = make_rag()
    eager.memorize(corpus_documents())
    expected = eager.ask(topic(2, 6)).raw_clues
    compiled = make_rag(**{setting: "default"})
    compiled.memorize(corpus_documents())
    clues = compiled.ask(topic(2, 6)).raw_clues
    graphs = counters["stats"]["unique_graphs"]
    torch._dynamo.reset()
    return expected, clues, compiled, eager, graphs


@pytest.mark.slow
def test_compile_decoding_writes_the_same_clues_through_the_compiled_step(monkeypatch):
    """`compile_decoding` switches the memory model to the compiled decoding step (memory/compiled.py)."""
    expected, clues, compiled, eager, graphs = _clues_eager_and_compiled(
        monkeypatch, "compile_decoding", "CompiledDecoding",
        lambda original: lambda run, mode, backend: original(run, mode, backend="eager"))
    assert compiled.memory_model.decoding_compiled and not eager.memory_model.decoding_compiled
    assert clues == expected
    assert graphs >= 1  # the clues were decoded through the compiled step


@pytest.mark.slow
def test_compile_windows_memorizes_through_compiled_layers_and_writes_the_same_clues(monkeypatch):
    """`compile_windows` runs the memory model's window steps through compiled layers
    (memory/compiled.py)."""
    expected, clues, compiled, eager, graphs = _clues_eager_and_compiled(
        monkeypatch, "compile_windows", "CompiledLayers",
        lambda original: lambda layers, mode, backend, dynamic: original(layers, mode, "eager", dynamic))
    assert compiled.memory_model.windows_compiled and not eager.memory_model.windows_compiled
    assert clues == expected
    assert graphs >= 1  # the context was memorized through the compiled layers
