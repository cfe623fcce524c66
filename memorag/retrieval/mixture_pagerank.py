"""Mixture-of-PageRanks (MixPR) retrieval: personalized PageRank on a sparse TF-IDF chunk graph.

Recipe (Alonso & Millidge 2024; no public code, so every convention is stated here):

1. Nodes are short chunks (at most 32 words, ``chunk_documents_for_mixpr``), plus the
   query split the same way, appended after the corpus chunks.
2. E = L2-normalised TF-IDF vectors [N, V], very frequent terms pruned (``max_df``,
   see ``TfidfEncoder``; without pruning the graph build is 35x slower at 1M words).
3. S = E E^T (cosine similarity between chunks) computed block by block of rows,
   entries below ``threshold`` (0.27) dropped and the diagonal removed (no self
   loops), kept as a scipy sparse matrix; never a dense N x N.
4. A = S with each column divided by its sum (column-stochastic); ``A[i, j]`` is the
   probability of stepping from node j to node i.
5. Power iteration from the uniform vector, at most ``max_iter`` (18) steps::

       x_{t+1} = (1 - alpha) * (A x_t + (sum of x_t over dangling nodes) * u) + alpha * p

   ``alpha`` is the *restart* weight (networkx's ``alpha`` is the damping, 1 - ours).
   p is uniform over the query nodes (one-hot for a one-chunk query). A dangling node
   (a column with no edges) spreads its mass uniformly over all nodes (u = 1/n), as
   in the original PageRank; ``dangling="personalization"`` sends it to p instead.
   The iteration keeps sum(x) = 1 and stops early once the L1 change is below ``tol``.
6. Local (question) tasks use alpha = 0.6: mass stays near the query. Global tasks
   (summaries, most frequent words) use alpha = 0, plain PageRank: the query only
   perturbs a query-independent centrality. A router picks local or global.
7. The top-k chunks (k = 100) are handed to the reader in document order.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import scipy.sparse as sp

from memorag.retrieval.base import Hit, IndexFormatError, Retriever, check_new_chunk_ids, check_queries
from memorag.retrieval.chunking import Chunk, split_sentences_for_mixpr
from memorag.retrieval.sparse import TfidfEncoder

logger = logging.getLogger(__name__)

Route = Literal["local", "global"]
Dangling = Literal["uniform", "personalization"]
# An LLM router: (query, excerpt chunk texts: the first two and the last two) -> answer
# text containing "local" or "global". The prompt lives with the other prompts.
Router = Callable[[str, Sequence[str]], str]

_GLOBAL_CUES = re.compile(
    r"\b(summar(y|ies|i[sz]e[sd]?|i[sz]ing)|overall|overview|gist"
    r"|main (themes?|ideas?|points?|topics?|events?)|(key|central|major) (themes?|ideas?|points?|takeaways?)"
    r"|themes?|most (frequent|common|often)"
    r"|how often|(whole|entire) (text|book|document|story|corpus|novel))\b",
    re.IGNORECASE,
)


def route_rule_based(query: str) -> Route:
    """``"global"`` when the query asks about the text as a whole (summaries, themes,
    most frequent items), else ``"local"``."""
    return "global" if _GLOBAL_CUES.search(query) else "local"


def parse_route(answer: str) -> Route | None:
    """Read a router's free-text answer: the one of local/global it names, else None."""
    words = set(re.findall(r"[a-z]+", answer.lower()))
    if ("local" in words) == ("global" in words):
        return None
    return "local" if "local" in words else "global"


def similarity_graph(
    vectors: sp.csr_matrix, threshold: float = 0.27, block_rows: int = 4096
) -> sp.csr_matrix:
    """Thresholded, loop-free ``vectors @ vectors.T``: [N, N] sparse, symmetric.

    Built ``block_rows`` rows at a time so that the unthresholded product (much denser
    than the result) never exists for all rows at once.
    """
    vectors = vectors.tocsr()
    transposed = vectors.T.tocsr()  # [V, N]
    blocks = []
    for begin in range(0, vectors.shape[0], block_rows):
        block = (vectors[begin : begin + block_rows] @ transposed).tocoo()  # [B, N]
        keep = (block.data >= threshold) & (block.row + begin != block.col)
        blocks.append(
            sp.csr_matrix(
                (block.data[keep], (block.row[keep], block.col[keep])), shape=block.shape, dtype=np.float64
            )
        )
    if not blocks:
        return sp.csr_matrix((0, 0), dtype=np.float64)
    return sp.vstack(blocks, format="csr")


