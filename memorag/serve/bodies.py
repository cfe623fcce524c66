"""Request bodies of `memorag serve`: parsed, checked and turned into documents and queries
before any model work, so that bad input is a 400 and never a 500 after the model ran.

Refused here: a body that is not a JSON object, nested deeper than the limit (a
100,000-deep list would otherwise overflow the parser's recursion), strings that are not
valid text (a lone surrogate such as `"\\ud800"` decodes from JSON but cannot be encoded,
tokenized or saved), fields of the wrong type, queries over the length limit. Echoed
values are cut short (`guard.clip`).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from memorag.pipeline import InputError
from memorag.retrieval.chunking import Document
from memorag.serve.guard import clip
from memorag.serve.limits import ServeLimits


def parse_body(raw: bytes, limits: ServeLimits) -> dict[str, Any]:
    """The JSON object in `raw`, checked for depth and valid text."""
    if not raw.strip():
        raise InputError("the request body is empty; send a JSON object")
    try:
        body = json.loads(raw)
    except RecursionError as error:
        raise InputError(f"the JSON body is nested too deeply; at most {limits.max_json_depth} levels") from error
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise InputError(f"the request body is not valid JSON ({clip(str(error), 120)}); send a JSON object") from error
    if not isinstance(body, dict):
        raise InputError(f"the request body is a JSON {type(body).__name__}; send a JSON object")
    check_values(body, limits.max_json_depth)
    return body


def check_values(body: Any, max_depth: int) -> None:
    """Refuse nesting deeper than `max_depth` and strings (keys too) that are not valid Unicode text."""
    stack: list[tuple[Any, int, str]] = [(body, 1, "body")]
    while stack:
        value, depth, where = stack.pop()
        if isinstance(value, str):
            check_text(value, where)
        elif isinstance(value, dict | list):
            if depth > max_depth:
                raise InputError(f"the JSON body is nested too deeply; at most {max_depth} levels")
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:
                if isinstance(key, str):
                    check_text(key, f"a key of {where}")
                stack.append((item, depth + 1, f"{where}[{clip(str(key), 30)!r}]"
                              if isinstance(key, str) else f"{where}[{key}]"))


def check_text(text: str, where: str) -> None:
    """Refuse text with a lone surrogate (valid in JSON escapes, not in Unicode text)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise InputError(f"{where} is not valid text: a lone surrogate {text[error.start]!r} at character "
                         f"{error.start:,}; send UTF-8 text") from None


_JSON_TYPES = {str: "a string", bool: "true or false", list: "a list", dict: "an object"}


def field(body: dict[str, Any], name: str, kind: type, default: Any = None, required: bool = False) -> Any:
    """`body[name]`, checked to be of `kind` (None/absent gives `default`)."""
    value = body.get(name)
    if value is None:
        if required:
            raise InputError(f"the request needs {name!r} ({_JSON_TYPES[kind]})")
        return default
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise InputError(f"{name!r} must be {_JSON_TYPES[kind]}, not {type(value).__name__} "
                         f"{json.dumps(value)[:40]}")
    return value


def query_int(params: Mapping[str, str], name: str, default: int | None = None, required: bool = False) -> int | None:
    """The whole number `name` of a URL's query string (absent gives `default`)."""
    value = params.get(name)
    if value is None or value == "":
        if required:
            raise InputError(f"the request needs ?{name}= (a whole number)")
        return default
    if not value.isdigit() or len(value) > 12:
        raise InputError(f"?{name}={clip(value, 20)!r} is not a whole number of at most 12 digits")
    return int(value)


def query_from(body: dict[str, Any], limits: ServeLimits) -> str:
    """The request's query, refused when empty or longer than `max_query_chars`."""
    query = field(body, "query", str, required=True)
    if not query.strip():
        raise InputError("the query is empty; ask something")
    if len(query) > limits.max_query_chars:
        raise InputError(f"the query has {len(query):,} characters; this server takes at most "
                         f"{limits.max_query_chars:,} (--max-query-chars)")
    return query


def documents_from(body: dict[str, Any]) -> list[Document] | list[Upload]:
    """The documents of a memorize body: `text` (one document), `documents` ({id, title, text}),
    or `files` ({name, base64}: PDF, Word, HTML, Markdown or text files), returned as uploads
    still to be read (`memorag.serve.uploads`, off the event loop)."""
    text = field(body, "text", str)
    items = field(body, "documents", list)
    files = field(body, "files", list)
    if sum(value is not None for value in (text, items, files)) != 1:
        raise InputError("send either 'text' (a string), 'documents' (a list of {id, title, text}) or 'files' "
                         "(a list of {name, base64})")
    if files is not None:
        return uploads_from(files)
    if text is not None:
        if not text.strip():
            raise InputError("the text is empty; give a text with some content")
        from memorag.pipeline import as_documents

        return as_documents(text)
    if not items:
        raise InputError("nothing to memorize: the list of documents is empty")
    documents = []
    for position, item in enumerate(items):
        if not isinstance(item, dict):
            raise InputError(f"documents[{position}] must be an object with 'id' and 'text'")
        doc_id = field(item, "id", str, required=True)
        text = field(item, "text", str, required=True)
        if not doc_id.strip():
            raise InputError(f"documents[{position}] has an empty id")
        if not text.strip():
            raise InputError(f"document {clip(doc_id)!r} is empty; give a text with some content")
        documents.append(Document(id=doc_id, title=field(item, "title", str, default=""), text=text))
    return documents


@dataclass(frozen=True)
class Upload:
    """A file of a memorize body, its name checked, its bytes still in base64 (decoded when read)."""

    name: str
    base64: str
    position: int


def uploads_from(items: list[Any]) -> list[Upload]:
    """The files ({name, base64}) of a memorize body, their names and types checked."""
    if not items:
        raise InputError("nothing to memorize: the list of files is empty")
    uploads = []
    for position, item in enumerate(items):
        if not isinstance(item, dict):
            raise InputError(f"files[{position}] must be an object with 'name' and 'base64'")
        name = field(item, "name", str, required=True)
        if not name.strip() or "/" in name or "\\" in name:
            raise InputError(f"files[{position}] needs a file name without folders, not {clip(name)!r}")
        uploads.append(Upload(name, field(item, "base64", str, required=True), position))
    return uploads


class UnreadableFilesError(InputError):
    """Uploaded files that cannot be read: `files` names each with its problem and fix (the reply's
    `files`), given as (file name, message) pairs."""

    def __init__(self, problems: list[tuple[str, str]]):
        self.files = [{"name": name, "error": message} for name, message in problems]
        messages = [message for _, message in problems]
        super().__init__(messages[0] if len(messages) == 1 else
                         f"{len(messages)} files cannot be read: " + " | ".join(messages))


def originals_from(body: dict[str, Any]) -> dict[str, bytes]:
    """The PDF files of a memorize body (read by `memorag.serve.uploads`), by document id (their
    file name), to keep for showing their pages (`memorag.serve.originals`)."""
    from memorag.serve.originals import is_kept

    items = field(body, "files", list) or []
    return {item["name"]: base64.b64decode(item["base64"]) for item in items if is_kept(item["name"])}
