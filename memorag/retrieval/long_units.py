"""LongRAG's long retrieval units: related documents grouped up to a size cap, scored by MaxP.

Grouping (after the LongRAG paper): documents are visited in ascending order of
their number of links; each one absorbs the groups of its linked neighbours,
smallest group first, as long as the union stays within `max_tokens`. Links are
taken as undirected. A document with no links stays a unit of its own: no
document is ever dropped, and no unit exceeds the cap unless one document alone
does. Where documents carry no links, `infer_links` relates each one to the
documents it shares the most rare terms with (TF-IDF with frequent terms pruned).

A unit is scored by the best score of its ~512-token chunks (MaxP): retrieving
whole 4K-token units with one embedding each dilutes them, so the units are
chunked, the chunks are retrieved, and each unit takes its best chunk's score.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from memorag.retrieval.base import Hit
from memorag.retrieval.chunking import Document
from memorag.retrieval.sparse import TfidfEncoder

UNIT_SEPARATOR = "\n\n"


@dataclass(frozen=True)
class Unit:
    """A long retrieval unit: a group of documents read together."""

    id: str
    doc_ids: tuple[str, ...]  # in the corpus' order
    num_tokens: int
    spans: tuple[tuple[str, int, int], ...] = ()  # (doc id, start, end) of each member in `text`
    text: str = ""
    title: str = ""

    def as_document(self) -> Document:
        return Document(id=self.id, text=self.text, title=self.title)

    def doc_at(self, offset: int) -> str | None:
        """The member document holding character `offset` of the unit's text."""
        for doc_id, start, end in self.spans:
            if start <= offset < end:
                return doc_id
        return None


def _neighbours(documents: Sequence[Document], links: Mapping[str, Iterable[str]] | None) -> list[set[int]]:
    index_of = {doc.id: i for i, doc in enumerate(documents)}
    by_title = {doc.title: i for i, doc in enumerate(documents) if doc.title}
    neighbours: list[set[int]] = [set() for _ in documents]
    for i, doc in enumerate(documents):
        targets = links.get(doc.id, ()) if links is not None else doc.links
        for target in targets:
            j = index_of.get(target, by_title.get(target))
            if j is not None and j != i:
                neighbours[i].add(j)
                neighbours[j].add(i)
    return neighbours


def infer_links(
    documents: Sequence[Document], max_links: int = 3, min_similarity: float = 0.1, max_df: float = 0.05
) -> dict[str, list[str]]:
    """Relate documents by shared rare terms: each to its `max_links` most similar (cosine of TF-IDF)."""
    if len(documents) < 2:
        return {doc.id: [] for doc in documents}
    encoder = TfidfEncoder(max_df=max_df, min_pruned_df=2)
    vectors = encoder.fit_transform([f"{doc.title}\n{doc.text}" for doc in documents])  # [N, V], unit rows
    similarity = (vectors @ vectors.T).tocsr()  # sparse: pruning keeps it so
    similarity.setdiag(0)
    similarity.eliminate_zeros()
    links: dict[str, list[str]] = {}
    for i, doc in enumerate(documents):
        row = similarity.getrow(i)
        order = np.argsort(-row.data, kind="stable")[:max_links]
        links[doc.id] = [documents[row.indices[j]].id for j in order if row.data[j] >= min_similarity]
    return links


def group_documents(
    documents: Sequence[Document],
    count_tokens: Callable[[str], int],
    max_tokens: int = 4096,
    links: Mapping[str, Iterable[str]] | None = None,
) -> list[Unit]:
    """Group documents into units of at most `max_tokens` (see the module docstring).

    `links` maps a document id to the ids or titles it links to; by default each
    document's own `links` field is used. Units are returned in the corpus order of
    their first document.
    """
    if not documents:
        raise ValueError("no documents to group")
    if len({doc.id for doc in documents}) != len(documents):
        raise ValueError("document ids must be unique")
    sizes = [count_tokens(f"{doc.title}\n{doc.text}") for doc in documents]
    neighbours = _neighbours(documents, links)
    parent = list(range(len(documents)))
    group_size = list(sizes)

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i in sorted(range(len(documents)), key=lambda i: (len(neighbours[i]), i)):
        candidates = sorted({find(j) for j in neighbours[i]} - {find(i)}, key=lambda g: (group_size[g], g))
        for group in candidates:
            own = find(i)
            if group_size[own] + group_size[group] <= max_tokens:
                parent[group] = own
                group_size[own] += group_size[group]

    members: dict[int, list[int]] = {}
    for i in range(len(documents)):
        members.setdefault(find(i), []).append(i)
    units = []
    for number, indices in enumerate(sorted(members.values(), key=lambda m: m[0])):
        spans, parts, offset = [], [], 0
        for i in indices:
            doc = documents[i]
            part = f"{doc.title}\n{doc.text}" if doc.title else doc.text
            spans.append((doc.id, offset, offset + len(part)))
            parts.append(part)
            offset += len(part) + len(UNIT_SEPARATOR)
        units.append(
            Unit(
                id=f"unit-{number}",
                doc_ids=tuple(documents[i].id for i in indices),
                num_tokens=sum(sizes[i] for i in indices),
                spans=tuple(spans),
                text=UNIT_SEPARATOR.join(parts),
                title=" | ".join(documents[i].title for i in indices if documents[i].title),
            )
        )
    return units


def maxp(hits: Sequence[Hit], unit_of_chunk: Mapping[int, str]) -> list[tuple[str, float]]:
    """Units ranked by the best score among their retrieved chunks (MaxP), best first."""
    best: dict[str, float] = {}
    for hit in hits:
        unit = unit_of_chunk[hit.chunk_id]
        if unit not in best or hit.score > best[unit]:
            best[unit] = hit.score
    return sorted(best.items(), key=lambda item: (-item[1], item[0]))
