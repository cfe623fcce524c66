"""MemoRAG: retrieval-augmented generation driven by a long-context memory model.

A memory model reads the whole context once, keeps a compact memory of it, and
writes clues (draft answers, key phrases, sub-questions) that steer retrieval;
a generator then answers from the retrieved passages.
"""

__version__ = "0.1.0"
