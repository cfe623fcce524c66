"""The cic mode: LOFT's corpus-in-context prompt (golden), its answer parser, the window policy,
and the prefix shared by every query (cached by a local generator)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

import memorag.pipeline  # noqa: F401 - first: importing memorag.modes before it is an import cycle
from memorag.generation import LocalGenerator
from memorag.modes import cic_prompt
from memorag.modes.cic_answer import parse_reply
from memorag.pipeline import FewShotExample, PipelineError
from memorag.retrieval import Document
from tests.memory.conftest import tiny_base
from tests.memory.test_persistence import tiny_tokenizer
from tests.pipeline.conftest import FakeEchoGenerator, make_rag

GOLDEN = Path(__file__).parent / "golden"

DOCUMENTS = [
    Document("orchard", "The old orchard on the hill grows twelve kinds of apple. Every autumn the school children "
             "pick the fruit and press it into cider.", title="Hill Orchard"),
    Document("ferry", "The river ferry runs every half hour between the two market towns. Its captain, Ilse Varga, "
             "has steered it for thirty years.", title="River Ferry"),
    Document("observatory", "A small observatory was built on the roof of the library in 1911. Its brass telescope "
             "still shows the rings of Saturn on clear nights.", title="Library Observatory"),
    Document("bakery", "The bakery on Mill Street opens at five in the morning. Its rye bread is baked in a wood oven "
             "that is older than the town hall.", title="Mill Street Bakery"),
]
QUERY = "When was the observatory on the library roof built?"
REPLY = "Documents needed:\nID: 2 | TITLE: Library Observatory\nFinal Answer: [2]"


def cic_rag(reply: str = REPLY, window: int | None = None, **settings):
    generator = FakeEchoGenerator(reply, context_window=window)
    rag = make_rag(generator=generator, mode="cic", **settings)
    rag.memorize(DOCUMENTS, with_memory=False)
    return rag, generator


@pytest.mark.parametrize("task", ["retrieval", "qa"])
def test_the_prompt_matches_the_golden_file(task):
    rag, generator = cic_rag()
    rag.ask(QUERY, task=task)
    name = "cic_prompt.txt" if task == "retrieval" else "cic_prompt_qa.txt"
    assert generator.prompts[-1] == (GOLDEN / name).read_text(encoding="utf-8")


def test_retrieval_names_the_documents_and_gives_the_whole_corpus_as_evidence():
    rag, _ = cic_rag()
    answer = rag.ask(QUERY)
    assert answer.task == "retrieval" and answer.mode == "cic"
    assert answer.extras["predicted_ids"] == ["observatory"] and answer.answer == "observatory"
    assert answer.extras["raw_reply"] == REPLY and answer.warnings == []
    record = json.loads(json.dumps(answer.to_dict()))  # what the CLI's --json and the server send
    assert record["extras"] == {"predicted_ids": ["observatory"], "raw_reply": REPLY}
    assert [item.doc_id for item in answer.evidence] == [document.id for document in DOCUMENTS]
    for item, document in zip(answer.evidence, DOCUMENTS, strict=True):
        assert (item.chunk_id, item.start_char, item.end_char, item.text) == (-1, 0, len(document.text), document.text)
        assert item.num_tokens > len(document.text.split())  # the tagged line, in the generator's tokens


def test_qa_answers_with_the_final_answer_and_names_the_cited_documents():
    rag, _ = cic_rag("Documents needed:\nID: 2 | TITLE: Library Observatory\nFinal Answer: in 1911")
    answer = rag.ask(QUERY, task="qa")
    assert answer.answer == "in 1911" and answer.extras["predicted_ids"] == ["observatory"]


def test_every_query_shares_the_same_prefix():
    rag, generator = cic_rag()
    rag.ask(QUERY)
    rag.ask("Who bakes the rye bread?")
    prefix = rag.mode("cic").prefix(rag.context("cic"), len(DOCUMENTS), "retrieval", "en")
    assert prefix.endswith("Final Answer: ['1', '0']\n\n")  # the last example's
    assert generator.prompts == [prefix + cic_prompt.query_suffix(QUERY, "retrieval"),
                                 prefix + cic_prompt.query_suffix("Who bakes the rye bread?", "retrieval")]
    assert generator.prompts[0].endswith("====== Now let's start! ======\nWhich documents can help answer the query? "
                                         "Print out the TITLE and ID of each document. Then format the IDs into a "
                                         "list.\nIf there is no perfect answer output the closest one. Do not give "
                                         f"an empty final answer.\nquery: {QUERY}\nThe following documents can "
                                         "help answer the query:\n")


def test_examples_are_grounded_in_the_corpus_and_seeded():
    examples = cic_prompt.build_examples(DOCUMENTS, 3, seed=5, language="en")
    assert len(examples) == 3 and [len(example.numbers) for example in examples] == [1, 1, 2]
    assert len({number for example in examples for number in example.numbers}) == 4  # distinct documents
    for example in examples:
        texts = " ".join(DOCUMENTS[number].text for number in example.numbers)
        leads = [part.split('"')[0] for part in example.query.split('follow "')[1:]]
        assert all(lead and lead in texts for lead in leads)
        assert all(part in texts for part in example.answer.split("; "))
    assert cic_prompt.build_examples(DOCUMENTS, 3, seed=5, language="en") == examples
    assert cic_prompt.build_examples(DOCUMENTS, 3, seed=6, language="en") != examples
    assert cic_prompt.build_examples(DOCUMENTS, 0, seed=5, language="en") == []
    # too few usable documents for a two-document example: one document each
    short = [Document("x", "Too short."), *DOCUMENTS[:2]]
    assert [example.numbers for example in cic_prompt.build_examples(short, 2, 0, "en")] in ([(1,), (2,)], [(2,), (1,)])


def test_no_examples_leaves_out_their_header():
    rag, generator = cic_rag(cic={"examples": 0})
    rag.ask(QUERY)
    assert "====== Example" not in generator.prompts[-1]
    assert "Final Answer: [" in generator.prompts[-1]  # the instruction still shows the format


def test_labelled_examples_as_loft_builds_them():
    """A task's own labelled questions become the examples, their gold documents join the corpus
    (at seeded places), and nothing is generated."""
    extra = Document("lighthouse", "Mara Quill relit the lighthouse lamp in the storm.", title="Lighthouse")
    few_shot = [FewShotExample("Who relit the lighthouse lamp?", (extra,), ("Mara Quill",)),
                FewShotExample("Who steers the river ferry?", (DOCUMENTS[1],), ("Ilse Varga",))]
    rag, generator = cic_rag(cic={"examples": 2})
    rag.few_shot = few_shot
    answer = rag.ask(QUERY, task="qa")
    prompt = generator.prompts[-1]
    ids = [item.doc_id for item in answer.evidence]
    assert sorted(ids) == sorted([document.id for document in DOCUMENTS] + ["lighthouse"])
    number = {doc_id: position for position, doc_id in enumerate(ids)}
    assert (f"====== Example 1 ======\nBased on the documents above, can you answer the following query? Print out "
            "the TITLE and ID of the documents you use to answer. Then format the answers into a list.\nquery: Who "
            f"relit the lighthouse lamp?\n\nTITLE: Lighthouse | ID: {number['lighthouse']}\n\n"
            "Final Answer: ['Mara Quill']\n\n====== Example 2 ======") in prompt
    assert f"TITLE: River Ferry | ID: {number['ferry']}\n\nFinal Answer: ['Ilse Varga']" in prompt
    assert "What words follow" not in prompt  # no generated example
    assert prompt.count("| END ID:") == 5


def test_labelled_retrieval_examples_answer_with_their_document_ids():
    rag, generator = cic_rag(cic={"examples": 1})
    rag.few_shot = [FewShotExample("Where is the bakery?", (DOCUMENTS[3],), ("Mill Street",))]
    rag.ask(QUERY)
    assert "TITLE: Mill Street Bakery | ID: 3\n\nFinal Answer: ['3']\n\n====== Now let's start!" in generator.prompts[-1]


@pytest.mark.parametrize(
    ("reply", "numbers", "note"),
    [
        ("Final Answer: [2]", [2], None),
        ("ID: 1 | TITLE: x\nFinal Answer: [1, 3]", [1, 3], None),
        ("Final Answer: 1, 3", [1, 3], None),  # no brackets
        ("Final Answer: ['1', \"3\"]", [1, 3], None),  # quoted
        ("**Final Answer:** [3]", [3], None),  # markdown
        ("final answer： [0]", [0], None),  # any case, full-width colon
        ("最终答案：[2]", [2], None),
        ("Final Answer: [1 3]", [1, 3], None),  # spaces only
        ("Final Answer: [ID: 2, ID 0]", [2, 0], None),
        ("Final Answer: [TITLE: Library Observatory | ID: 2]", [2], None),
        ("Final Answer: [2] because the observatory document says so, and [3]", [2], None),  # text after ]
        ("Final Answer: [2, 2, 1]", [2, 1], None),  # repeats count once
        ("Final Answer:\n[1]", [1], None),  # the answer on the next line
        ("Final Answer: [1,\n3]", [1, 3], None),  # a list over two lines
        ("Final Answer: [1, 3", [1, 3], None),  # no closing bracket
        ("Final Answer: []", [], None),  # nothing relevant: a valid answer
        ("Final Answer: [2]\nQuery: another\nFinal Answer: [0]", [2], "2 'Final Answer:' lines; the first"),
        ("Final Answer: [2, 9, -1]", [2], "not documents of the prompt (0..3): [9]"),
        ("Final Answer: [2, observatory]", [2], "not document IDs: ['observatory']"),
        ("ID: 2 | TITLE: Library Observatory", [], "no 'Final Answer:' line; no document IDs"),
        ("", [], "no 'Final Answer:' line"),
    ],
)
def test_the_retrieval_parser_reads_malformed_replies(reply, numbers, note):
    parsed = parse_reply(reply, "retrieval", num_documents=4)
    assert parsed.numbers == numbers
    if note is None:
        assert parsed.notes == []
    else:
        assert any(note in text for text in parsed.notes), parsed.notes


@pytest.mark.parametrize(
    ("reply", "answer", "numbers", "note"),
    [
        ("Documents needed:\nID: 2 | TITLE: x\nFinal Answer: in 1911", "in 1911", [2], None),
        ("ID: 1\nID: 0\nFinal Answer: \"Ilse Varga\"", "Ilse Varga", [1, 0], None),
        ("Final Answer: ['Ilse Varga']", "Ilse Varga", [], None),
        ("Final Answer: ['cider', \"apples\"]", "cider; apples", [], None),
        ("Final Answer: [five in the morning]", "five in the morning", [], None),
        ("ID: 7\nFinal Answer: rye", "rye", [], "not documents of the prompt"),
        ("Final Answer: rye\nQuery: more\nFinal Answer: oats", "rye", [], "the first was read"),
        ("ID: 3 says it opens at five.", "ID: 3 says it opens at five.", [3], "whole reply is taken"),
    ],
)
def test_the_qa_parser(reply, answer, numbers, note):
    parsed = parse_reply(reply, "qa", num_documents=4)
    assert (parsed.answer, parsed.numbers) == (answer, numbers)
    assert (note is None and parsed.notes == []) or any(note in text for text in parsed.notes)


def test_ids_outside_the_prompt_become_warnings_on_the_answer():
    rag, _ = cic_rag("Final Answer: [2, 17]")
    answer = rag.ask(QUERY)
    assert answer.extras["predicted_ids"] == ["observatory"]
    assert any("[17]" in warning for warning in answer.warnings)


def test_a_corpus_over_the_window_keeps_the_first_documents_and_warns(caplog):
    probe, _ = cic_rag()
    mode = probe.mode("cic")
    probe.ask(QUERY)  # prepares the mode
    suffix = cic_prompt.query_suffix(QUERY, "retrieval")
    generator = probe.generator
    max_new = probe.config.answer_max_new_tokens
    window = generator.count_tokens(mode.prefix(probe.context("cic"), 2, "retrieval", "en") + suffix) + max_new
    assert generator.count_tokens(mode.prefix(probe.context("cic"), 3, "retrieval", "en") + suffix) + max_new > window  # 3 do not fit

    rag, fake = cic_rag("Final Answer: [2, 1]", window=window)
    with caplog.at_level(logging.WARNING, logger="memorag.modes.cic"):
        answer = rag.ask(QUERY)
    assert [item.doc_id for item in answer.evidence] == ["orchard", "ferry"]
    assert fake.count_tokens(fake.prompts[-1]) + max_new <= window
    assert "ID: 2 |" not in fake.prompts[-1] and "ID: 1 | TITLE: River Ferry | CONTENT:" in fake.prompts[-1]
    message = "kept the first 2 of 4 documents in corpus order and dropped the last 2: observatory, bakery"
    assert any(message in warning for warning in answer.warnings)
    assert any(message in record.getMessage() for record in caplog.records)
    assert answer.extras["predicted_ids"] == ["ferry"]  # 2 is no longer a document of the prompt
    assert any("not documents of the prompt (0..1): [2]" in warning for warning in answer.warnings)


def test_a_window_too_small_for_one_document_is_a_clear_error():
    rag, _ = cic_rag(window=60)
    with pytest.raises(PipelineError, match="not even 64 tokens of the first document fit"):
        rag.ask(QUERY)


def test_a_document_longer_than_the_window_is_cut_at_a_word_boundary(caplog):
    long_text = " ".join(f"w{number}" for number in range(3000))
    generator = FakeEchoGenerator("Final Answer: [0]", context_window=1200)
    rag = make_rag(generator=generator, mode="cic")
    rag.memorize([Document(id="haystack", title="Haystack", text=long_text)], with_memory=False)
    with caplog.at_level(logging.WARNING, logger="memorag.modes.cic"):
        answer = rag.ask(QUERY)
    [evidence] = answer.evidence
    cut = evidence.end_char
    assert 0 < cut < len(long_text) and long_text[cut] == " "  # the first words, whole
    assert long_text[:cut] in generator.prompts[-1] and long_text[: cut + 8] not in generator.prompts[-1]
    room = 1200 - rag.config.answer_max_new_tokens
    assert room - 2 <= generator.count_tokens(generator.prompts[-1]) <= room  # filled to the window, one word short at most
    assert answer.extras["predicted_ids"] == ["haystack"]
    message = f"the first {cut} of {len(long_text)} characters of haystack"
    assert any(message in warning for warning in answer.warnings)
    assert any(message in record.getMessage() for record in caplog.records)


def test_a_local_generator_computes_the_corpus_once_for_many_queries():
    generator = LocalGenerator(tiny_base("llama", seed=1), tiny_tokenizer(), name="tiny")
    rag = make_rag(generator=generator, mode="cic", answer_max_new_tokens=4)
    rag.memorize(DOCUMENTS, with_memory=False)
    for query in (QUERY, "Who steers the ferry?", "What does the bakery bake?"):
        answer = rag.ask(query)
        assert answer.extras["raw_reply"] is not None and isinstance(answer.extras["predicted_ids"], list)
    prefix = rag.mode("cic").prefix(rag.context("cic"), len(DOCUMENTS), "retrieval", "en")
    cache = generator.prefix_cache
    assert (cache.builds, cache.reuses) == (1, 3)
    assert cache.num_tokens == len(generator.tokenizer(prefix)["input_ids"]) > 100
