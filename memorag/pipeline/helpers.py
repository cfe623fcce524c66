"""Small shared pieces of the pipeline: model labels, model arguments, documents."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence

from memorag.documents import DocumentReadError, ReadOptions, read_paths
from memorag.pipeline.types import InputError
from memorag.retrieval.chunking import Document


def label_lm(name: str | None) -> str:
    from memorag.runtime.embedded import EMBEDDED_LM, is_embedded_lm

    return EMBEDDED_LM if is_embedded_lm(name) else str(name)


def label_embedder(name: str | None) -> str:
    from memorag.runtime.embedded import EMBEDDED_EMBEDDER, is_embedded_embedder

    return EMBEDDED_EMBEDDER if is_embedded_embedder(name) else str(name)


def split_model_args(overrides: dict, memory_model, embedder, generator) -> tuple:
    """`memory_model`, `embedder` and `generator` take a name (a setting, moved into
    `overrides`) or a ready object (used as it is)."""
    named = {"memory_model": memory_model, "embedder": embedder, "generator": generator}
    objects = []
    for key, value in named.items():
        if isinstance(value, str | os.PathLike):
            overrides[key] = os.fspath(value)
            value = None
        objects.append(value)
    return tuple(objects)


def document_sha256(document: Document) -> str:
    return hashlib.sha256(json.dumps([document.title, document.text], ensure_ascii=False).encode()).hexdigest()


def read_inputs(items: object, options: ReadOptions | None = None) -> tuple[list[Document], list[DocumentReadError]]:
    """Documents from what `memorize` was given (see `as_documents`), files and folders read first,
    before any model work: the documents, in order, and one problem per file that could not be
    read. Nothing readable at all raises the first problem."""
    options = options or ReadOptions()
    many = not isinstance(items, str | Document | os.PathLike) and isinstance(items, Sequence | Iterable) \
        and not isinstance(items, Mapping | bytes | bytearray | memoryview)
    items = list(items) if many else [items]
    documents: list[Document] = []
    problems: list[DocumentReadError] = []
    for position, item in enumerate(items):
        if isinstance(item, os.PathLike):
            result = read_paths([item], options)
            documents += result.documents
            problems += result.problems
        elif many:
            documents.append(_as_document(item, position))
        else:
            documents += as_documents(item)
    if not documents and problems:
        raise problems[0]
    if not documents:
        raise InputError("nothing to memorize: the list of documents is empty")
    return documents, problems


def as_documents(text_or_documents: str | Document | Sequence[str | Document]) -> list[Document]:
    """Documents from a text, a `Document`, or a list of either (a text's id is a hash of it)."""
    _check_not_bytes(text_or_documents, "memorize() got")
    if isinstance(text_or_documents, str | Document):
        items = [text_or_documents]
    elif isinstance(text_or_documents, Sequence | Iterable) and not isinstance(text_or_documents, Mapping):
        items = list(text_or_documents)
    else:
        raise InputError(f"memorize() takes a text, a Document or a list of them, not "
                         f"{describe_type(text_or_documents)}")
    if not items:
        raise InputError("nothing to memorize: the list of documents is empty")
    return [_as_document(item, position) for position, item in enumerate(items)]


def _as_document(item: object, position: int) -> Document:
    """Item `position` of what `memorize` was given, as a Document (a text's id is a hash of it)."""
    _check_not_bytes(item, f"item {position} is")
    if isinstance(item, str):
        item = Document(id=f"doc-{hashlib.sha256(item.encode()).hexdigest()[:12]}", text=item)
    if not isinstance(item, Document):
        raise InputError(f"item {position} is {describe_type(item)}; give texts (str), Document objects or "
                         "paths (pathlib.Path) of files and folders")
    if not isinstance(item.text, str):
        _check_not_bytes(item.text, f"document {item.id!r} has text that is")
        raise InputError(f"document {item.id!r} has text that is {describe_type(item.text)}; give a str")
    if not item.text.strip():
        raise InputError(f"document {item.id!r} is empty; give a text with some content")
    return item


def describe_type(value: object) -> str:
    """`None`, `a str`, `an int`: what a refused argument is, for messages."""
    name = type(value).__name__
    return "None" if value is None else f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


def _check_not_bytes(value: object, what: str) -> None:
    if isinstance(value, bytes | bytearray | memoryview):
        raise InputError(f"{what} bytes, not text; decode it first, e.g. data.decode('utf-8')")
