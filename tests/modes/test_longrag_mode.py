"""The `longrag` mode on hand-made corpora: grouping inside the mode, MaxP ranking, what fits the
window, the two-turn reader, settings from the command line (fake embedder and generators)."""

from __future__ import annotations

import math

import pytest

from memorag.commands.main import _overrides, build_parser
from memorag.config import ConfigError, load_config
from memorag.modes.longrag import LongRAGSettings, short_answer
from memorag.pipeline import MemoRAG, PipelineConfig
from memorag.pipeline.types import NO_CHUNK
from memorag.prompting import prompts
from memorag.retrieval import Document
from tests.pipeline.conftest import FakeEchoGenerator, FakeHashEmbedder, make_rag, tiny_model

from .conftest import WICK_QUESTION, WICK_SENTENCE, FakeScriptedGenerator, village_documents


def longrag(generator=None, documents=None, **settings) -> MemoRAG:
    rag = make_rag(generator=generator or FakeEchoGenerator(), **settings)
    rag.memorize(documents or village_documents(), with_memory=False)
    return rag


def filler(name: str, count: int) -> str:
    """`count` distinct words that share nothing with the other test documents."""
    return " ".join(f"{name}{i}" for i in range(count))


def test_grouping_keeps_every_document_within_the_cap_and_follows_links():
    huge = Document("huge", filler("huge", 150), "Huge", ["Bridge"])
    rag = longrag(documents=[*village_documents(), huge], longrag={"max_tokens": 60})
    rag.ask(WICK_QUESTION, mode="longrag")
    units = rag.mode("longrag").units
    placed = [doc_id for unit in units for doc_id in unit.doc_ids]
    assert sorted(placed) == sorted(d.id for d in rag.documents)  # each document exactly once
    for unit in units:
        assert unit.num_tokens <= 60 or len(unit.doc_ids) == 1
    groups = {unit.doc_ids for unit in units}
    assert {("lighthouse", "harbour"), ("orchard", "mill"), ("huge",), ("bridge",)} == groups  # huge alone: too big


def test_without_links_documents_are_related_by_shared_rare_terms_unless_told_not_to():
    documents = [Document(d.id, d.text, d.title) for d in village_documents()]  # links removed
    documents += [Document("wick", "A wick of twisted cotton feeds the lamp of the lighthouse with oil.", "Wick")]
    inferred = longrag(documents=documents, longrag={"max_tokens": 200})
    inferred.ask(WICK_QUESTION, mode="longrag")
    assert any({"lighthouse", "wick"} <= set(unit.doc_ids) for unit in inferred.mode("longrag").units)
    alone = longrag(documents=documents, longrag={"max_tokens": 200, "links": "given"})
    alone.ask(WICK_QUESTION, mode="longrag")
    assert all(len(unit.doc_ids) == 1 for unit in alone.mode("longrag").units)


def test_the_best_unit_is_read_whole_and_named_in_the_evidence():
    generator = FakeEchoGenerator()
    rag = longrag(generator, longrag={"max_tokens": 100, "units": 1})
    answer = rag.ask(WICK_QUESTION, mode="longrag")
    assert answer.mode == "longrag" and answer.task == "qa"
    texts = {d.id: d.text for d in rag.documents}
    assert [item.doc_id for item in answer.evidence] == ["lighthouse", "harbour"]  # the unit, in corpus order
    for item in answer.evidence:
        assert item.chunk_id == NO_CHUNK
        assert (item.start_char, item.end_char, item.text) == (0, len(texts[item.doc_id]), texts[item.doc_id])
    assert WICK_SENTENCE in generator.prompts[0] and texts["harbour"] in generator.prompts[0]
    assert texts["bridge"] not in generator.prompts[0]


def test_units_are_scored_by_their_best_chunk():
    rag = longrag(longrag={"max_tokens": 100, "chunk_tokens": 8})
    rag.ask(WICK_QUESTION, mode="longrag")
    index = rag.mode("longrag").index
    assert max(len([c for c in index.chunks if c.doc_id == u.id]) for u in index.units) > 2  # units span chunks
    ranked, hits = index.rank(WICK_QUESTION)
    best_chunk = index.chunk_by_id[hits[0].chunk_id]
    assert ranked[0] == (best_chunk.doc_id, hits[0].score)
    for unit_id, score in ranked:
        assert score == max(hit.score for hit in hits if index.unit_of_chunk[hit.chunk_id] == unit_id)


def test_units_beyond_the_window_are_not_sent():
    documents = [Document(f"d{i}", f"{filler(f'w{i}x', 30)} lamp", f"T{i}") for i in range(6)]
    documents[2] = Document("d2", f"{filler('w2x', 26)} lighthouse wick lamp replaced", "T2")
    settings = {"documents": documents, "longrag": {"links": "given", "units": 4, "long_answer_tokens": 20}}
    unlimited = longrag(**settings)
    assert len(unlimited.ask(WICK_QUESTION, mode="longrag").evidence) == 4  # the unit count caps

    probe = FakeEchoGenerator()
    system = prompts.fill(prompts.GENERATOR_SYSTEM)
    overhead = probe.count_tokens(prompts.fill(prompts.LONGRAG_LONG_ANSWER, passages="", question=WICK_QUESTION), system)
    unit_tokens = unlimited.mode("longrag").units[0].num_tokens
    window = overhead + 20 + math.ceil(2.5 * unit_tokens / 0.9)  # room for two units and a half
    generator = FakeEchoGenerator(context_window=window)
    rag = longrag(generator, **settings)
    answer = rag.ask(WICK_QUESTION, mode="longrag")
    ranked, _ = rag.mode("longrag").index.rank(WICK_QUESTION)
    best_two = [rag.mode("longrag").index.unit_by_id[unit_id].doc_ids[0] for unit_id, _ in ranked[:2]]
    assert [item.doc_id for item in answer.evidence] == best_two and best_two[0] == "d2"
    assert generator.count_tokens(generator.prompts[0], system) <= window - 20


