"""Clue-SFT data the way the paper made it: ask a strong LLM for answer clues, keep the good ones.

Input: JSONL rows `{"context": ..., "question": ..., "answer": ...}` (`answer` may be a
list; an optional `id` is carried over). For each row an OpenAI-compatible chat
endpoint (`POST {base_url}/chat/completions`) is asked, with the prompts of
`memorag.prompts`, for passages of the context that bridge the question and the
answer. The reply is split into clues and filtered:

- a reply that is empty, or longer than `max_reply_chars`, is dropped;
- a line that echoes the prompt (a `Question:` / `Answer:` / `Text:` / `Clues:`
  label, the rules, or the question itself) is dropped;
- a clue longer than `max_clue_words` words is dropped;
- a clue that is not grounded in the context is dropped: its normalised text must
  occur in the context, or `min_grounding` of its word trigrams must;
- a row left with no clue is dropped.

Kept rows become SFT samples (`memorag.data.sft`): `{"context", "instruction",
"target", "task": "clues", "id", "question", "answer"}`, the target being the clues,
one per line. The output JSONL is written atomically (a temporary file renamed at the
end), in input order. Requests run in a thread pool, with a timeout and retries with
exponential backoff on timeouts, connection errors, 408/409/429 and 5xx replies.
"""

from __future__ import annotations

import json
import os
import random
import re
import tempfile
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memorag.prompts import CLUE_BUILDER_PROMPT, CLUE_BUILDER_SYSTEM, CLUE_INSTRUCTION

RETRY_STATUS = frozenset({408, 409, 429})
_LABEL = re.compile(r"^(question|answer|text|context|clues?|rules?)\s*:", re.IGNORECASE)
_BULLET = re.compile(r"^\s*(?:[-*\u2022]+|\(?\d{1,2}[.):])\s*")
_WORD = re.compile(r"\w+", re.UNICODE)


class EndpointError(RuntimeError):
    """The endpoint refused the request, or kept failing after every retry."""


@dataclass(frozen=True)
class ChatEndpoint:
    """An OpenAI-compatible chat-completions endpoint."""

    base_url: str
    model: str
    api_key: str | None = None
    timeout: float = 120.0
    max_retries: int = 5
    backoff: float = 1.0  # seconds before the first retry; doubles each time (plus jitter)
    temperature: float = 0.0
    max_tokens: int = 512

    def complete(self, messages: list[dict[str, str]]) -> str:
        url = self.base_url.rstrip("/") + "/chat/completions"
        body = json.dumps({"model": self.model, "messages": messages, "temperature": self.temperature,
                           "max_tokens": self.max_tokens}).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        last = "no attempt"
        for attempt in range(self.max_retries + 1):
            wait = None
            try:
                request = urllib.request.Request(url, data=body, headers=headers, method="POST")
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    reply = json.loads(response.read().decode("utf-8"))
                content = reply["choices"][0]["message"]["content"]
                if not isinstance(content, str):
                    raise TypeError("the message content is not text")
                return content
            except urllib.error.HTTPError as error:
                detail = error.read().decode("utf-8", errors="replace")[:300]
                if error.code not in RETRY_STATUS and error.code < 500:
                    raise EndpointError(f"{url} answered HTTP {error.code}: {detail}") from error
                last = f"HTTP {error.code}: {detail}"
                wait = _retry_after(error.headers.get("Retry-After") if error.headers else None)
            except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as error:
                last = f"{type(error).__name__}: {error}"
            except (json.JSONDecodeError, UnicodeDecodeError, KeyError, IndexError, TypeError) as error:
                last = f"a malformed reply ({type(error).__name__}: {error})"
            if attempt < self.max_retries:
                time.sleep(wait if wait is not None else self.backoff * 2**attempt * (1 + random.random() / 4))
        raise EndpointError(f"{url} failed {self.max_retries + 1} times; last error: {last}")


def _retry_after(value: str | None) -> float | None:
    try:
        return min(float(value), 300.0) if value else None
    except ValueError:
        return None


@dataclass(frozen=True)
class ClueFilter:
    max_clues: int = 5
    max_clue_words: int = 60
    max_reply_chars: int = 4000
    min_grounding: float = 0.8


def normalise(text: str) -> str:
    return " ".join(_WORD.findall(text.lower()))


def _trigrams(words: list[str]) -> set[tuple[str, ...]]:
    return {tuple(words[i : i + 3]) for i in range(len(words) - 2)}


