"""Token chunking and MixPR sentence splitting: exact offsets, overlap, validation."""

from __future__ import annotations

import itertools
import re

import pytest

from memorag.retrieval.chunking import (
    Document,
    chunk_documents,
    chunk_documents_for_mixpr,
    split_sentences_for_mixpr,
)


def _assert_offsets_exact(chunks, documents):
    texts = {document.id: document.text for document in documents}
    for chunk in chunks:
        assert chunk.text == texts[chunk.doc_id][chunk.start_char : chunk.end_char]


def test_windows_with_overlap_cover_the_document(fake_tokenizer):
    text = " ".join(f"w{i}" for i in range(10))
    document = Document(id="d", text=text, title="T")
    chunks = chunk_documents([document], fake_tokenizer, chunk_tokens=4, overlap_tokens=1)
    assert [chunk.text for chunk in chunks] == ["w0 w1 w2 w3", "w3 w4 w5 w6", "w6 w7 w8 w9"]
    assert [chunk.num_tokens for chunk in chunks] == [4, 4, 4]
    assert [chunk.id for chunk in chunks] == [0, 1, 2]
    assert all(chunk.doc_id == "d" and chunk.title == "T" for chunk in chunks)
    _assert_offsets_exact(chunks, [document])


def test_last_window_is_not_contained_in_the_previous_one(fake_tokenizer):
    document = Document(id="d", text=" ".join(f"w{i}" for i in range(10)))
    chunks = chunk_documents([document], fake_tokenizer, chunk_tokens=4, overlap_tokens=2)
    assert [chunk.text for chunk in chunks] == ["w0 w1 w2 w3", "w2 w3 w4 w5", "w4 w5 w6 w7", "w6 w7 w8 w9"]


def test_consecutive_chunks_share_exactly_the_overlap(fake_tokenizer):
    text = "Alpha, beta; gamma delta.\n\nEpsilon zeta eta theta iota kappa lambda mu nu xi omicron pi."
    document = Document(id="greek", text=text)
    chunks = chunk_documents([document], fake_tokenizer, chunk_tokens=6, overlap_tokens=2)
    for previous, current in itertools.pairwise(chunks):
        previous_tokens = re.findall(r"\w+|[^\w\s]", previous.text)
        current_tokens = re.findall(r"\w+|[^\w\s]", current.text)
        assert previous_tokens[-2:] == current_tokens[:2]
    _assert_offsets_exact(chunks, [document])


def test_unicode_offsets_and_ids_continue_across_documents(fake_tokenizer):
    documents = [
        Document(id="fr", text="Le cœur a ses raisons que la raison ne connaît point.", title="Pascal"),
        Document(id="ja", text="東京 は 日本 の 首都 です 。 Ünïcödé 😀 emoji ok"),
        Document(id="ru", text="Съешь же ещё этих мягких французских булок"),
    ]
    chunks = chunk_documents(documents, fake_tokenizer, chunk_tokens=3, overlap_tokens=1, first_id=100)
    assert [chunk.id for chunk in chunks] == list(range(100, 100 + len(chunks)))
    assert {chunk.doc_id for chunk in chunks} == {"fr", "ja", "ru"}
    _assert_offsets_exact(chunks, documents)
    assert chunks[0].text == "Le cœur a"


def test_short_document_is_one_chunk(fake_tokenizer):
    document = Document(id="s", text="  just two  ")
    (chunk,) = chunk_documents([document], fake_tokenizer, chunk_tokens=200, overlap_tokens=20)
    assert (chunk.text, chunk.start_char, chunk.end_char, chunk.num_tokens) == ("just two", 2, 10, 2)


@pytest.mark.parametrize(
    ("documents", "kwargs", "message"),
    [
        ([], {}, "empty"),
        ([Document(id="a", text="")], {}, "empty text"),
        ([Document(id="a", text=" \n\t ")], {}, "empty text"),
        ([Document(id="a", text="x")], {"chunk_tokens": 10, "overlap_tokens": 10}, "smaller than"),
        ([Document(id="a", text="x")], {"chunk_tokens": 0, "overlap_tokens": 0}, "chunk_tokens"),
    ],
)
def test_invalid_input_is_a_clear_error(fake_tokenizer, documents, kwargs, message):
    with pytest.raises(ValueError, match=message):
        chunk_documents(documents, fake_tokenizer, **kwargs)


def test_a_bare_string_is_rejected(fake_tokenizer):
    with pytest.raises(TypeError):
        chunk_documents("some text", fake_tokenizer)


def test_mixpr_split_prefers_sentences():
    text = "First sentence here. Second one!  Third?\n\nA heading\nThe end"
    spans = split_sentences_for_mixpr(text, max_words=32)
    assert [span.text for span in spans] == [
        "First sentence here.",
        "Second one!",
        "Third?",
        "A heading\nThe end",
    ]
    assert all(text[span.start_char : span.end_char] == span.text for span in spans)


def test_mixpr_split_long_sentence_at_newlines_then_evenly():
    lines = ["one two three four", "five six seven eight nine ten eleven twelve thirteen"]
    text = "\n".join(lines) + "."
    spans = split_sentences_for_mixpr(text, max_words=5)
    # The first line fits; the second (9 words + '.') is split evenly into 5 + 4 words.
    assert [span.text for span in spans] == [
        "one two three four",
        "five six seven eight nine",
        "ten eleven twelve thirteen.",
    ]
    assert all(text[span.start_char : span.end_char] == span.text for span in spans)


def test_mixpr_even_split_sizes_and_unicode():
    words = [f"ß{i}" for i in range(70)]
    text = "  " + " ".join(words) + "。次の文です。"
    spans = split_sentences_for_mixpr(text, max_words=32)
    sizes = [len(span.text.split()) for span in spans]
    assert sizes == [24, 23, 23, 1]
    assert all(size <= 32 for size in sizes)
    assert spans[-1].text == "次の文です。"
    assert all(text[span.start_char : span.end_char] == span.text for span in spans)


def test_chunk_documents_for_mixpr_counts_words_or_tokens(fake_tokenizer):
    documents = [Document(id="a", text="Hello there, world. Bye now."), Document(id="b", text="Solo")]
    by_words = chunk_documents_for_mixpr(documents, max_words=32)
    assert [(chunk.doc_id, chunk.text, chunk.num_tokens) for chunk in by_words] == [
        ("a", "Hello there, world.", 3),
        ("a", "Bye now.", 2),
        ("b", "Solo", 1),
    ]
    by_tokens = chunk_documents_for_mixpr(documents, tokenizer=fake_tokenizer, first_id=5)
    assert [chunk.num_tokens for chunk in by_tokens] == [5, 3, 1]
    assert [chunk.id for chunk in by_tokens] == [5, 6, 7]
    _assert_offsets_exact(by_tokens, documents)
