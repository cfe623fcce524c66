"""Who may ask `memorag serve`, and how much they may send: checks made before any route runs.

A server on 127.0.0.1 is still reachable from every web page the user has open: a page
can POST a form (`text/plain`, no CORS preflight) to it, and DNS rebinding can point the
page's own hostname at 127.0.0.1 so that it reads the answers as well. `Guard` (an ASGI
middleware) therefore refuses, in this order:

- a `Host` the server does not answer to (403): the bound address, `localhost`,
  `127.0.0.1` and `[::1]`, plus `--allow-host`; this defeats DNS rebinding;
- an `Origin` that is not allowed (403): a browser names the page that sends a request;
  only the server's own pages may (the Origin is exactly the scheme and the `Host` the
  request came with, so a page on another port of the same machine may not), and the
  origins given with `--allow-origin`; requests without an Origin (curl, scripts, httpx)
  are not from a page and pass;
- without the API key, when one is set (401): `Authorization: Bearer KEY` on every route
  but `/health`;
- a POST whose body is not `application/json` (415): a page cannot send that cross-site
  without a preflight, which only an allowed origin is granted;
- a declared `Content-Length` over the limit (413, before a byte of the body is read); a
  chunked body is counted as it arrives and refused as soon as it passes the limit.

Every reply it lets through or makes (JSON, PNG, server-sent events, the page's files, its
own refusals and preflights) carries `X-Content-Type-Options: nosniff`, so a browser never
reads one as another type than it is served as.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
WILDCARD_ADDRESSES = ("0.0.0.0", "::", "")
# answered without the API key (the Host and Origin checks still hold): the health check, and the
# evidence inspector's page, script and style sheet, which hold no corpus data (`memorag.serve.inspector`)
OPEN_PATHS = ("/health", "/", "/inspector.js", "/inspector.css")
BODY_METHODS = ("POST", "PUT", "PATCH")
NOSNIFF = (b"x-content-type-options", b"nosniff")
API_KEY_ENV = "MEMORAG_SERVE_API_KEY"


class RequestRefused(Exception):
    """A request refused before or while its body is read; `status` is its HTTP status."""

    def __init__(self, status: int, message: str, kind: str):
        super().__init__(message)
        self.status = status
        self.kind = kind


def clip(text: str, limit: int = 60) -> str:
    """`text` cut to `limit` characters, saying how long it was (for echoing client input)."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