def cross_graph(
    corpus_vectors: sp.csr_matrix, query_vectors: sp.csr_matrix, threshold: float = 0.27
) -> sp.csr_matrix:
    """Thresholded similarities of M query nodes to N corpus nodes: [M, N] sparse."""
    block = (query_vectors @ corpus_vectors.T).tocsr()  # [M, N]
    block.data[block.data < threshold] = 0
    block.eliminate_zeros()
    return block.astype(np.float64)


def append_nodes(graph: sp.csr_matrix, cross: sp.csr_matrix, inner: sp.csr_matrix) -> sp.csr_matrix:
    """``[[graph, cross.T], [cross, inner]]`` in CSR: graph [N, N], cross [M, N], inner [M, M].

    Equal to ``sp.bmat`` but about ten times faster for a small M: the new columns
    follow every old one, so their entries are appended to the end of each old row
    without a COO round trip over the whole graph.
    """
    size = graph.shape[0]
    cross_t = cross.T.tocsr()  # [N, M]
    added_per_row = np.diff(cross_t.indptr)  # [N]
    positions = np.repeat(graph.indptr[1:], added_per_row)  # insert at the end of each row
    top_indices = np.insert(graph.indices, positions, cross_t.indices + size)
    top_data = np.insert(graph.data, positions, cross_t.data)
    top_indptr = graph.indptr + np.concatenate([[0], np.cumsum(added_per_row)])
    bottom = sp.hstack([cross, inner], format="csr")  # [M, N + M]
    total = size + cross.shape[0]
    return sp.csr_matrix(
        (
            np.concatenate([top_data, bottom.data]),
            np.concatenate([top_indices, bottom.indices]),
            np.concatenate([top_indptr, bottom.indptr[1:] + top_indptr[-1]]),
        ),
        shape=(total, total),
    )


def pagerank(
    adjacency: sp.spmatrix,
    personalization: np.ndarray,
    alpha: float,
    max_iter: int = 18,
    tol: float = 0.0,
    dangling: Dangling = "uniform",
) -> np.ndarray:
    """Personalized PageRank by power iteration, convention as in the module docstring.

    ``adjacency[i, j] >= 0`` is the weight of the edge j -> i (a symmetric similarity
    matrix works as is); columns are normalised here. ``personalization`` [n] is
    normalised to sum 1. Returns x [n], sum(x) = 1.
    """
    size = adjacency.shape[0]
    if adjacency.shape != (size, size):
        raise ValueError(f"adjacency must be square, got {adjacency.shape}")
    if not 0 <= alpha <= 1:
        raise ValueError(f"restart weight alpha must be in [0, 1], got {alpha}")
    if dangling not in ("uniform", "personalization"):
        raise ValueError(f"dangling must be 'uniform' or 'personalization', got {dangling!r}")
    restart = np.asarray(personalization, dtype=np.float64).ravel()  # [n]
    if restart.shape != (size,) or (restart < 0).any() or restart.sum() <= 0:
        raise ValueError("personalization must be a non-negative vector of length n with a positive sum")
    restart = restart / restart.sum()
    column_sums = np.asarray(adjacency.sum(axis=0)).ravel()  # [n]
    is_dangling = column_sums <= 0
    inverse_sums = np.divide(1.0, column_sums, out=np.zeros(size), where=~is_dangling)
    weights = sp.csr_matrix(adjacency, dtype=np.float64)  # [n, n]
    dangling_target = np.full(size, 1.0 / size) if dangling == "uniform" else restart
    scores = np.full(size, 1.0 / size)  # [n]
    for _ in range(max_iter):
        # A x = S D^-1 x: scale by the inverse column sums instead of forming A.
        walked = weights @ (scores * inverse_sums) + scores[is_dangling].sum() * dangling_target
        updated = (1.0 - alpha) * walked + alpha * restart
        change = np.abs(updated - scores).sum()
        scores = updated
        if change < tol:
            break
    return scores