class Context:
    """A context prepared for grounding checks (normalised text and word trigrams)."""

    def __init__(self, text: str) -> None:
        self.normalised = normalise(text)
        words = self.normalised.split()
        self.words = set(words)
        self.trigrams = _trigrams(words)

    def grounds(self, clue: str, min_grounding: float) -> bool:
        text = normalise(clue)
        if not text:
            return False
        if f" {text} " in f" {self.normalised} ":
            return True
        words = text.split()
        if len(words) < 3:
            return all(word in self.words for word in words)
        grams = _trigrams(words)
        return sum(gram in self.trigrams for gram in grams) / len(grams) >= min_grounding


def extract_clues(reply: str, context: Context, question: str, rules: ClueFilter) -> tuple[list[str], Counter]:
    """The good clues of a reply, and a count of why lines were dropped."""
    dropped: Counter = Counter()
    if not reply.strip():
        dropped["empty reply"] += 1
        return [], dropped
    if len(reply) > rules.max_reply_chars:
        dropped["reply too long"] += 1
        return [], dropped
    question_norm = normalise(question)
    instruction_lines = {normalise(line) for line in CLUE_BUILDER_PROMPT["en"].splitlines() if line.strip()}
    clues: list[str] = []
    for line in reply.splitlines():
        clue = _BULLET.sub("", line).strip().strip('"\u201c\u201d\'').strip()
        if not clue:
            continue
        clue_norm = normalise(clue)
        if _LABEL.match(clue) or clue_norm == question_norm or clue_norm in instruction_lines or not clue_norm:
            dropped["echo of the prompt"] += 1
        elif len(clue_norm.split()) > rules.max_clue_words:
            dropped["clue too long"] += 1
        elif not context.grounds(clue, rules.min_grounding):
            dropped["not in the context"] += 1
        elif clue_norm in (normalise(c) for c in clues):
            dropped["duplicate"] += 1
        else:
            clues.append(clue)
    if len(clues) > rules.max_clues:
        dropped["beyond max_clues"] += len(clues) - rules.max_clues
        clues = clues[: rules.max_clues]
    return clues, dropped


def read_rows(path: str | Path) -> Iterator[dict[str, Any]]:
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            row = json.loads(line)
            for name in ("context", "question", "answer"):
                if name not in row:
                    raise ValueError(f"{path}:{number}: a row needs context, question and answer (missing {name!r})")
            yield row


def _answer_text(answer: Any) -> str:
    if isinstance(answer, list | tuple):
        return "; ".join(str(a) for a in answer)
    return str(answer)


def build_sample(row: dict[str, Any], endpoint: ChatEndpoint, rules: ClueFilter,
                 max_context_chars: int | None = None, language: str = "en") -> tuple[dict[str, Any] | None, Counter]:
    """One SFT sample from one (context, question, answer) row, or None with the reasons."""
    context, question, answer = str(row["context"]), str(row["question"]), _answer_text(row["answer"])
    shown = context if max_context_chars is None else context[:max_context_chars]
    messages = [
        {"role": "system", "content": CLUE_BUILDER_SYSTEM[language]},
        {"role": "user", "content": CLUE_BUILDER_PROMPT[language].format(
            context=shown, question=question, answer=answer, max_clues=rules.max_clues,
            max_words=rules.max_clue_words)},
    ]
    try:
        reply = endpoint.complete(messages)
    except EndpointError:
        return None, Counter({"endpoint error": 1})
    clues, dropped = extract_clues(reply, Context(context), question, rules)
    if not clues:
        dropped["row without a good clue"] += 1
        return None, dropped
    sample = {
        "context": context,
        "instruction": CLUE_INSTRUCTION[language].format(question=question),
        "target": "\n".join(clues),
        "task": "clues",
        "question": question,
        "answer": row["answer"],
    }
    if "id" in row:
        sample["id"] = row["id"]
    return sample, dropped


def _chunks(rows: Iterable[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    chunk: list[dict[str, Any]] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def build_clue_data(rows: Iterable[dict[str, Any]], output: str | Path, endpoint: ChatEndpoint,
                    rules: ClueFilter = ClueFilter(), workers: int = 4, max_context_chars: int | None = None,
                    language: str = "en") -> dict[str, Any]:
    """Write the SFT JSONL for `rows` to `output` atomically; returns counts (kept, dropped by reason)."""
    target = Path(output)
    target.parent.mkdir(parents=True, exist_ok=True)
    stats: Counter = Counter()
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle, ThreadPoolExecutor(max_workers=max(workers, 1)) as pool:
            for chunk in _chunks(rows, 4 * max(workers, 1)):  # bounded: contexts can be large
                results = pool.map(lambda row: build_sample(row, endpoint, rules, max_context_chars, language), chunk)
                for sample, dropped in results:
                    stats["rows"] += 1
                    stats.update(dropped)
                    if sample is not None:
                        stats["kept"] += 1
                        handle.write(json.dumps(sample, ensure_ascii=False) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, target)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    return dict(stats)