def test_a_unit_longer_than_the_window_is_cut_to_its_best_chunks():
    text = f"{filler('before', 120)} Mara Quill replaced the lighthouse wick. {filler('after', 120)}"
    documents = [Document("book", text, "Book"), Document("note", "A note about apples and pears.", "Note")]
    generator = FakeEchoGenerator(context_window=200)
    rag = longrag(generator, documents=documents, longrag={"chunk_tokens": 12, "long_answer_tokens": 20})
    answer = rag.ask(WICK_QUESTION, mode="longrag")
    assert answer.evidence and {item.doc_id for item in answer.evidence} == {"book"}
    for item in answer.evidence:
        assert text[item.start_char : item.end_char] == item.text
    assert any("wick" in item.text for item in answer.evidence)
    assert sum(item.num_tokens for item in answer.evidence) < 200
    system = prompts.fill(prompts.GENERATOR_SYSTEM)
    assert generator.count_tokens(generator.prompts[0], system) <= 200 - 20


def test_a_window_too_small_for_the_prompt_is_refused_clearly():
    rag = longrag(FakeEchoGenerator(context_window=40))
    with pytest.raises(Exception, match="leaves no room for evidence"):  # refused before any work
        rag.ask(WICK_QUESTION, mode="longrag")


def test_the_reader_answers_in_two_turns_with_few_shot_examples():
    long_reply = "The first document says that Mara Quill climbed the tower and replaced the burnt wick."
    generator = FakeScriptedGenerator([long_reply, "Short answer: Mara Quill\nShe climbed the tower."])
    rag = longrag(generator, longrag={"max_tokens": 100, "units": 1})
    pieces: list[str] = []
    answer = rag.ask(WICK_QUESTION, mode="longrag", on_text=pieces.append)
    assert len(generator.prompts) == 2
    first, second = generator.prompts
    assert WICK_SENTENCE in first and prompts.fill(prompts.LONGRAG_EXAMPLES) not in first
    assert prompts.fill(prompts.LONGRAG_EXAMPLES) in second and second.count("Short answer:") >= 3
    assert long_reply in second and WICK_QUESTION in second
    assert WICK_SENTENCE not in second  # the units are not sent again
    assert answer.answer == "Mara Quill"
    assert answer.extras == {"long_answer": long_reply}
    assert "".join(pieces).strip().startswith("Short answer: Mara Quill")  # turn 2 is streamed


def test_short_answer_parser():
    assert short_answer("Mara Quill") == "Mara Quill"
    assert short_answer("\n  short answer:  three \nbecause ...") == "three"
    assert short_answer("Short answer:\nyes") == "yes"
    assert short_answer("简短答案：林小禾", "zh") == "林小禾"
    assert short_answer("   \n") == ""


def test_settings_from_the_command_line_and_their_validation(tmp_path):
    args = build_parser().parse_args(["ask", "--context", "book.txt", WICK_QUESTION, "--mode", "longrag",
                                      "--set", "longrag.units=1", "--set", "longrag.max_tokens=100"])
    overrides = _overrides(args)
    assert overrides == {"mode": "longrag", "longrag": LongRAGSettings(units=1, max_tokens=100)}
    generator = FakeScriptedGenerator(["a long answer", "Mara Quill"])
    rag = longrag(generator, **overrides)
    answer = rag.ask(WICK_QUESTION)  # the mode from the settings
    assert answer.mode == "longrag" and answer.answer == "Mara Quill"
    assert {item.doc_id for item in answer.evidence} == {"lighthouse", "harbour"}
    for bad in ("longrag.units=0", "longrag.chunk_tokens=4", "longrag.links=always"):
        with pytest.raises(ConfigError, match=bad.split("=")[0].replace(".", r"\.")):
            load_config(PipelineConfig, None, [bad])


def test_links_survive_a_save_and_group_the_loaded_corpus(tmp_path):
    model = tiny_model()
    rag = make_rag(model=model, longrag={"max_tokens": 100})
    rag.memorize(village_documents(), with_memory=False)
    rag.save(tmp_path / "saved")
    loaded = MemoRAG.load(tmp_path / "saved", memory_model=model, embedder=FakeHashEmbedder(),
                          embedder_name="fake-hash", generator=FakeEchoGenerator(), longrag={"max_tokens": 100})
    assert [d.links for d in loaded.documents] == [d.links for d in village_documents()]
    loaded.ask(WICK_QUESTION, mode="longrag")
    assert ("lighthouse", "harbour") in {unit.doc_ids for unit in loaded.mode("longrag").units}
