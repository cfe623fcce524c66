"""Any OpenAI-compatible chat endpoint as the generator (vLLM, llama.cpp, TGI, Ollama, OpenAI...).

Requests go to `POST {base_url}/chat/completions` with `"stream": true`; the reply is
read as server-sent events (`data: {...}` lines, ending with `data: [DONE]`), and a
server that answers with one JSON body instead is read as well. The API key is read
from an environment variable (`OPENAI_API_KEY` unless told otherwise), never from
the command line; local servers usually need none.

Failures before any text has arrived (connection refused, timeout, HTTP 408, 409,
429 and 5xx) are retried with exponential backoff (honouring `Retry-After`); a
stream that breaks off half-way is an error, not a retry, so no text is repeated.

Prompts that share a long prefix (`generate_with_prefix`, the corpus of corpus-in-context)
are sent whole every time; the server does its own prefix caching.
"""

from __future__ import annotations

import json
import os
import random
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

from .base import Generator, GeneratorError

RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})


class _Retryable(Exception):
    def __init__(self, message: str, wait: float | None = None):
        super().__init__(message)
        self.wait = wait


class UnauthorizedError(GeneratorError):
    """The endpoint refused our API key (HTTP 401 or 403)."""


class OpenAIGenerator(Generator):
    def __init__(
        self,
        base_url: str,
        model: str | None = None,
        *,
        api_key_env: str = "OPENAI_API_KEY",
        timeout: float = 120.0,
        max_retries: int = 3,
        backoff: float = 1.0,
        temperature: float = 0.0,
        context_window: int | None = None,
        tokenizer=None,
    ):
        if not base_url.startswith(("http://", "https://")):
            raise GeneratorError(f"endpoint {base_url!r} must start with http:// or https://")
        if not 0 < timeout < float("inf"):
            raise GeneratorError(f"timeout={timeout} must be a finite number of seconds above 0")
        for name, value in (("backoff", backoff), ("temperature", temperature)):
            if not 0 <= value < float("inf"):
                raise GeneratorError(f"{name}={value} must be a finite number, 0 or more")
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise GeneratorError(f"max_retries={max_retries!r} must be a whole number, 0 or more")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key_env = api_key_env
        self.timeout, self.max_retries, self.backoff = float(timeout), int(max_retries), float(backoff)
        self.temperature = temperature
        self.context_window = context_window
        self.tokenizer = tokenizer  # for counting tokens; an estimate without one
        self.name = f"{model or '?'}@{self.base_url}"

    # -- plumbing ---------------------------------------------------------------------------
    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream, application/json"}
        key = os.environ.get(self.api_key_env, "").strip()
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def _open(self, path: str, body: dict | None, timeout: float):
        data = json.dumps(body).encode("utf-8") if body is not None else None
        request = urllib.request.Request(
            self.base_url + path, data=data, headers=self._headers(), method="POST" if data else "GET"
        )
        try:
            return urllib.request.urlopen(request, timeout=timeout)
        except urllib.error.HTTPError as error:
            detail = _error_detail(error)
            if error.code in RETRY_STATUS:
                raise _Retryable(f"HTTP {error.code} {detail}", _retry_after(error.headers.get("Retry-After"))) from error
            if error.code in (401, 403):
                raise UnauthorizedError(
                    f"{self.base_url} refused the request (HTTP {error.code}: {detail}); set the API key in "
                    f"${self.api_key_env} (or choose another variable with --api-key-env)"
                ) from error
            if error.code == 404:
                raise GeneratorError(
                    f"{self.base_url}{path} was not found (HTTP 404: {detail}); an OpenAI-compatible base URL "
                    "usually ends in /v1, and --generator-model must name a model the server has"
                ) from error
            raise GeneratorError(f"{self.base_url}{path} answered HTTP {error.code}: {detail}") from error
        except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
            reason = getattr(error, "reason", error)
            raise _Retryable(f"cannot reach {self.base_url} ({reason})") from error

    def _with_retries(self, attempt_once: Callable[[], Any], started: Callable[[], bool]) -> Any:
        last = ""
        for attempt in range(self.max_retries + 1):
            try:
                return attempt_once()
            except _Retryable as error:
                if started():
                    raise GeneratorError(f"the reply from {self.base_url} broke off: {error}") from error
                last = str(error)
                if attempt == self.max_retries:
                    break
                wait = error.wait if error.wait is not None else self.backoff * 2**attempt
                time.sleep(wait * (1 + 0.1 * random.random()))
        tries = f"{self.max_retries + 1} attempt{'s' if self.max_retries else ''}"
        raise GeneratorError(f"{last}; gave up after {tries}. Is the server running at {self.base_url}?")

    # -- the interface ----------------------------------------------------------------------
    def check(self) -> None:
        """Fail now if the server cannot be reached; learn the model name if none was given."""

        def attempt():
            try:
                with self._open("/models", None, timeout=min(self.timeout, 10.0)) as response:
                    return json.loads(response.read().decode("utf-8"))
            except UnauthorizedError:
                raise  # a bad or missing key: say so now, not after the long work
            except GeneratorError:
                return None  # reachable; some servers have no /models
            except (ValueError, UnicodeDecodeError):
                return None

        listing = self._with_retries(attempt, started=lambda: False)
        if self.model is None:
            models = [item.get("id") for item in (listing or {}).get("data", []) if isinstance(item, dict)]
            if not models:
                raise GeneratorError(f"{self.base_url} lists no models; name one with --generator-model")
            self.model = models[0]
            self.name = f"{self.model}@{self.base_url}"

    def count_tokens(self, prompt: str, system: str | None = None) -> int:
        text = f"{system}\n{prompt}" if system else prompt
        if self.tokenizer is not None:
            return len(self.tokenizer(text, add_special_tokens=False)["input_ids"]) + 16
        return len(text) // 3 + 16  # a generous estimate: English runs about 4 characters a token

    def generate(
        self,
        prompt: str,
        *,
        system: str | None = None,
        max_new_tokens: int = 256,
        on_text: Callable[[str], None] | None = None,
    ) -> str:
        if self.model is None:
            self.check()
        messages = [{"role": "user", "content": prompt}]
        if system:
            messages.insert(0, {"role": "system", "content": system})
        body = {
            "model": self.model,
            "messages": messages,
            "max_tokens": max_new_tokens,
            "temperature": self.temperature,
            "stream": True,
        }
        pieces: list[str] = []

        def attempt() -> str:
            pieces.clear()
            with self._open("/chat/completions", body, timeout=self.timeout) as response:
                kind = response.headers.get("Content-Type", "")
                try:
                    if "text/event-stream" in kind:
                        for piece in _events(response):
                            pieces.append(piece)
                            if on_text is not None:
                                on_text(piece)
                    else:
                        text = _message_text(json.loads(response.read().decode("utf-8")))
                        pieces.append(text)
                        if on_text is not None and text:
                            on_text(text)
                except (TimeoutError, ConnectionError, OSError) as error:
                    raise _Retryable(f"reading the reply failed ({error})") from error
                except (ValueError, KeyError, IndexError, TypeError) as error:
                    raise GeneratorError(f"{self.base_url} sent a reply that is not a chat completion ({error})") from error
            return "".join(pieces)

        return self._with_retries(attempt, started=lambda: bool(pieces)).strip()

    def describe(self) -> dict:
        return {**super().describe(), "base_url": self.base_url, "model": self.model}


def _events(response) -> Iterator[str]:
    """Text pieces from a server-sent-events chat stream."""
    for raw in response:
        line = raw.decode("utf-8").strip()
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            return
        event = json.loads(data)
        if event.get("error"):
            raise GeneratorError(f"the endpoint reported an error: {event['error']}")
        for choice in event.get("choices", []):
            piece = (choice.get("delta") or {}).get("content") or ""
            if piece:
                yield piece


def _message_text(reply: dict) -> str:
    return reply["choices"][0]["message"]["content"] or ""


def _error_detail(error: urllib.error.HTTPError) -> str:
    try:
        body = error.read().decode("utf-8", "replace")[:300]
    except OSError:
        body = ""
    return " ".join((body or str(error.reason)).split())


def _retry_after(value: str | None) -> float | None:
    try:
        return max(0.0, min(float(value), 60.0)) if value is not None else None
    except ValueError:
        return None
