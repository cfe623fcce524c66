"""MixPR: PageRank convention against a dense numpy reference and networkx, the sparse
graph, routing, retrieval on a small corpus, persistence."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp

from memorag.retrieval.chunking import Document, chunk_documents_for_mixpr
from memorag.retrieval.mixture_pagerank import (
    MixPRRetriever,
    append_nodes,
    pagerank,
    parse_route,
    route_rule_based,
    similarity_graph,
)


def small_graph() -> np.ndarray:
    """Symmetric weights on 8 nodes: an odd ring 0..6 with chords (aperiodic, connected),
    and node 7 isolated (dangling)."""
    rng = np.random.default_rng(0)
    weights = np.zeros((8, 8))
    edges = [(i, (i + 1) % 7) for i in range(7)] + [(0, 2), (1, 4), (3, 6)]
    for i, j in edges:
        weights[i, j] = weights[j, i] = rng.uniform(0.3, 1.0)
    return weights


def dense_reference(weights, personalization, alpha, iterations, dangling="uniform"):
    """x <- (1 - alpha) (A x + dangling mass * target) + alpha p, A column-normalised, dense numpy."""
    size = len(weights)
    column_sums = weights.sum(axis=0)
    transition = np.zeros_like(weights)
    transition[:, column_sums > 0] = weights[:, column_sums > 0] / column_sums[column_sums > 0]
    restart = personalization / personalization.sum()
    target = np.full(size, 1 / size) if dangling == "uniform" else restart
    scores = np.full(size, 1 / size)
    for _ in range(iterations):
        scores = (1 - alpha) * (
            transition @ scores + scores[column_sums == 0].sum() * target
        ) + alpha * restart
    return scores


@pytest.mark.parametrize("alpha", [0.6, 0.0])
@pytest.mark.parametrize("dangling", ["uniform", "personalization"])
def test_pagerank_equals_dense_reference(alpha, dangling):
    weights = small_graph()
    personalization = np.zeros(8)
    personalization[5] = 1.0  # one-hot on a "query" node
    expected = dense_reference(weights, personalization, alpha, iterations=18, dangling=dangling)
    got = pagerank(sp.csr_matrix(weights), personalization, alpha, max_iter=18, dangling=dangling)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-15)
    assert got.sum() == pytest.approx(1.0)
    if alpha == 0.6:
        assert np.argmax(got) == 5  # mass stays near the restart node


@pytest.mark.parametrize("restart", [0.0, 0.6])
def test_pagerank_matches_networkx_with_damping_one_minus_restart(restart):
    weights = small_graph()
    personalization = np.zeros(8)
    personalization[[2, 5]] = 1.0
    ours = pagerank(sp.csr_matrix(weights), personalization, restart, max_iter=10_000, tol=1e-15)
    graph = nx.from_numpy_array(weights, create_using=nx.DiGraph)
    reference = nx.pagerank(
        graph,
        alpha=1.0 - restart,  # networkx's alpha is the damping factor
        personalization={node: float(personalization[node]) for node in graph},
        dangling={node: 1.0 for node in graph},  # our default: dangling mass spreads uniformly
        max_iter=10_000,
        tol=1e-14,
    )
    np.testing.assert_allclose(ours, [reference[node] for node in range(8)], atol=1e-10)
    if restart == 0.0:
        assert ours[7] == pytest.approx(0.0, abs=1e-10)  # no edges lead to the dangling node


def test_append_nodes_equals_block_matrix():
    rng = np.random.default_rng(1)
    graph = sp.random(30, 30, density=0.2, format="csr", random_state=rng)
    cross = sp.random(3, 30, density=0.3, format="csr", random_state=rng)
    inner = sp.random(3, 3, density=0.5, format="csr", random_state=rng)
    expected = sp.bmat([[graph, cross.T], [cross, inner]]).toarray()
    np.testing.assert_array_equal(append_nodes(graph, cross, inner).toarray(), expected)


def test_pagerank_rejects_bad_input():
    weights = sp.csr_matrix(small_graph())
    with pytest.raises(ValueError):
        pagerank(weights, np.zeros(8), 0.5)
    with pytest.raises(ValueError):
        pagerank(weights, np.ones(8), 1.5)
    with pytest.raises(ValueError):
        pagerank(weights, np.ones(8), 0.5, dangling="drop")


STORY = (
    "The old lighthouse keeper lived alone on the rocky island. "
    "Every night the keeper climbed the lighthouse stairs to light the great lamp. "
    "The lamp of the lighthouse guided the fishing boats home through the storm. "
    "One winter a dragon flew over the island. "
    "The dragon hid the golden key under the old oak tree. "
    "Nobody in the village knew where the golden key was hidden. "
    "The fishing boats returned home safely after the storm. "
    "The keeper wrote about the storm and the fishing boats in his diary."
)


def story_chunks():
    documents = [Document(id="story", text=STORY), Document(id="other", text="Bananas are yellow fruit.")]
    return chunk_documents_for_mixpr(documents, max_words=32)


def test_graph_is_sparse_thresholded_symmetric_and_blockwise_exact():
    retriever = MixPRRetriever()
    retriever.add(story_chunks())
    graph = retriever.graph
    assert sp.issparse(graph) and graph.shape == (9, 9)
    assert graph.diagonal().sum() == 0
    assert (graph.data >= retriever.threshold).all()
    assert abs(graph - graph.T).max() < 1e-6
    vectors = retriever._vectors.toarray()
    dense = vectors @ vectors.T
    np.fill_diagonal(dense, 0.0)
    dense[dense < retriever.threshold] = 0.0
    np.testing.assert_allclose(graph.toarray(), dense, atol=1e-6)
    np.testing.assert_allclose(
        similarity_graph(retriever._vectors, 0.27, block_rows=2).toarray(), dense, atol=1e-6
    )


def test_retriever_scores_equal_dense_reference_on_the_full_graph():
    retriever = MixPRRetriever()
    retriever.add(story_chunks())
    retriever.build()
    query = "Where did the dragon hide the golden key?"
    corpus = retriever._vectors.toarray()
    query_vector = retriever._encoder.transform([query]).toarray()
    vectors = np.vstack([corpus, query_vector])  # the query node goes last
    weights = vectors @ vectors.T
    np.fill_diagonal(weights, 0.0)
    weights[weights < retriever.threshold] = 0.0
    personalization = np.zeros(len(vectors))
    personalization[-1] = 1.0
    for route, alpha in [("local", 0.6), ("global", 0.0)]:
        expected = dense_reference(weights, personalization, alpha, iterations=18)[:-1]
        np.testing.assert_allclose(retriever.scores(query, route=route), expected, rtol=1e-5, atol=1e-9)


def test_local_question_finds_the_evidence_and_retrieve_keeps_document_order():
    chunks = story_chunks()
    retriever = MixPRRetriever()
    retriever.add(chunks)
    (hits,) = retriever.search(["Where did the dragon hide the golden key?"], k=3)
    assert chunks[hits[0].chunk_id].text == "The dragon hid the golden key under the old oak tree."
    ordered = retriever.retrieve("Where did the dragon hide the golden key?", k=3)
    assert [hit.chunk_id for hit in ordered] == sorted(hit.chunk_id for hit in hits)
    assert len(retriever.retrieve("golden key", k=100)) == len(chunks)


def test_global_route_is_plain_pagerank_centrality():
    chunks = story_chunks()
    retriever = MixPRRetriever()
    retriever.add(chunks)
    assert retriever.route("Summarize the main themes of the story") == "global"
    scores = retriever.scores("Summarize the main themes of the story")
    central = int(np.argmax(scores))
    degree = np.asarray((retriever.graph > 0).sum(axis=0)).ravel()
    assert degree[central] == degree.max()
    assert scores[-1] < scores[central]  # the banana chunk is isolated


def test_rule_router_and_llm_router_hook():
    assert route_rule_based("What is the overall theme?") == "global"
    assert route_rule_based("Which words are most frequent in the text?") == "global"
    assert route_rule_based("Give a summary of the book.") == "global"
    assert route_rule_based("Who hid the golden key?") == "local"
    assert parse_route("Answer: GLOBAL.") == "global"
    assert parse_route("local") == "local"
    assert parse_route("local or global?") is None and parse_route("unsure") is None

    calls = []

    def fake_llm_router(query, excerpt):
        calls.append((query, list(excerpt)))
        return "The task is global"

    chunks = story_chunks()
    retriever = MixPRRetriever(router=fake_llm_router)
    retriever.add(chunks)
    assert retriever.route("Who hid the key?") == "global"
    assert calls[0][1] == [chunks[i].text for i in (0, 1, 7, 8)]  # first two and last two chunks
    retriever.router = lambda query, excerpt: "no idea"
    assert retriever.route("Who hid the key?") == "local"  # falls back to the rules


def test_save_load_and_incremental_add(tmp_path):
    chunks = story_chunks()
    retriever = MixPRRetriever(threshold=0.2, max_iter=10)
    retriever.add(chunks[:4])
    retriever.search(["lighthouse"], k=2)
    retriever.add(chunks[4:])  # graph is rebuilt over all chunks on the next search
    query = "Where did the dragon hide the golden key?"
    retriever.save(tmp_path / "mixpr")
    loaded = MixPRRetriever.load(tmp_path / "mixpr")
    assert (loaded.threshold, loaded.max_iter, len(loaded)) == (0.2, 10, 9)
    np.testing.assert_allclose(loaded.scores(query), retriever.scores(query))
    with pytest.raises(ValueError, match="already indexed"):
        loaded.add(chunks[:1])
    with pytest.raises(ValueError, match="no chunks"):
        MixPRRetriever().build()
