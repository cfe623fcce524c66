"""Any OpenAI-compatible chat endpoint as the generator (vLLM, llama.cpp, TGI, Ollama, OpenAI...).

The `openai` SDK does the talking: `POST {base_url}/chat/completions` with `"stream": true`,
reading server-sent events, retrying failures before any reply (connection refused, timeout,
HTTP 408, 409, 429 and 5xx) with exponential backoff that honours `Retry-After`, at most
`max_retries` times. A stream that breaks off half-way is an error, not a retry, so no text
is repeated. What this module adds: a server that answers with one JSON body instead of a
stream is read as well, the API key is read from an environment variable at each request
(`OPENAI_API_KEY` unless told otherwise; never the command line; local servers usually need
none, and then no Authorization header is sent), and every failure becomes a
`GeneratorError` that says what to do.

Prompts that share a long prefix (`generate_with_prefix`, the corpus of corpus-in-context)
are sent whole every time; the server does its own prefix caching.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .base import Generator, GeneratorError

if TYPE_CHECKING:
    import openai

# Statuses the SDK retries (it decides; this names them in the message when it gives up).
RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
CHECK_TIMEOUT = 10.0  # seconds `check` waits at most for the model listing


class UnauthorizedError(GeneratorError):
    """The endpoint refused our API key (HTTP 401 or 403)."""


class OpenAIGenerator(Generator):
    serves_concurrently = True

    def __init__(
        self,
        base_url: str,
        model: str | None = None,
        *,
        api_key_env: str = "OPENAI_API_KEY",
        timeout: float = 120.0,
        max_retries: int = 3,
        temperature: float = 0.0,
        context_window: int | None = None,
        tokenizer=None,
    ):
        if not base_url.startswith(("http://", "https://")):
            raise GeneratorError(f"endpoint {base_url!r} must start with http:// or https://")
        if not 0 < timeout < float("inf"):
            raise GeneratorError(f"timeout={timeout} must be a finite number of seconds above 0")
        if not 0 <= temperature < float("inf"):
            raise GeneratorError(f"temperature={temperature} must be a finite number, 0 or more")
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise GeneratorError(f"max_retries={max_retries!r} must be a whole number, 0 or more")
        import openai  # 1.4 s to import: only when an endpoint is used

        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key_env = api_key_env
        self.timeout, self.max_retries = float(timeout), int(max_retries)
        self.temperature = temperature
        self.context_window = context_window
        self.tokenizer = tokenizer  # for counting tokens; an estimate without one
        self.name = f"{model or '?'}@{self.base_url}"
        # the key goes in each request's headers (`_headers`), read then; the client holds none
        self._client = openai.OpenAI(base_url=self.base_url, api_key=lambda: "", timeout=self.timeout,
                                     max_retries=self.max_retries)

    def _headers(self) -> dict[str, Any]:
        import openai

        key = os.environ.get(self.api_key_env, "").strip()
        return {"Authorization": f"Bearer {key}" if key else openai.Omit()}

    # -- the interface ----------------------------------------------------------------------
    def check(self) -> None:
        """Fail now if the server cannot be reached; learn the model name if none was given."""
        import openai

        try:
            listing = self._client.models.list(extra_headers=self._headers(), timeout=min(self.timeout, CHECK_TIMEOUT))
            models = [item.id for item in listing.data]
        except openai.APIError as error:
            status = getattr(error, "status_code", None)
            if isinstance(error, openai.APIConnectionError) or status in (401, 403) or status in RETRY_STATUS:
                raise self._explain(error, "/models") from error  # no server, a bad key, an overload: say so now
            models = []  # reachable; some servers have no /models
        except (ValueError, TypeError):
            models = []  # reachable; it lists its models its own way
        if self.model is None:
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
        import openai

        if self.model is None:
            self.check()
        messages = [{"role": "user", "content": prompt}]
        if system:
            messages.insert(0, {"role": "system", "content": system})
        pieces: list[str] = []
        try:
            with self._client.chat.completions.with_streaming_response.create(
                model=self.model, messages=messages, max_tokens=max_new_tokens, temperature=self.temperature,
                stream=True, extra_headers=self._headers(),
            ) as response:
                if "text/event-stream" in response.headers.get("content-type", ""):
                    self._read_stream(response.parse(), pieces, on_text)
                else:
                    pieces.append(self._plain_reply(response))
                    if on_text is not None and pieces[0]:
                        on_text(pieces[0])
        except openai.APIError as error:
            raise self._explain(error, "/chat/completions") from error
        return "".join(pieces).strip()

    def describe(self) -> dict:
        return {**super().describe(), "base_url": self.base_url, "model": self.model}

    # -- reading and explaining ---------------------------------------------------------------
    def _read_stream(self, chunks, pieces: list[str], on_text: Callable[[str], None] | None) -> None:
        """Append each piece of a chat stream to `pieces`, handing it to `on_text` as it comes;
        an error after the first piece is no retry (the text would repeat)."""
        import openai

        events = iter(chunks)
        while True:
            try:
                chunk = next(events)
            except StopIteration:
                return
            except openai.APIConnectionError as error:  # the connection broke off (reset, read timeout)
                raise GeneratorError(f"the reply from {self.base_url} broke off ({error.__cause__ or error})") from error
            except openai.APIError as error:  # an error event inside the stream
                raise GeneratorError(f"the endpoint reported an error: {error}") from error
            for choice in chunk.choices:
                piece = (choice.delta.content if choice.delta is not None else None) or ""
                if piece:
                    pieces.append(piece)
                    if on_text is not None:
                        on_text(piece)

    def _plain_reply(self, response) -> str:
        try:
            return response.json()["choices"][0]["message"]["content"] or ""
        except (ValueError, KeyError, IndexError, TypeError) as error:
            raise GeneratorError(f"{self.base_url} sent a reply that is not a chat completion ({error!r})") from error

    def _explain(self, error: openai.APIError, path: str) -> GeneratorError:
        """The SDK's error as a `GeneratorError` saying what to do."""
        import openai

        tries = f"{self.max_retries + 1} attempt{'s' if self.max_retries else ''}"
        gave_up = f"gave up after {tries}. Is the server running at {self.base_url}?"
        if isinstance(error, openai.APITimeoutError):
            return GeneratorError(f"{self.base_url} did not answer within {self.timeout:g} s; {gave_up}")
        if isinstance(error, openai.APIConnectionError):
            return GeneratorError(f"cannot reach {self.base_url} ({error.__cause__ or error}); {gave_up}")
        if not isinstance(error, openai.APIStatusError):
            return GeneratorError(f"{self.base_url} failed: {error}")
        status, detail = error.status_code, _detail(error)
        if status in (401, 403):
            return UnauthorizedError(
                f"{self.base_url} refused the request (HTTP {status}: {detail}); set the API key in "
                f"${self.api_key_env} (or choose another variable with --api-key-env)"
            )
        if status == 404:
            return GeneratorError(
                f"{self.base_url}{path} was not found (HTTP 404: {detail}); an OpenAI-compatible base URL "
                "usually ends in /v1, and --generator-model must name a model the server has"
            )
        if status in RETRY_STATUS:
            return GeneratorError(f"HTTP {status} {detail}; {gave_up}")
        return GeneratorError(f"{self.base_url}{path} answered HTTP {status}: {detail}")


def _detail(error: openai.APIStatusError) -> str:
    """The start of the server's error body, on one line (the status's own text without one)."""
    try:
        body = error.response.text[:300]
    except Exception:  # a streamed body that cannot be read any more
        body = ""
    return " ".join((body or error.message).split())