class MixPRRetriever(Retriever):
    """MixPR over the chunks added (each chunk is one graph node; use
    ``chunk_documents_for_mixpr`` to make 32-word chunks).

    ``search`` returns hits best first, like every retriever; ``retrieve`` returns the
    top-k in graph (insertion) order, which is document order when chunks were added
    in document order. The TF-IDF fit and the chunk graph are built lazily on the first
    search after an ``add`` (idf changes with every added chunk; rebuilding takes
    seconds for a million words).
    """

    kind = "mixpr"

    def __init__(
        self,
        max_words: int = 32,
        threshold: float = 0.27,
        alpha_local: float = 0.6,
        alpha_global: float = 0.0,
        max_iter: int = 18,
        tol: float = 0.0,
        max_df: float = 0.01,
        min_pruned_df: int = 100,
        dangling: Dangling = "uniform",
        block_rows: int = 4096,
        router: Router | None = None,
    ) -> None:
        if not 0 < threshold <= 1:
            raise ValueError(f"threshold must be in (0, 1], got {threshold}")
        self.max_words, self.threshold = max_words, threshold
        self.alpha_local, self.alpha_global = alpha_local, alpha_global
        self.max_iter, self.tol, self.dangling, self.block_rows = max_iter, tol, dangling, block_rows
        self.max_df, self.min_pruned_df = max_df, min_pruned_df
        self.router = router
        self._chunk_ids: list[int] = []
        self._known_ids: set[int] = set()
        self._texts: list[str] = []
        self._encoder: TfidfEncoder | None = None
        self._vectors: sp.csr_matrix | None = None  # [N, V] TF-IDF of the chunks
        self._graph: sp.csr_matrix | None = None  # [N, N] thresholded similarities

    def __len__(self) -> int:
        return len(self._chunk_ids)

    def add(self, chunks: Sequence[Chunk]) -> None:
        new_ids = check_new_chunk_ids(self._known_ids, chunks)
        self._chunk_ids.extend(new_ids)
        self._known_ids.update(new_ids)
        self._texts.extend(chunk.text for chunk in chunks)
        self._encoder, self._vectors, self._graph = None, None, None

    def build(self) -> None:
        """Fit TF-IDF on all chunks and build the chunk graph (done lazily by searches)."""
        if not self._texts:
            raise ValueError("MixPR has no chunks; add() some first")
        self._encoder = TfidfEncoder(max_df=self.max_df, min_pruned_df=self.min_pruned_df)
        self._vectors = self._encoder.fit_transform(self._texts)
        self._graph = similarity_graph(self._vectors, self.threshold, self.block_rows)

    @property
    def graph(self) -> sp.csr_matrix:
        """The corpus chunk graph (thresholded similarities, no self loops): [N, N] sparse."""
        if self._graph is None:
            self.build()
        assert self._graph is not None
        return self._graph

    def route(self, query: str, router: Router | None = None) -> Route:
        """Local or global: the LLM router (``router``, else the one set on the retriever;
        falls back to the rules when its answer names neither), else ``route_rule_based``."""
        router = router or self.router
        if router is None:
            return route_rule_based(query)
        excerpt = self._texts[:2] + self._texts[2:][-2:]
        answer = router(query, excerpt)
        parsed = parse_route(answer)
        if parsed is None:
            logger.warning("router answer %r names neither local nor global; using the rules", answer[:200])
            return route_rule_based(query)
        return parsed

    def query_graph(self, query: str) -> tuple[sp.csr_matrix, np.ndarray]:
        """The corpus graph with the query's chunks appended as the last M nodes, and the
        personalization vector (uniform over those nodes): [N + M, N + M] and [N + M]."""
        graph = self.graph  # builds if needed
        assert self._encoder is not None and self._vectors is not None
        pieces = [span.text for span in split_sentences_for_mixpr(query, self.max_words)] or [query]
        query_vectors = self._encoder.transform(pieces)  # [M, V]
        query_to_corpus = cross_graph(self._vectors, query_vectors, self.threshold)  # [M, N]
        query_to_query = similarity_graph(query_vectors, self.threshold)  # [M, M]
        full_graph = append_nodes(graph, query_to_corpus, query_to_query)  # [N + M, N + M]
        personalization = np.zeros(full_graph.shape[0])
        personalization[len(self) :] = 1.0
        return full_graph, personalization

    def scores(self, query: str, route: Route | None = None) -> np.ndarray:
        """PageRank mass of every corpus chunk for ``query``, in insertion order: [N]."""
        if route not in (None, "local", "global"):
            raise ValueError(f"route must be 'local', 'global' or None, got {route!r}")
        full_graph, personalization = self.query_graph(query)
        alpha = self.alpha_global if (route or self.route(query)) == "global" else self.alpha_local
        mass = pagerank(full_graph, personalization, alpha, self.max_iter, self.tol, self.dangling)
        return mass[: len(self)]

    def _top_rows(self, query: str, k: int, route: Route | None) -> tuple[np.ndarray, np.ndarray]:
        mass = self.scores(query, route)  # [N]
        # Best first; ties go to the earlier chunk.
        return np.lexsort((np.arange(len(mass)), -mass))[:k], mass

    def search(self, queries: Sequence[str], k: int, route: Route | None = None) -> list[list[Hit]]:
        check_queries(queries, k)
        if len(self) == 0:
            return [[] for _ in queries]
        results = []
        for query in queries:
            rows, mass = self._top_rows(query, k, route)
            results.append([Hit(self._chunk_ids[row], float(mass[row])) for row in rows])
        return results

    def retrieve(self, query: str, k: int = 100, route: Route | None = None) -> list[Hit]:
        """The top-``k`` chunks for ``query`` in graph (insertion) order."""
        check_queries([query], k)
        if len(self) == 0:
            return []
        rows, mass = self._top_rows(query, k, route)
        return [Hit(self._chunk_ids[row], float(mass[row])) for row in np.sort(rows)]

    def _settings(self) -> dict[str, Any]:
        return {
            "max_words": self.max_words,
            "threshold": self.threshold,
            "alpha_local": self.alpha_local,
            "alpha_global": self.alpha_global,
            "max_iter": self.max_iter,
            "tol": self.tol,
            "max_df": self.max_df,
            "min_pruned_df": self.min_pruned_df,
            "dangling": self.dangling,
            "block_rows": self.block_rows,
        }

    def _write_files(self, directory: Path) -> None:
        # The graph is rebuilt on load (seconds); only the chunk texts are stored.
        np.save(directory / "chunk_ids.npy", np.asarray(self._chunk_ids, dtype=np.int64))
        (directory / "texts.json").write_text(json.dumps(self._texts, ensure_ascii=False), encoding="utf-8")

    @classmethod
    def _read_files(
        cls, directory: Path, manifest: dict[str, Any], router: Router | None = None, **kwargs: Any
    ) -> MixPRRetriever:
        retriever = cls(**{**manifest["settings"], **kwargs}, router=router)
        try:
            chunk_ids = [
                int(chunk_id) for chunk_id in np.load(directory / "chunk_ids.npy", allow_pickle=False)
            ]
            texts = json.loads((directory / "texts.json").read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise IndexFormatError(f"{directory}: unreadable MixPR data ({error})") from error
        if not isinstance(texts, list) or len(chunk_ids) != len(texts):
            raise IndexFormatError(f"{directory}: {len(chunk_ids)} chunk ids for {len(texts)} texts")
        retriever._chunk_ids, retriever._known_ids, retriever._texts = chunk_ids, set(chunk_ids), texts
        return retriever
