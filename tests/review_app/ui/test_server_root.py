"""``ServerRoot``: a browser's page load gets the server root for Streamlit's frontend; nothing else changes.

In a real browser (no 404 for ``/review/_stcore/...``) this is test_browser_review_feedback.py.
"""

from __future__ import annotations

import pytest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.gzip import GZipMiddleware
from starlette.responses import HTMLResponse, JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient
from streamlit import config

from review_app.ui.routes import ServerRoot, root_script

PAGE = "<!DOCTYPE html><html><head><meta charset='UTF-8'><title>app</title></head><body>" + "x" * 2000 + "</body>"
BROWSER = {"accept": "text/html,application/xhtml+xml,*/*;q=0.8", "accept-encoding": "gzip, deflate"}


def _page(request):
    return HTMLResponse(PAGE, headers={"etag": '"file-etag"', "last-modified": "Mon, 01 Jan 2024 00:00:00 GMT"})


def _data(request):
    return JSONResponse({"value": "y" * 2000})


@pytest.fixture
def client():
    app = Starlette(
        routes=[
            Route("/review", _page),
            Route("/media/report.html", _page),
            Route("/data", _data),
            Route("/api/data", _data),
        ],
        middleware=[Middleware(ServerRoot), Middleware(GZipMiddleware, minimum_size=10)],
    )
    with TestClient(app) as c:
        yield c


def test_a_page_load_gets_the_root_before_streamlits_scripts(client):
    response = client.get("/review", headers=BROWSER)
    body = response.content
    script = root_script()
    assert body == PAGE.encode().replace(b"</head>", script + b"</head>")
    assert int(response.headers["content-length"]) == len(body)
    assert "content-encoding" not in response.headers  # sent as text, so the script could go in
    assert "etag" not in response.headers and "last-modified" not in response.headers
    assert b'BACKEND_BASE_URL:new URL("/",window.location.href).href' in script


def test_other_requests_pass_unchanged(client):
    fetched = client.get("/review", headers={"accept": "*/*", "accept-encoding": "gzip"})  # a script's fetch
    assert fetched.headers["content-encoding"] == "gzip" and fetched.headers["etag"] == '"file-etag"'
    assert fetched.text == PAGE
    for path in ("/media/report.html", "/api/data"):  # files a browser opens (a download, say), not pages
        response = client.get(path, headers=BROWSER)
        assert response.headers["content-encoding"] == "gzip" and b"__streamlit" not in response.content
    assert client.get("/media/report.html", headers=BROWSER).text == PAGE
    assert client.get("/data", headers=BROWSER).json() == {"value": "y" * 2000}  # not HTML: as it was


def test_the_root_follows_the_base_path_and_cannot_end_the_script():
    before = config.get_option("server.baseUrlPath")
    try:
        config.set_option("server.baseUrlPath", "medrev")
        assert b'new URL("/medrev/",' in root_script()
        config.set_option("server.baseUrlPath", "a</script><script>alert(1)")
        script = root_script()
        assert script.count(b"</script>") == 1 and script.endswith(b"</script>")
    finally:
        config.set_option("server.baseUrlPath", before)
