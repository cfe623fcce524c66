"""The evidence inspector: one page (HTML, a script and a style sheet shipped in `static/`, no
build step, nothing fetched from elsewhere) served at `/`, that uses only this server's API.

The page is static: it holds no corpus data, so it is served without the API key (it asks
for the key when the server wants one). Its Content-Security-Policy lets it load only its
own script and style and talk only to this server; the script puts every text that comes
from a document or a model into the page as text (`textContent`), never as HTML, so a
document holding `<script>` shows it and runs nothing.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

FILES = {"/": ("index.html", "text/html; charset=utf-8"),
         "/inspector.js": ("inspector.js", "text/javascript; charset=utf-8"),
         "/inspector.css": ("inspector.css", "text/css; charset=utf-8")}
CONTENT_SECURITY_POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob:; "
                           "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
HEADERS = {"Content-Security-Policy": CONTENT_SECURITY_POLICY, "X-Content-Type-Options": "nosniff",
           "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY", "Cache-Control": "no-cache"}


@cache
def page_file(name: str) -> bytes:
    """A file of the page, as shipped in the package."""
    return resources.files("memorag.serve").joinpath("static", name).read_bytes()


def inspector_routes() -> list[Route]:
    """`GET /` (the page) and its script and style sheet."""

    def serve_file(path: str, name: str, media_type: str) -> Route:
        async def endpoint(request: Request) -> Response:
            return Response(page_file(name), media_type=media_type, headers=HEADERS)

        return Route(path, endpoint, methods=["GET"], name=f"inspector:{name}")

    return [serve_file(path, name, media_type) for path, (name, media_type) in FILES.items()]
