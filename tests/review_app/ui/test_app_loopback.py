"""`medrev app` listens on 127.0.0.1 unless told otherwise: a hospital server exposes it through its reverse
proxy on the same host (docs/deployment.md). --host, STREAMLIT_SERVER_ADDRESS and `.streamlit/config.toml`
still choose another address. A real process and its sockets, then the resolution rules in-process."""

from __future__ import annotations

import shutil

from review_app.ui import server

from .browser_support import free_port, start_app
from .test_safe_defaults import _streamlit_config_restored, listening_addresses  # noqa: F401  (the fixture)


def test_app_without_host_listens_on_loopback_only_and_says_so(demo_template, tmp_path, monkeypatch):
    monkeypatch.delenv("STREAMLIT_SERVER_ADDRESS", raising=False)
    db = tmp_path / "demo.db"
    shutil.copyfile(demo_template, db)
    port = free_port()
    process, _base = start_app(f"sqlite:///{db}", tmp_path, ["app", "--port", str(port)], port=port)
    try:
        assert listening_addresses(process.pid) == {("127.0.0.1", port)}  # no other interface, no IPv6
    finally:
        process.terminate()
        process.wait(timeout=20)
    lines = (tmp_path / f"app-{port}.log").read_text().splitlines()
    assert lines[0].startswith(f"Review app on http://127.0.0.1:{port} (this computer only), database sqlite:///")
    assert "medrev app --host 0.0.0.0" in lines[1]


def test_the_address_still_follows_host_environment_and_config_file(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # no .streamlit/config.toml here
    monkeypatch.delenv("STREAMLIT_SERVER_PORT", raising=False)
    monkeypatch.delenv("STREAMLIT_SERVER_ADDRESS", raising=False)
    loopback = server.listen_address(default_host=server.LOOPBACK)
    assert loopback == server.ListenAddress("127.0.0.1", 8501) and loopback.local_only
    assert server.listen_address().host == ""  # Streamlit's own default is left to callers that want it
    assert server.listen_address("0.0.0.0", default_host=server.LOOPBACK).host == "0.0.0.0"
    monkeypatch.setenv("STREAMLIT_SERVER_ADDRESS", "10.1.2.3")
    assert server.listen_address(default_host=server.LOOPBACK).host == "10.1.2.3"
    monkeypatch.delenv("STREAMLIT_SERVER_ADDRESS")
    (tmp_path / ".streamlit").mkdir()
    (tmp_path / ".streamlit" / "config.toml").write_text('[server]\naddress = "0.0.0.0"\n')
    assert server.listen_address(default_host=server.LOOPBACK).host == "0.0.0.0"
    (tmp_path / ".streamlit" / "config.toml").write_text('[server]\naddress = ""\n')  # every interface, said so
    assert server.listen_address(default_host=server.LOOPBACK).host == ""
