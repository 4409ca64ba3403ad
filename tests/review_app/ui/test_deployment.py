"""The documented deployment runs: nginx (Debian) in front of two `medrev app` replicas on one PostgreSQL.

Uses `deploy/nginx.conf` as shipped, with the ports and a self-signed certificate (made with openssl, as
``bench/panel_load.py`` makes it) filled in, and a second access log naming the replica that answered each
request and the browser's routing key (``test_deployment_affinity.py`` reads it). Plain HTTP redirects to
HTTPS; every HTTPS response carries HSTS, anti-framing and nosniff headers. A reviewer works through nginx
over TLS (the websocket goes through the proxy), another works on the second replica directly, and both
write to the same PostgreSQL database.
"""

from __future__ import annotations

import os
import shutil
import ssl
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func
from sqlmodel import select

from bench.panel_stack import self_signed, wait_up
from review_app.db.engine import make_engine, read_session
from review_app.db.migrate import upgrade
from review_app.db.models import Annotation, Reviewer
from review_app.demo import seed_demo_database

from ..conftest import _pg, _pg_url
from .browser_support import A_DIMENSIONS, choose, current_task, expect, free_port, shot, sign_in, wait_idle

pytestmark = [pytest.mark.browser, pytest.mark.postgres]
ROOT = Path(__file__).resolve().parents[3]
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"


def _nginx_conf(prefix: Path, listen: int, http: int, replicas: tuple[int, int], cert: Path, key: Path) -> Path:
    text = (ROOT / "deploy" / "nginx.conf").read_text()
    replacements = {
        "server 127.0.0.1:8601;": f"server 127.0.0.1:{replicas[0]};",
        "server 127.0.0.1:8602;": f"server 127.0.0.1:{replicas[1]};",
        "listen 443 ssl http2;": f"listen 127.0.0.1:{listen} ssl http2;",
        "listen 80;": f"listen 127.0.0.1:{http};",
        "/etc/ssl/medrev/fullchain.pem": str(cert),
        "/etc/ssl/medrev/privkey.pem": str(key),
    }
    for shipped, here in replacements.items():
        assert shipped in text, shipped  # the test runs the shipped file, not a copy of it
        text = text.replace(shipped, here)
    # Run unprivileged paths under the test's prefix (the shipped file relies on the system's defaults).
    text = f"user root;\npid {prefix}/nginx.pid;\n" + text.replace(
        "http {",
        "http {\n"
        f"    access_log {prefix}/access.log;\n"
        # Which replica answered each request, and the browser's routing key (tests of the affinity).
        "    log_format routes '$msec|$status|$upstream_addr|$medrev_route|$cookie_medrev_route|"
        "$request_method|$uri';\n"
        f"    access_log {prefix}/routes.log routes;\n"
        f"    client_body_temp_path {prefix}/body;\n    proxy_temp_path {prefix}/proxy;\n"
        f"    fastcgi_temp_path {prefix}/fastcgi;\n    uwsgi_temp_path {prefix}/uwsgi;\n"
        f"    scgi_temp_path {prefix}/scgi;\n",
        1,
    )
    path = prefix / "nginx.conf"
    path.write_text(text)
    return path


