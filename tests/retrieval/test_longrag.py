import pytest

from memorag.retrieval import Document
from memorag.retrieval.base import Hit
from memorag.retrieval.long_units import group_documents, infer_links, maxp


def words(text: str) -> int:
    return len(text.split())


def doc(id_: str, size: int, links=(), title="") -> Document:
    return Document(id=id_, text=" ".join([id_] * size), title=title, links=list(links))


def test_every_document_lands_in_exactly_one_unit_within_the_cap():
    documents = [doc("a", 40, ["b"]), doc("b", 40, ["c"]), doc("c", 40), doc("lonely", 10), doc("huge", 500, ["a"])]
    units = group_documents(documents, words, max_tokens=100)
    placed = [d for unit in units for d in unit.doc_ids]
    assert sorted(placed) == sorted(d.id for d in documents)
    for unit in units:
        assert unit.num_tokens <= 100 or len(unit.doc_ids) == 1
    assert ("lonely",) in [u.doc_ids for u in units]  # no links: a unit of its own, not dropped
    assert ("huge",) in [u.doc_ids for u in units]  # alone beyond the cap


def test_smallest_neighbouring_group_is_merged_first():
    # leaves join their hubs first (fewest links): A+a1+a2 = 50 tokens, B+b1 = 45 tokens;
    # then n (2 links) meets both groups: only one fits beside it under the cap of 60,
    # and the smaller one (B's, 45) is taken although A's (50) would also fit alone
    documents = [
        doc("n", 10, ["A", "B"]),
        doc("A", 30, ["a1", "a2"]), doc("a1", 10), doc("a2", 10),
        doc("B", 40, ["b1"]), doc("b1", 5),
    ]
    units = group_documents(documents, words, max_tokens=60)
    assert sorted(u.doc_ids for u in units) == [("A", "a1", "a2"), ("n", "B", "b1")]


def test_links_by_title_and_unit_spans_map_back_to_documents():
    documents = [doc("d1", 5, ["Second"], title="First"), doc("d2", 5, title="Second")]
    (unit,) = group_documents(documents, words, max_tokens=100)
    assert unit.doc_ids == ("d1", "d2")
    for doc_id, start, end in unit.spans:
        member = next(d for d in documents if d.id == doc_id)
        assert unit.text[start:end] == f"{member.title}\n{member.text}"
        assert unit.doc_at(start) == doc_id


def test_inferred_links_relate_documents_sharing_rare_terms():
    documents = [
        Document("x1", "The zeppelin Hindenburg burned at Lakehurst."),
        Document("x2", "Lakehurst airfield saw the Hindenburg zeppelin disaster."),
        Document("y1", "Photosynthesis in chloroplasts makes sugar."),
        Document("y2", "Chloroplasts carry out photosynthesis in plants."),
        Document("z", "A river runs to the sea."),
    ]
    links = infer_links(documents, max_links=1)
    assert links["x1"] == ["x2"] and links["y2"] == ["y1"] and links["z"] == []
    units = group_documents(documents, words, max_tokens=100, links=links)
    assert sorted(u.doc_ids for u in units) == [("x1", "x2"), ("y1", "y2"), ("z",)]


def test_maxp_takes_each_units_best_chunk():
    hits = [Hit(0, 0.2), Hit(1, 0.9), Hit(2, 0.5), Hit(3, 0.4)]
    unit_of_chunk = {0: "u0", 1: "u1", 2: "u0", 3: "u2"}
    assert maxp(hits, unit_of_chunk) == [("u1", 0.9), ("u0", 0.5), ("u2", 0.4)]


def test_bad_input():
    with pytest.raises(ValueError, match="no documents"):
        group_documents([], words)
    with pytest.raises(ValueError, match="unique"):
        group_documents([doc("a", 1), doc("a", 2)], words)
