"""Safe defaults: `medrev demo` listens on 127.0.0.1 only and says how to open it up; `medrev app` prints
the address it really listens on, STREAMLIT_SERVER_PORT included. Real processes, real sockets."""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path

import pytest

from review_app.ui import server

from .browser_support import free_port, start_app


def listening_addresses(pid: int) -> set[tuple[str, int]]:
    """(address, port) of every TCP socket process ``pid`` listens on, read from /proc."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = set()
    for table, family in (("tcp", socket.AF_INET), ("tcp6", socket.AF_INET6)):
        for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] != "0A" or fields[9] not in inodes:  # 0A = LISTEN
                continue
            address, port = fields[1].split(":")
            words = bytes.fromhex(address)  # 32-bit words in host (little-endian) order
            raw = b"".join(words[i : i + 4][::-1] for i in range(0, len(words), 4))
            found.add((socket.inet_ntop(family, raw), int(port, 16)))
    return found


def _stop(process) -> None:
    process.terminate()
    process.wait(timeout=20)


def test_demo_listens_on_loopback_only_and_says_how_to_open_it(demo_template, tmp_path):
    db = tmp_path / "medrev-demo.db"
    shutil.copyfile(demo_template, db)  # already seeded: the command reuses it
    port = free_port()
    process, _base = start_app(f"sqlite:///{db}", tmp_path, ["demo", "--db", str(db), "--port", str(port)], port=port)
    try:
        assert listening_addresses(process.pid) == {("127.0.0.1", port)}
    finally:
        _stop(process)
    output = (tmp_path / f"app-{port}.log").read_text()
    assert f"Starting the demo app on http://127.0.0.1:{port} (this computer only)" in output
    assert "medrev demo --host 0.0.0.0" in output
    assert "rev01-demo-pw" in output  # the public passwords that make loopback the right default


def test_app_prints_the_port_streamlit_server_port_sets(demo_template, tmp_path):
    db = tmp_path / "demo.db"
    shutil.copyfile(demo_template, db)
    port = free_port()
    env = {"STREAMLIT_SERVER_PORT": str(port), "STREAMLIT_SERVER_ADDRESS": "127.0.0.1"}
    process, base = start_app(f"sqlite:///{db}", tmp_path, ["app"], port=port, env=env)
    try:
        assert base == f"http://127.0.0.1:{port}"  # start_app polled the health check there
        assert listening_addresses(process.pid) == {("127.0.0.1", port)}
    finally:
        _stop(process)
    first = (tmp_path / f"app-{port}.log").read_text().splitlines()[0]
    assert first.startswith(f"Review app on http://127.0.0.1:{port} (this computer only), database sqlite:///")


def test_listen_address_follows_flags_then_environment_then_defaults(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # no .streamlit/config.toml here
    monkeypatch.delenv("STREAMLIT_SERVER_PORT", raising=False)
    monkeypatch.delenv("STREAMLIT_SERVER_ADDRESS", raising=False)
    default = server.listen_address()
    assert (default.host, default.port) == ("", 8501)
    assert default.describe() == (
        "http://0.0.0.0:8501 (every network interface; on this computer open http://localhost:8501)"
    )
    monkeypatch.setenv("STREAMLIT_SERVER_PORT", "9123")
    monkeypatch.setenv("STREAMLIT_SERVER_ADDRESS", "127.0.0.1")
    assert server.listen_address() == server.ListenAddress("127.0.0.1", 9123)
    assert server.listen_address("10.1.2.3", 9000) == server.ListenAddress("10.1.2.3", 9000)
    (tmp_path / ".streamlit").mkdir()
    (tmp_path / ".streamlit" / "config.toml").write_text("[server]\nport = 9555\n")
    monkeypatch.delenv("STREAMLIT_SERVER_PORT")
    assert server.listen_address().port == 9555


@pytest.fixture(autouse=True)
def _streamlit_config_restored():
    """listen_address re-reads Streamlit's configuration in this process; leave it as it was found."""
    yield
    from streamlit import config

    config.get_config_options(force_reparse=True)