@pytest.fixture
def deployment(tmp_path):
    if not Path(NGINX).exists():
        pytest.fail("Debian's nginx is not installed (apt-get install -y nginx-light)")
    name = f"medrev_deploy_{uuid.uuid4().hex[:10]}"
    _pg(f'CREATE DATABASE "{name}"')
    url = _pg_url(name)
    engine = make_engine(url)
    upgrade(engine)
    seed_demo_database(engine)
    env = os.environ | {"MEDREV_DATABASE_URL": url, "STREAMLIT_SERVER_COOKIE_SECRET": uuid.uuid4().hex * 2}
    ports = (free_port(), free_port())
    processes = []
    try:
        for port in ports:
            log = tmp_path / f"replica-{port}.log"
            process = subprocess.Popen(
                [sys.executable, "-m", "review_app", "app", "--host", "127.0.0.1", "--port", str(port)],
                env=env,
                stdout=log.open("w"),
                stderr=subprocess.STDOUT,
                cwd=tmp_path,
            )
            processes.append(process)
            wait_up(f"http://127.0.0.1:{port}/_stcore/health", process, log, timeout=60)
        prefix = tmp_path / "nginx"
        prefix.mkdir()
        listen, http = free_port(), free_port()
        cert, key = self_signed(prefix)
        conf = _nginx_conf(prefix, listen, http, ports, cert, key)
        nginx = subprocess.Popen(
            [NGINX, "-p", str(prefix), "-e", str(prefix / "error.log"), "-c", str(conf), "-g", "daemon off;"],
            stdout=(prefix / "stdout.log").open("w"),
            stderr=subprocess.STDOUT,
        )
        processes.append(nginx)
        wait_up(f"https://127.0.0.1:{listen}/_stcore/health", nginx, prefix / "stdout.log", timeout=60)
        yield {
            "proxy": f"https://127.0.0.1:{listen}",
            "http": f"http://127.0.0.1:{http}",
            "cert": cert,
            "replicas": [f"http://127.0.0.1:{p}" for p in ports],
            "engine": engine,
            "prefix": prefix,
        }
    finally:
        for process in reversed(processes):
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
        engine.dispose()
        _pg(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _submitted(engine, username: str) -> int:
    with read_session(engine) as session:
        return session.exec(
            select(func.count())
            .select_from(Annotation)
            .join(Reviewer, Reviewer.id == Annotation.reviewer_id)
            .where(Reviewer.username == username)
        ).one()


def _review_one_task(page, base: str, username: str) -> None:
    sign_in(page, base, username)
    page.get_by_role("button", name="Start next task").click()
    expect(page.get_by_text("Rubric A: item validation")).to_be_visible()
    wait_idle(page)
    aid = current_task(page)
    for dimension in A_DIMENSIONS:
        choose(page, aid, dimension, 2)
    page.get_by_role("button", name="Submit").click()
    expect(page.get_by_text("Submitted. Thank you!")).to_be_visible()


def test_two_replicas_behind_nginx_share_one_postgres(deployment, browser):
    engine = deployment["engine"]
    before = (_submitted(engine, "rev01"), _submitted(engine, "rev02"))
    through_proxy = browser.new_context(viewport={"width": 1440, "height": 900}, ignore_https_errors=True).new_page()
    through_proxy.set_default_timeout(20_000)
    _review_one_task(through_proxy, deployment["proxy"], "rev01")
    shot(through_proxy, "30-through-nginx")
    direct = browser.new_context(viewport={"width": 1440, "height": 900}).new_page()
    direct.set_default_timeout(20_000)
    _review_one_task(direct, deployment["replicas"][1], "rev02")
    assert (_submitted(engine, "rev01"), _submitted(engine, "rev02")) == (before[0] + 1, before[1] + 1)
    through_proxy.context.close()  # nginx logs a websocket when it closes
    log = deployment["prefix"] / "access.log"
    deadline = time.monotonic() + 10
    while '"GET /_stcore/stream HTTP/1.1" 101' not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert '"GET /_stcore/stream HTTP/1.1" 101' in log.read_text()  # the websocket went through the proxy


def test_nginx_serves_tls_with_security_headers_and_redirects_http(deployment):
    trusted = ssl.create_default_context(cafile=str(deployment["cert"]))  # only our certificate is trusted
    with httpx.Client(verify=trusted, timeout=10) as client:
        for path in ("/", "/_stcore/health", "/no-such-page"):
            response = client.get(deployment["proxy"] + path)
            assert response.url.scheme == "https"
            headers = response.headers
            assert headers["x-frame-options"] == "DENY", path
            assert "frame-ancestors 'none'" in headers["content-security-policy"], path
            assert headers["x-content-type-options"] == "nosniff", path
            assert headers["strict-transport-security"].startswith("max-age="), path
            assert int(headers["strict-transport-security"].split("=")[1]) >= 31_536_000
    plain = httpx.get(deployment["http"] + "/", follow_redirects=False, timeout=10)
    assert plain.status_code == 301 and plain.headers["location"].startswith("https://127.0.0.1")
