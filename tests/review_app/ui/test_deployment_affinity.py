"""Replica affinity in the documented deployment: many browsers behind one address, each on one replica.

A hospital's clinicians reach the app from one NAT address, so nginx cannot tell them apart by address
(``ip_hash`` put every one of them on the same replica). ``deploy/nginx.conf`` pins each browser by a
routing cookie that nginx sets on the browser's first response. Here browsers (Playwright contexts,
each with its own cookie jar) all come from 127.0.0.1: they must spread over both replicas, every
request of one browser (the first page load, the server checks, the websocket, an upload, a download)
must reach one replica, and a file upload and a download (kept in the replica's memory) must work on
each replica. nginx's log names the replica of every request and the browser's routing key.
"""

from __future__ import annotations

import time
import zipfile
from collections import defaultdict
from pathlib import Path

import pytest

from .browser_support import expect, sign_in
from .test_deployment import deployment  # noqa: F401  (nginx + two replicas + PostgreSQL)

pytestmark = [pytest.mark.browser, pytest.mark.postgres, pytest.mark.slow]
LAPTOP = {"width": 1366, "height": 768}
ROUTE_COOKIE = "medrev_route"
MAX_BROWSERS = 16  # each lands on a replica at random: both are reached with probability 1 - 2^-15


def _requests(prefix: Path) -> list[dict[str, str]]:
    """nginx's log of this deployment: one entry per request, with the replica that answered it."""
    out = []
    for line in (prefix / "routes.log").read_text().splitlines():
        _msec, status, upstream, route, cookie, method, uri = line.split("|")
        # After a failed attempt nginx lists every address it tried: the last one answered.
        out.append(
            {
                "status": status,
                "replica": upstream.split(",")[-1].strip(),
                "route": route,
                "cookie": cookie,
                "method": method,
                "uri": uri,
            }
        )
    return out


def _by_route(prefix: Path) -> dict[str, list[dict[str, str]]]:
    grouped: dict[str, list[dict[str, str]]] = defaultdict(list)
    for entry in _requests(prefix):
        grouped[entry["route"]].append(entry)
    return grouped


def _wait_logged(prefix: Path, route: str, test, what: str) -> list[dict[str, str]]:
    """The browser's requests once one of them passes ``test`` (nginx logs a websocket when it closes)."""
    deadline = time.monotonic() + 20
    while True:
        entries = _by_route(prefix).get(route, [])
        if any(test(e) for e in entries):
            return entries
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} logged for browser {route}: {entries}")
        time.sleep(0.2)


def _route(context) -> str:
    cookies = [c for c in context.cookies() if c["name"] == ROUTE_COOKIE]
    assert len(cookies) == 1, context.cookies()
    cookie = cookies[0]
    assert cookie["httpOnly"] and cookie["secure"] and cookie["sameSite"] == "Lax"
    return cookie["value"]


def _upload(page, tmp_path: Path, name: str) -> None:
    """A two-row items file through the Import page: checked ("Ready") only if the upload reached this session."""
    page.get_by_role("link", name="Import").click()
    expect(page.get_by_text("What is in the file?")).to_be_visible()
    items = tmp_path / "MEDMISQA.jsonl"
    items.write_text(
        "".join(
            f'{{"id": "{name}-{i}", "question": "Affinity item {i}?", "answer": "A", "opa": "a", "opb": "b", '
            f'"injecta": "t", "injectb": "f", "injection_content": "Cue Remapping", '
            f'"injection_provenance": "Neutral False Statement"}}\n'
            for i in range(2)
        )
    )
    page.locator("input[type=file]").set_input_files(str(items))
    expect(page.get_by_text("Ready: 2 items rows, 2 new")).to_be_visible(timeout=60_000)


def _download(page, tmp_path: Path) -> None:
    """The study export, built in this session and downloaded from the replica's memory (/media/)."""
    page.get_by_role("link", name="Export").click()
    page.get_by_role("button", name="Build export").click()
    button = page.get_by_role("button", name="Download the export (.zip)")
    expect(button).to_be_visible(timeout=120_000)
    with page.expect_download() as caught:
        button.click()
    saved = tmp_path / "export.zip"
    caught.value.save_as(saved)
    with zipfile.ZipFile(saved) as zipped:
        assert any(name.endswith("/manifest.json") for name in zipped.namelist()), zipped.namelist()


def test_browsers_behind_one_address_spread_over_replicas_and_keep_to_one(deployment, browser, tmp_path):  # noqa: F811
    prefix = deployment["prefix"]
    replicas = {r.rsplit("/", 1)[1] for r in deployment["replicas"]}  # host:port as nginx logs it
    browsers: dict[str, object] = {}  # route -> context
    on: dict[str, str] = {}  # route -> replica
    while len(browsers) < MAX_BROWSERS and (len(browsers) < 6 or set(on.values()) != replicas):
        context = browser.new_context(viewport=LAPTOP, ignore_https_errors=True, accept_downloads=True)
        page = context.new_page()
        page.set_default_timeout(30_000)
        page.goto(deployment["proxy"] + "/")
        expect(page.get_by_role("button", name="Sign in")).to_be_visible()
        route = _route(context)
        browsers[route] = context
        entries = _wait_logged(prefix, route, lambda e: e["method"] == "GET" and e["uri"] == "/_stcore/health", "check")
        first = entries[0]
        # The first page load carried no cookie: nginx routed it by the key it set as the cookie on that response.
        assert first["uri"] == "/" and first["cookie"] == "-", first  # nginx logs an empty value as "-"
        on[route] = first["replica"]
    assert set(on.values()) == replicas, f"{len(browsers)} browsers from one address, all on {set(on.values())}"

    # One signed-in lead per replica uploads a file and downloads the study's export.
    for replica in sorted(replicas):
        route = next(r for r, where in on.items() if where == replica)
        page = browsers[route].pages[0]
        sign_in(page, deployment["proxy"], "lead01")
        _upload(page, tmp_path, route[:8])
        _download(page, tmp_path)

    for context in browsers.values():
        context.close()  # nginx logs each websocket when it closes
    for route, replica in on.items():
        entries = _wait_logged(
            prefix, route, lambda e: e["uri"] == "/_stcore/stream" and e["status"] == "101", "websocket"
        )
        assert {e["replica"] for e in entries} == {replica}, entries  # every request of the browser, one replica
        assert all(e["status"] in ("101", "200", "204", "303", "304") for e in entries), entries
    for replica in replicas:
        route = next(r for r, where in on.items() if where == replica)
        entries = _by_route(prefix)[route]
        assert any(e["method"] == "PUT" and e["uri"].startswith("/_stcore/upload_file/") for e in entries), entries
        assert any(e["method"] == "GET" and e["uri"].startswith("/media/") for e in entries), entries
