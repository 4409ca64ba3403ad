"""The servers of a panel-load run and what they cost: a database, ``medrev app`` replicas, nginx, /proc readings.

Used by ``bench/panel_load.py``. One or two replicas run as ``medrev app`` runs them, each in its own
process group (a kill takes its compute worker with it, as a crash would); nginx runs the shipped
``deploy/nginx.conf`` over TLS with this run's ports and a self-signed certificate filled in, an access
log and an ``X-Medrev-Upstream`` header added to count sessions per replica. CPU time and resident
memory are read from /proc for each replica (with its compute worker), nginx and this run's PostgreSQL
backends.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
PG_ADMIN = os.environ.get("MEDREV_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
CLK_TCK = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ------------------------------------------------------------------------------------------ /proc


def _stat_times(pid: int) -> float:
    """CPU seconds (user + system) of one process."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def _children(pid: int) -> list[int]:
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            out += [int(c) for c in (task / "children").read_text().split()]
    return out


def tree(pid: int) -> list[int]:
    """A process and all its descendants."""
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        todo += _children(p)
    return found


def cpu_seconds(pids: list[int]) -> float:
    return sum(_stat_times(p) for p in pids)


def rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def pg_backends(database: str) -> list[int]:
    """The PostgreSQL server processes serving ``database`` (their titles name it)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            title = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            if title.startswith("postgres:") and f" {database} " in title:
                pids.append(int(entry.name))
    return pids


def machine_busy() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot."""
    parts = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = parts[3] + parts[4]
    return (sum(parts) - idle) / CLK_TCK, sum(parts) / CLK_TCK


def loadavg() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


# ------------------------------------------------------------------------------------------ the database


def create_database(db: str, folder: Path) -> tuple[str, str | None]:
    """A fresh database: (URL, PostgreSQL database name to drop afterwards)."""
    if db == "sqlite":
        return f"sqlite:///{folder / 'panel.db'}", None
    import psycopg

    name = f"medrev_panel_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base = PG_ADMIN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://", 1)
    return f"{base}/{name}", name


def drop_database(name: str | None) -> None:
    if name is None:
        return
    import psycopg

    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')



# ------------------------------------------------------------------------------------------ servers


def wait_up(url: str, process: subprocess.Popen, log: Path, timeout: float = 120) -> None:
    """Poll ``url`` until it answers 200 (a self-signed certificate is accepted), so that no load starts on a
    server still starting; a process that exits or stays down ``timeout`` seconds raises with its log's tail."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(url, timeout=2, verify=False).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{url} did not come up: {log.read_text()[-3000:]}")
        time.sleep(0.3)


def start_replica(port: int, env: dict[str, str], folder: Path) -> subprocess.Popen:
    log = folder / f"replica-{port}.log"
    return subprocess.Popen(
        [sys.executable, "-m", "review_app", "app", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        cwd=folder,
        start_new_session=True,  # its own process group: a kill takes its compute worker with it, as a crash would
    )


def self_signed(prefix: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key in ``prefix``, made with openssl for one run of nginx over TLS."""
    cert, key = prefix / "cert.pem", prefix / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


REFERRER = '        add_header Referrer-Policy "no-referrer" always;\n'


def nginx_conf(prefix: Path, listen: int, replicas: list[int], cert: Path, key: Path) -> Path:
    """The shipped deploy/nginx.conf with this run's ports and certificate, an access log naming each
    request's replica and routing key, and the replica in a response header (for counting sessions)."""
    text = (ROOT / "deploy" / "nginx.conf").read_text()
    servers = "".join(f"        server 127.0.0.1:{port};\n" for port in replicas)
    replacements = {
        "        server 127.0.0.1:8601;\n        server 127.0.0.1:8602;\n": servers,
        "listen 443 ssl http2;": f"listen 127.0.0.1:{listen} ssl http2;",
        "listen 80;": f"listen 127.0.0.1:{free_port()};",
        "/etc/ssl/medrev/fullchain.pem": str(cert),
        "/etc/ssl/medrev/privkey.pem": str(key),
        REFERRER: REFERRER + "        add_header X-Medrev-Upstream $upstream_addr always;\n",
    }
    for shipped, here in replacements.items():
        if shipped not in text:
            raise RuntimeError(f"deploy/nginx.conf changed: {shipped.strip()!r} not found")
        text = text.replace(shipped, here)
    text = f"pid {prefix}/nginx.pid;\n" + text.replace(
        "http {",
        "http {\n"
        "    log_format panel '$msec $status $upstream_addr $medrev_route \"$request\"';\n"
        f"    access_log {prefix}/access.log panel;\n"
        f"    client_body_temp_path {prefix}/body;\n    proxy_temp_path {prefix}/proxy;\n"
        f"    fastcgi_temp_path {prefix}/fastcgi;\n    uwsgi_temp_path {prefix}/uwsgi;\n"
        f"    scgi_temp_path {prefix}/scgi;\n",
        1,
    )
    text = text.replace("worker_connections 1024;", "worker_connections 4096;")
    path = prefix / "nginx.conf"
    path.write_text(text)
    return path


