"""HTTP routes served beside the Streamlit app: they set and clear the session cookie.

A Streamlit script cannot set response headers, and an HttpOnly cookie can only come from one, so
``medrev app`` serves these routes on Streamlit's own server (``medrev_asgi.py``):

- ``GET /_medrev/session?nonce=N&next=/path``: trades the one-time nonce the sign-in page created
  for a signed session token, sets it as ``medrev_session`` (HttpOnly, SameSite=Strict, Secure
  behind TLS, Max-Age = the session's remaining life) and redirects back to ``next``.
- ``GET /_medrev/signout?next=/path``: revokes the session the cookie names, clears the cookie and
  redirects to ``next`` (home by default; Streamlit's ``/auth/logout`` after an identity-provider
  sign-in).

Both refuse requests another site started (``Sec-Fetch-Site``), never cache, and only redirect to
paths on this server. Any replica can answer: the session lives in the database.

``ServerRoot`` tells the browser where the server's own routes are. Every page of the app has an
address of its own (``/review``, ``/lead_flags``) served with the same HTML, and Streamlit's frontend,
not knowing which part of that address is the app's, first tries ``/review/_stcore/health`` and
``/review/_stcore/host-config`` (404s in the console on every load) before the app's root. The
frontend reads the server's address from ``window.__streamlit.BACKEND_BASE_URL`` when the page
defines it, so the middleware defines it in that HTML, and the frontend asks the root first.
"""

from __future__ import annotations

import json

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from review_app.db.connect import get_engine
from review_app.services import sessions

PREFIX = "/_medrev"
_NO_STORE = {"Cache-Control": "no-store"}


def _base() -> str:
    from streamlit import config

    base = (config.get_option("server.baseUrlPath") or "").strip("/")
    return f"/{base}" if base else ""


def _safe_next(value: str | None) -> str:
    """``value`` if it is a path on this server, else the app's home (no open redirects)."""
    home = _base() + "/"
    if not value or not value.startswith("/") or value.startswith("//") or "\\" in value or "\n" in value:
        return home
    return value


def _foreign(request: Request) -> bool:
    """Started by another site (a link or form elsewhere), as modern browsers report it."""
    return request.headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none")


def _secure(request: Request) -> bool:
    forwarded = request.headers.get("x-forwarded-proto", "").split(",")[0].strip().lower()
    return request.url.scheme == "https" or forwarded == "https"


async def establish(request: Request) -> Response:
    if _foreign(request):
        return PlainTextResponse("Sign in from the app's own page.", status_code=403, headers=_NO_STORE)
    nonce = request.query_params.get("nonce", "")
    redeemed = await run_in_threadpool(sessions.redeem, get_engine(), nonce)
    response = RedirectResponse(_safe_next(request.query_params.get("next")), status_code=303, headers=_NO_STORE)
    if redeemed is not None:
        token, max_age = redeemed
        response.set_cookie(
            sessions.COOKIE_NAME,
            token,
            max_age=max_age,
            path=_base() + "/",
            secure=_secure(request),
            httponly=True,
            samesite="strict",
        )
    return response


async def sign_out(request: Request) -> Response:
    if _foreign(request):
        return PlainTextResponse("Sign out from the app's own page.", status_code=403, headers=_NO_STORE)
    token = request.cookies.get(sessions.COOKIE_NAME)
    if token:
        await run_in_threadpool(sessions.revoke, get_engine(), token)
    response = RedirectResponse(_safe_next(request.query_params.get("next")), status_code=303, headers=_NO_STORE)
    response.delete_cookie(
        sessions.COOKIE_NAME, path=_base() + "/", secure=_secure(request), httponly=True, samesite="strict"
    )
    return response


def routes() -> list[Route]:
    base = _base()
    return [
        Route(f"{base}{PREFIX}/session", establish, methods=["GET"]),
        Route(f"{base}{PREFIX}/signout", sign_out, methods=["GET"]),
    ]


def root_script() -> bytes:
    """The script that gives Streamlit's frontend the server's root address (this app's base path)."""
    root = json.dumps(_base() + "/").replace("<", "\\u003c")  # no "</script>" can end it early
    return (
        b"<script>window.__streamlit=Object.assign({},window.__streamlit,"
        b"{BACKEND_BASE_URL:new URL(" + root.encode() + b",window.location.href).href});</script>"
    )


class ServerRoot:
    """ASGI middleware: the app's HTML pages define the server root for Streamlit's frontend (see above).

    Only a browser's load of a page is touched: a GET that accepts HTML, of the app's root or of
    one path segment under it, where the pages are (files, media, components and the server's
    routes lie deeper). Its request goes on without ``Accept-Encoding`` (the page is a few kB, and
    this way its body arrives as text) or validators (the changed page has no ETag of its own),
    and an HTML answer gets the script at the end of its ``<head>``: an inline script runs as it is
    parsed, before Streamlit's module scripts (deferred). Everything else passes as it is.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not _page_load(scope):
            await self.app(scope, receive, send)
            return
        dropped = (b"accept-encoding", b"if-none-match", b"if-modified-since")
        scope = {**scope, "headers": [(k, v) for k, v in scope["headers"] if k.lower() not in dropped]}
        start: Message | None = None
        body: list[bytes] = []

        async def buffered(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                headers = dict((k.lower(), v) for k, v in message.get("headers", []))
                if headers.get(b"content-type", b"").startswith(b"text/html") and b"content-encoding" not in headers:
                    start = message
                    return
                await send(message)
                return
            if start is None or message["type"] != "http.response.body":
                await send(message)
                return
            body.append(message.get("body", b""))
            if message.get("more_body", False):
                return
            page = b"".join(body).replace(b"</head>", root_script() + b"</head>", 1)
            skipped = (b"content-length", b"etag", b"last-modified")
            headers = [(k, v) for k, v in start.get("headers", []) if k.lower() not in skipped]
            await send({**start, "headers": [*headers, (b"content-length", str(len(page)).encode())]})
            await send({"type": "http.response.body", "body": page, "more_body": False})

        await self.app(scope, receive, buffered)


def _page_load(scope: Scope) -> bool:
    """A browser loading one of the app's pages (``/``, ``/review``), not anything the page then fetches."""
    if scope["type"] != "http" or scope["method"] != "GET":
        return False
    base, path = _base(), scope["path"]
    if not path.startswith(base + "/") or "/" in path[len(base) + 1 :]:
        return False
    accept = next((v for k, v in scope.get("headers", []) if k.lower() == b"accept"), b"")
    return b"text/html" in accept
