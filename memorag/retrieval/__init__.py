"""Retrieval: chunking, BM25/TF-IDF, dense (sentence-transformers + faiss), fusion, MixPR, LongRAG units."""

from memorag.retrieval.base import Hit, IndexFormatError, Retriever, load_retriever
from memorag.retrieval.chunking import (
    Chunk,
    Document,
    TextSpan,
    chunk_documents,
    chunk_documents_for_mixpr,
    split_sentences_for_mixpr,
)
from memorag.retrieval.dense import DenseRetriever, load_embedder
from memorag.retrieval.hybrid import HybridRetriever, document_order, fit_to_budget, fuse
from memorag.retrieval.long_units import Unit, group_documents, infer_links, maxp
from memorag.retrieval.mixture_pagerank import MixPRRetriever, pagerank, parse_route, route_rule_based
from memorag.retrieval.sparse import BM25Retriever, TfidfEncoder, tokenize

__all__ = [
    "BM25Retriever",
    "Chunk",
    "DenseRetriever",
    "Document",
    "Hit",
    "HybridRetriever",
    "IndexFormatError",
    "MixPRRetriever",
    "Retriever",
    "TextSpan",
    "TfidfEncoder",
    "Unit",
    "chunk_documents",
    "chunk_documents_for_mixpr",
    "document_order",
    "fit_to_budget",
    "fuse",
    "group_documents",
    "infer_links",
    "load_embedder",
    "load_retriever",
    "maxp",
    "pagerank",
    "parse_route",
    "route_rule_based",
    "split_sentences_for_mixpr",
    "tokenize",
]