class Stack:
    """The servers of one run: replicas, nginx, and what they cost."""

    def __init__(self, args: argparse.Namespace, url: str, folder: Path) -> None:
        self.args = args
        self.url = url
        self.folder = folder
        self.replicas: list[subprocess.Popen] = []
        self.ports: list[int] = []
        self.nginx: subprocess.Popen | None = None
        self.prefix = folder / "nginx"
        self.base = ""
        self.killed: int | None = None

    def start(self) -> None:
        env = os.environ | {
            "MEDREV_DATABASE_URL": self.url,
            "STREAMLIT_SERVER_COOKIE_SECRET": uuid.uuid4().hex * 2,
        }
        for _ in range(self.args.replicas):
            port = free_port()
            self.ports.append(port)
            self.replicas.append(start_replica(port, env, self.folder))
        for port, process in zip(self.ports, self.replicas, strict=True):
            wait_up(f"http://127.0.0.1:{port}/_stcore/health", process, self.folder / f"replica-{port}.log")
        if self.args.proxy:
            if not Path(NGINX).exists():
                raise SystemExit("nginx is not installed (apt-get install -y nginx-light)")
            self.prefix.mkdir()
            listen = free_port()
            cert, key = self_signed(self.prefix)
            conf = nginx_conf(self.prefix, listen, self.ports, cert, key)
            self.nginx = subprocess.Popen(
                [NGINX, "-p", str(self.prefix), "-e", str(self.prefix / "error.log"), "-c", str(conf), "-g",
                 "daemon off;"],
                stdout=(self.prefix / "stdout.log").open("w"), stderr=subprocess.STDOUT,
            )  # fmt: skip
            self.base = f"https://127.0.0.1:{listen}"
            wait_up(f"{self.base}/_stcore/health", self.nginx, self.prefix / "stdout.log")
        else:
            self.base = f"http://127.0.0.1:{self.ports[0]}"

    def upstream_name(self, header: str) -> str:
        """The replica a websocket reached (the last address nginx tried), as ``r1``/``r2``."""
        if not self.args.proxy:
            return "r1"
        last = header.split(",")[-1].strip()
        for i, port in enumerate(self.ports):
            if last.endswith(f":{port}"):
                return f"r{i + 1}"
        return "?"

    def kill_first(self) -> None:
        self.killed = 0
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.replicas[0].pid, signal.SIGKILL)
        self.replicas[0].wait()

    def cpu(self) -> dict[str, float]:
        out = {f"replica_{i + 1}": cpu_seconds(tree(p.pid)) for i, p in enumerate(self.replicas) if i != self.killed}
        if self.nginx is not None:
            out["nginx"] = cpu_seconds(tree(self.nginx.pid))
        if self.args.db == "postgresql":
            out["postgresql"] = cpu_seconds(pg_backends(self.args.pg_name))
        times = os.times()
        out["generator"] = times.user + times.system
        return out

    def stop(self) -> None:
        for process in [*self.replicas, *([self.nginx] if self.nginx else [])]:
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGTERM) if process in self.replicas else process.terminate()
        for process in [*self.replicas, *([self.nginx] if self.nginx else [])]:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()


def warm_up(stack: Stack) -> list[float]:
    """One sign-in page load on each replica (the first run loads what pages load lazily); then each one's RSS."""
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from websockets.sync.client import connect

    for port in stack.ports:
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=base) as client:
            client.get("/", headers={"Accept": "text/html"})
            client.get("/_stcore/health")
            xsrf = client.cookies.get("_streamlit_xsrf") or ""
            cookie = "; ".join(f"{c.name}={c.value}" for c in client.cookies.jar)
        with connect(
            f"ws://127.0.0.1:{port}/_stcore/stream", subprotocols=["streamlit", xsrf],
            additional_headers={"Cookie": cookie}, origin=base, max_size=None,
        ) as ws:  # fmt: skip
            msg = BackMsg()
            msg.rerun_script.query_string = ""
            ws.send(msg.SerializeToString())
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

                fwd = ForwardMsg()
                fwd.ParseFromString(ws.recv(timeout=60))
                if fwd.WhichOneof("type") == "script_finished":
                    break
    time.sleep(2)
    return [rss_mb(p.pid) for p in stack.replicas]

