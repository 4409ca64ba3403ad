"""The session-cookie routes served beside the app: cookie attributes, one-time nonces, no open redirects."""

from __future__ import annotations

import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient

from review_app.services import accounts, sessions
from review_app.ui.routes import routes


@pytest.fixture
def client(demo_db):
    return TestClient(Starlette(routes=routes()), base_url="http://testserver", follow_redirects=False)


def _nonce(engine, username: str = "rev01") -> str:
    return sessions.start(engine, accounts.get_user(engine, username).id)[1]


def test_the_nonce_buys_an_httponly_strict_cookie_once(client, demo_db):
    nonce = _nonce(demo_db)
    response = client.get("/_medrev/session", params={"nonce": nonce, "next": "/review?task=4"})
    assert response.status_code == 303 and response.headers["location"] == "/review?task=4"
    cookie = response.headers["set-cookie"]
    assert cookie.startswith(f"{sessions.COOKIE_NAME}=v1.")
    for attribute in ("HttpOnly", "SameSite=strict", "Path=/", "Max-Age="):
        assert attribute in cookie
    assert "Secure" not in cookie  # plain HTTP on loopback
    assert response.headers["cache-control"] == "no-store"
    token = cookie.split(";")[0].split("=", 1)[1]
    assert isinstance(sessions.resolve(demo_db, token), sessions.SessionUser)
    again = client.get("/_medrev/session", params={"nonce": nonce})
    assert again.status_code == 303 and "set-cookie" not in again.headers


def test_the_cookie_is_secure_behind_tls(client, demo_db):
    response = client.get("/_medrev/session", params={"nonce": _nonce(demo_db)}, headers={"X-Forwarded-Proto": "https"})
    assert "Secure" in response.headers["set-cookie"]


@pytest.mark.parametrize("target", ["https://evil.example/", "//evil.example/x", "/\\evil.example", "review"])
def test_next_never_leaves_the_app(client, demo_db, target):
    response = client.get("/_medrev/session", params={"nonce": _nonce(demo_db), "next": target})
    assert response.headers["location"] == "/"


def test_requests_started_by_another_site_are_refused(client, demo_db):
    nonce = _nonce(demo_db)
    response = client.get("/_medrev/session", params={"nonce": nonce}, headers={"Sec-Fetch-Site": "cross-site"})
    assert response.status_code == 403 and "set-cookie" not in response.headers
    assert client.get("/_medrev/session", params={"nonce": nonce}).headers["set-cookie"]  # still unused


def test_sign_out_revokes_the_session_and_clears_the_cookie(client, demo_db):
    response = client.get("/_medrev/session", params={"nonce": _nonce(demo_db)})
    token = response.headers["set-cookie"].split(";")[0].split("=", 1)[1]
    client.cookies.set(sessions.COOKIE_NAME, token)
    out = client.get("/_medrev/signout")
    assert out.status_code == 303 and out.headers["location"] == "/"
    assert f'{sessions.COOKIE_NAME}=""' in out.headers["set-cookie"] and "Max-Age=0" in out.headers["set-cookie"]
    assert sessions.resolve(demo_db, token) == sessions.Ended("You have signed out.")


def test_sign_out_can_hand_over_to_the_identity_providers_logout(client):
    assert client.get("/_medrev/signout", params={"next": "/auth/logout"}).headers["location"] == "/auth/logout"
    assert client.get("/_medrev/signout", params={"next": "https://evil.example/"}).headers["location"] == "/"
