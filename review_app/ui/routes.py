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
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

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