def is_loopback(host: str) -> bool:
    """Whether `host` (an address or `localhost`) is reachable from this machine only."""
    host = host.strip("[]").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def host_name(value: str) -> str:
    """The host of a `Host` header (`name`, `name:port`, `[v6]:port`), lower-case, without brackets."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value
    if value.count(":") == 1:
        value = value.split(":", 1)[0]
    return value.rstrip(".")


@dataclass(frozen=True)
class AccessPolicy:
    """The hosts, origins and key `Guard` allows, and the largest body it lets through."""

    hosts: frozenset[str]  # host names and addresses, lower-case, no brackets; "*" allows any
    own_hosts: frozenset[str]  # hosts under which the server's own origin (scheme and Host) may send
    origins: frozenset[str]  # exact origins, "scheme://host[:port]"; "*" allows any
    max_body_bytes: int
    api_key: str | None = None

    @classmethod
    def for_address(cls, bound: str, max_body_bytes: int, *, allow_hosts: Iterable[str] = (),
                    allow_origins: Iterable[str] = (), api_key: str | None = None) -> AccessPolicy:
        """The default allow-list for a server bound to `bound`, with the hosts and origins added."""
        defaults = set(LOOPBACK_NAMES)
        if bound.strip("[]") not in WILDCARD_ADDRESSES:
            defaults.add(bound.strip("[]").lower())
        hosts = defaults | {host_name(host) if host != "*" else "*" for host in allow_hosts}
        origins = {origin if origin == "*" else normalize_origin(origin) for origin in allow_origins}
        # with '*' any name could be an attacker's, rebound to this server: only the default names are its own
        own_hosts = defaults if "*" in hosts else hosts
        return cls(frozenset(hosts), frozenset(own_hosts), frozenset(origins), max_body_bytes, api_key or None)

    def host_allowed(self, header: str | None) -> bool:
        return "*" in self.hosts or (header is not None and host_name(header) in self.hosts)

    def origin_allowed(self, origin: str) -> bool:
        """Whether `origin` was given with --allow-origin (or '*' was)."""
        if "*" in self.origins:
            return True
        try:
            return normalize_origin(origin) in self.origins
        except ValueError:
            return False  # also "null": sandboxed frames and local files

    def own_origin(self, origin: str, scheme: str, host: str | None) -> bool:
        """Whether `origin` is exactly this server's own, as the request names it: its `scheme` (as
        the server sees it: behind a TLS proxy, the X-Forwarded-Proto uvicorn trusts) and its `Host`,
        port included, for a host the server answers to as its own (`own_hosts`)."""
        if host is None or host_name(host) not in self.own_hosts:
            return False
        try:
            return normalize_origin(origin) == normalize_origin(f"{scheme}://{host.strip()}")
        except ValueError:
            return False

    def key_matches(self, authorization: str | None) -> bool:
        if self.api_key is None:
            return True
        scheme, _, token = (authorization or "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), self.api_key.encode())


def normalize_origin(origin: str) -> str:
    """`scheme://host[:port]`, lower-case, as browsers send it; ValueError for anything else."""
    parts = urlsplit(origin.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/"):
        raise ValueError(f"{origin!r} is not an origin; give scheme://host[:port], e.g. http://localhost:3000")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    default_port = {"http": 80, "https": 443}[parts.scheme]
    port = f":{parts.port}" if parts.port not in (None, default_port) else ""
    return f"{parts.scheme}://{host.lower()}{port}"


def _headers(scope: Scope) -> dict[str, str]:
    return {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope.get("headers", [])}


async def send_error(send: Send, status: int, message: str, kind: str,
                     headers: Iterable[tuple[str, str]] = ()) -> None:
    """A JSON error response, `{"error": message, "type": kind}`."""
    body = json.dumps({"error": message, "type": kind}).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), NOSNIFF]
    raw += [(name.encode("latin-1"), value.encode("latin-1")) for name, value in headers]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


class Guard:
    """The ASGI middleware that applies an `AccessPolicy` to every HTTP request."""

    def __init__(self, app: ASGIApp, policy: AccessPolicy):
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        origin = headers.get("origin")
        try:
            self.check(scope, headers, origin)
        except RequestRefused as refused:
            extra = [("www-authenticate", "Bearer")] if refused.status == 401 else []
            await send_error(send, refused.status, str(refused), refused.kind, extra + self.cors(origin))
            return
        if scope["method"] == "OPTIONS" and origin is not None:  # a preflight from an allowed origin
            await self.preflight(send, origin)
            return
        await self.app(scope, self.counted(receive), self.with_headers(send, origin))

    def check(self, scope: Scope, headers: dict[str, str], origin: str | None) -> None:
        policy = self.policy
        if not policy.host_allowed(headers.get("host")):
            raise RequestRefused(403, f"this server does not answer to the host {clip(headers.get('host') or '(none)')!r}"
                                      "; its operator can allow it with --allow-host", "ForbiddenHost")
        own = policy.own_origin(origin, scope.get("scheme", "http"), headers.get("host")) if origin else False
        if origin is not None and not (own or policy.origin_allowed(origin)):
            raise RequestRefused(403, f"requests from the web page origin {clip(origin)!r} are not allowed (only "
                                      "this server's own pages are); its operator can allow it with --allow-origin",
                                 "ForbiddenOrigin")
        if scope["method"] == "OPTIONS":
            return
        if scope["path"] not in OPEN_PATHS and not policy.key_matches(headers.get("authorization")):
            raise RequestRefused(401, "this server needs its API key: send 'Authorization: Bearer KEY'",
                                 "Unauthorized")
        if scope["method"] in BODY_METHODS:
            media_type = headers.get("content-type", "").split(";")[0].strip().lower()
            if media_type != "application/json":
                raise RequestRefused(415, f"send the body as JSON with 'Content-Type: application/json', not "
                                          f"{clip(media_type or 'none', 40)!r}", "UnsupportedMediaType")
            declared = headers.get("content-length")
            if declared is not None:
                if not declared.strip().isdigit():
                    raise RequestRefused(400, f"Content-Length {clip(declared, 20)!r} is not a number",
                                         "InputError")
                if int(declared) > policy.max_body_bytes:
                    raise self.too_large(int(declared))

    def too_large(self, size: int, more_than: bool = False) -> RequestRefused:
        return RequestRefused(413, f"the request body has {'more than ' if more_than else ''}{size:,} bytes; this "
                                   f"server takes at most {self.policy.max_body_bytes:,} (--max-body-mb)",
                              "BodyTooLarge")

    def counted(self, receive: Receive) -> Receive:
        """`receive`, raising `RequestRefused` (413) as soon as the body passes the limit."""
        received = 0
        limit = self.policy.max_body_bytes

        async def receive_counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise self.too_large(limit, more_than=True)
            return message

        return receive_counted

    def cors(self, origin: str | None) -> list[tuple[str, str]]:
        """The CORS headers that let an allowed page read the response."""
        if origin is None or not self.policy.origin_allowed(origin):
            return []
        return [("access-control-allow-origin", origin), ("vary", "Origin")]

    def with_headers(self, send: Send, origin: str | None) -> Send:
        """`send`, adding to the reply's headers `nosniff` (unless it has its own) and the CORS headers."""
        extra = [(name.encode("latin-1"), value.encode("latin-1")) for name, value in self.cors(origin)]

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                if not any(name.lower() == NOSNIFF[0] for name, _ in headers):
                    headers.append(NOSNIFF)
                message = {**message, "headers": headers + extra}
            await send(message)

        return send_with_headers

    async def preflight(self, send: Send, origin: str) -> None:
        headers = [(b"access-control-allow-methods", b"GET, POST, DELETE"),
                   (b"access-control-allow-headers", b"content-type, authorization"),
                   (b"access-control-max-age", b"600"), (b"content-length", b"0"), NOSNIFF]
        headers += [(name.encode("latin-1"), value.encode("latin-1")) for name, value in self.cors(origin)]
        await send({"type": "http.response.start", "status": 204, "headers": headers})
        await send({"type": "http.response.body", "body": b""})
