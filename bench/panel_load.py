"""A panel of simulated reviewers on real `medrev app` replicas: how many one replica holds, and whether two hold more.

Starts everything itself: a fresh database (PostgreSQL, or SQLite with one replica) seeded through the
services with ``--reviewers`` accounts, each with a queue of Rubric A tasks; one or two ``medrev app``
replicas (as ``medrev app`` runs them); for two replicas (or ``--proxy``) nginx with the shipped
``deploy/nginx.conf`` over TLS (ports and a self-signed certificate filled in, an access log and an
``X-Medrev-Upstream`` header added to count sessions per replica). Then every reviewer, in a browser
of its own behind one address (``bench/panel_client.py``: Streamlit's websocket protocol, as the
frontend speaks it), signs in at a random moment of the ramp, opens the next task, scores each
dimension and submits, task after task:

- ``--pace human``: per task a log-normal think time with a median of ``--median-s`` (20 s), shared
  over its five scores and the submit;
- ``--pace stress``: no think time (every reviewer clicks as soon as the page has answered).

``--kill-replica-after S`` kills the first replica (SIGKILL, its process group) S seconds after the
load starts: its reviewers reconnect through nginx to the live replica, as browsers do.

Latencies count from the end of the ramp; the server's memory is sampled every 2 s (resident set of
each replica) and compared with its size after a warm-up page load; CPU time is read for each replica
(with its compute worker), nginx, this PostgreSQL database's backends and the generator. At the end the
database is read back: one annotation per submit a reviewer saw accepted, none lost, none twice.
The last line printed is one JSON object with the figures.

    .venv/bin/python bench/panel_load.py --reviewers 40 --replicas 2 --db postgresql --minutes 3 --pace human
    .venv/bin/python bench/panel_load.py --reviewers 20 --replicas 1 --db sqlite --minutes 2 --pace stress
    .venv/bin/python bench/panel_load.py --reviewers 20 --replicas 2 --db postgresql --minutes 2 --kill-replica-after 60
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import csv
import json
import logging
import math
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from panel_client import Figures, Pace, Reviewer
from review_db_speed import write_items

ROOT = Path(__file__).resolve().parents[1]
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
PG_ADMIN = os.environ.get("MEDREV_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
STUDY = "Panel load"
SAMPLE_EVERY_S = 2.0
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


def seed(url: str, folder: Path, reviewers: int, tasks_each: int) -> list[tuple[str, str]]:
    """Reviewer accounts (roster import, passwords set) and a Rubric A study with ``tasks_each`` tasks each."""
    from sqlalchemy import select, update

    from review_app.db.connect import dispose_engines, get_engine
    from review_app.db.engine import write_session
    from review_app.db.models import Reviewer
    from review_app.services import accounts, assignment, importing, studies
    from review_app.services.actors import SYSTEM

    engine = get_engine(url)
    items = folder / "items.jsonl"
    write_items(items, reviewers * tasks_each)
    importing.import_items(engine, items, actor=SYSTEM)
    roster = folder / "roster.csv"
    names = [f"panel{i:03d}" for i in range(1, reviewers + 1)]
    with roster.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["username", "display_name", "role"])
        writer.writerows([(n, f"Dr. Panel {n[5:]}", "reviewer") for n in names])
    importing.import_roster(engine, roster, actor=SYSTEM)
    # One password for the whole panel, hashed once by the service (argon2 takes ~0.1 s a hash, on one
    # hashing thread per process): each account gets the same stored hash.
    password = "panel-load-pw"
    accounts.set_password(engine, names[0], password, actor=SYSTEM)
    with write_session(engine) as session:
        stored = session.execute(select(Reviewer.password_hash).where(Reviewer.username == names[0])).scalar_one()
        session.execute(update(Reviewer).where(Reviewer.username.in_(names)).values(password_hash=stored))
    studies.create_study(engine, STUDY, rubrics=["A"], actor=SYSTEM)
    assignment.enrol(engine, STUDY, names, actor=SYSTEM)
    studies.draw_pool(engine, STUDY, reviewers * tasks_each, seed=1, actor=SYSTEM)
    assignment.assign(engine, STUDY, raters=1, dual_share=0.0, seed=1, actor=SYSTEM)
    dispose_engines()
    return [(n, password) for n in names]


def read_back(url: str, usernames: list[str], accepted: list[tuple[str, int]]) -> dict[str, int]:
    """Annotations the database holds for the panel against the submits the reviewers saw accepted."""
    from sqlalchemy import func, select

    from review_app.db.engine import make_engine, read_session
    from review_app.db.models import Annotation, Reviewer

    engine = make_engine(url, pool_size=1, max_overflow=0)
    try:
        with read_session(engine) as session:
            rows = session.execute(
                select(Annotation.assignment_id, func.count())
                .join(Reviewer, Reviewer.id == Annotation.reviewer_id)
                .where(Reviewer.username.in_(usernames))
                .group_by(Annotation.assignment_id)
            ).all()
    finally:
        engine.dispose()
    stored = dict(rows)
    seen = Counter(aid for _user, aid in accepted)
    return {
        "annotations_stored": sum(stored.values()),
        "lost": sum(1 for aid in seen if aid not in stored),
        "duplicates": sum(n - 1 for n in stored.values() if n > 1) + sum(n - 1 for n in seen.values() if n > 1),
        "stored_not_seen": sum(1 for aid in stored if aid not in seen),
    }


# ------------------------------------------------------------------------------------------ servers


def wait_up(url: str, process: subprocess.Popen, log: Path, timeout: float = 120) -> None:
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


# ------------------------------------------------------------------------------------------ the run


def percentile(samples: list[float], q: float) -> float | None:
    if not samples:
        return None
    ordered = sorted(samples)
    return round(ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)], 1)


async def drive(args: argparse.Namespace, stack: Stack, accounts: list[tuple[str, str]]) -> dict:
    figures = Figures()
    where: dict[str, str] = {}  # reviewer -> replica its websocket is on now

    def on_replica(username: str, header: str) -> None:
        where[username] = stack.upstream_name(header)

    pace = Pace(args.median_s if args.pace == "human" else 0.0)
    t0 = time.perf_counter()
    figures.measure_from = t0 + args.ramp
    steady_end = figures.measure_from + args.minutes * 60
    reviewers = [
        Reviewer(stack.base, name, password, figures, pace, seed=i, on_replica=on_replica)
        for i, (name, password) in enumerate(accounts)
    ]
    rng = random.Random(7)
    tasks = [asyncio.create_task(r.run(t0 + rng.uniform(0, args.ramp), steady_end)) for r in reviewers]

    samples: list[dict] = []
    cpu_start = cpu_end = None
    busy_start = busy_end = None
    killed_at = None
    sessions_at_kill: list[int] | None = None
    sessions_steady: list[int] = []
    while not all(t.done() for t in tasks):
        now = time.perf_counter()
        if args.kill_replica_after is not None and killed_at is None and now - t0 >= args.kill_replica_after:
            sessions_at_kill = [sum(1 for r in where.values() if r == f"r{i + 1}") for i in range(args.replicas)]
            stack.kill_first()
            killed_at = now - t0
            print(f"killed replica 1 at {killed_at:.0f} s", flush=True)
        if cpu_start is None and now >= figures.measure_from:
            cpu_start, busy_start = (now, stack.cpu()), machine_busy()
        if now <= steady_end:
            cpu_end, busy_end = (now, stack.cpu()), machine_busy()
            if killed_at is None:
                sessions_steady = [sum(1 for r in where.values() if r == f"r{i + 1}") for i in range(args.replicas)]
        samples.append(
            {
                "t": now - t0,
                "rss": [rss_mb(p.pid) if i != stack.killed else 0.0 for i, p in enumerate(stack.replicas)],
                "sessions": [sum(1 for r in where.values() if r == f"r{i + 1}") for i in range(args.replicas)],
            }
        )
        await asyncio.sleep(SAMPLE_EVERY_S)
    await asyncio.gather(*tasks)
    window = (cpu_end[0] - cpu_start[0]) if cpu_start and cpu_end else 0.0
    cores = {}
    if window > 0:
        cores = {k: round((cpu_end[1][k] - cpu_start[1].get(k, 0.0)) / window, 2) for k in cpu_end[1]}
        cores["machine"] = round((busy_end[0] - busy_start[0]) / window, 2)
        cores["others"] = round(cores["machine"] - sum(v for k, v in cores.items() if k != "machine"), 2)
    return {
        "figures": figures,
        "samples": samples,
        "cores": cores,
        "window": window,
        "sessions_steady": sessions_steady,
        "where": where,
        "killed_at": killed_at,
        "sessions_at_kill": sessions_at_kill,
        "t0": t0,
    }


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


def summarise(
    args: argparse.Namespace,
    stack: Stack,
    accounts: list[tuple[str, str]],
    run: dict,
    baseline: list[float],
    db: dict[str, int],
) -> dict:
    figures: Figures = run["figures"]
    samples = run["samples"]
    steady_end = args.ramp + args.minutes * 60
    last_from = max(args.ramp, steady_end - 30)
    until = run["killed_at"] if run["killed_at"] is not None else steady_end
    # Memory: the median of the samples in the last 30 s of the steady window (before any kill).
    tail = [s for s in samples if last_from <= s["t"] <= until] or [s for s in samples if s["t"] <= until][-5:]
    per_replica_rss = [statistics.median(s["rss"][i] for s in tail) for i in range(args.replicas)] if tail else []
    per_replica_sessions = (
        [statistics.median(s["sessions"][i] for s in tail) for i in range(args.replicas)] if tail else []
    )
    grown = sum(max(0.0, r - b) for r, b in zip(per_replica_rss, baseline, strict=True))
    sessions = sum(per_replica_sessions)
    steady_from = run["t0"] + args.ramp
    steady_submits = [t for t in figures.submit_times if steady_from <= t <= run["t0"] + steady_end]
    rate = len(steady_submits) / (args.minutes * 60)
    return {
        "reviewers": args.reviewers,
        "replicas": args.replicas,
        "db": args.db,
        "pace": args.pace,
        "proxy": bool(args.proxy),
        "minutes": args.minutes,
        "ramp_s": args.ramp,
        "sessions_per_replica": run["sessions_steady"],
        "sessions_at_kill": run["sessions_at_kill"],
        "sessions_at_end": [sum(1 for r in run["where"].values() if r == f"r{i + 1}") for i in range(args.replicas)],
        "signed_in": figures.signed_in,
        "submits_accepted": len(figures.accepted),
        **db,
        "errors": len(figures.errors),
        "error_samples": figures.errors[:8],
        "submit_to_next_p50_ms": percentile(figures.submit_ms, 0.5),
        "submit_to_next_p95_ms": percentile(figures.submit_ms, 0.95),
        "score_p50_ms": percentile(figures.score_ms, 0.5),
        "score_p95_ms": percentile(figures.score_ms, 0.95),
        "measured_submits": len(figures.submit_ms),
        "kb_per_score": round(statistics.median(figures.score_bytes) / 1024, 1) if figures.score_bytes else None,
        "kb_per_submit": round(statistics.median(figures.submit_bytes) / 1024, 1) if figures.submit_bytes else None,
        "clicks_per_s": round(figures.clicks / (args.minutes * 60), 2),
        "rss_baseline_mb": [round(b, 1) for b in baseline],
        "rss_steady_mb": [round(r, 1) for r in per_replica_rss],
        "rss_per_session_mb": round(grown / sessions, 2) if sessions else None,
        # Every 10 s: seconds since the start, each replica's RSS (MB) and reviewers connected to it.
        "trace": [
            [round(s["t"]), [round(r) for r in s["rss"]], s["sessions"]]
            for s in samples[:: max(1, round(10 / SAMPLE_EVERY_S))]
        ],
        "submits_per_s": round(rate, 2),
        "submits_per_s_per_replica": round(rate / args.replicas, 2),
        "reconnects": figures.reconnects,
        "killed_at_s": run["killed_at"],
        "stuck_after_reconnect": figures.stuck,
        "submitted_task_shown_again": figures.shown_again,
        "reloads": figures.reloads,
        "drafts_checked": figures.drafts_checked,
        "drafts_missing": figures.drafts_missing,
        "signed_out_after_reconnect": figures.signed_out_after_reconnect,
        "finished_queues": figures.finished_queues,
        "cpu_cores": run["cores"],
        "replica_cpu_ms_per_click": round(
            1000 * sum(v for k, v in run["cores"].items() if k.startswith("replica")) * run["window"] / figures.clicks,
            1,
        )
        if figures.clicks and run["cores"] and run["killed_at"] is None
        else None,
        "loadavg_before": args.load_before,
        "loadavg_after": loadavg(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reviewers", type=int, default=20)
    parser.add_argument("--replicas", type=int, choices=(1, 2), default=1)
    parser.add_argument("--db", choices=("postgresql", "sqlite"), default="postgresql")
    parser.add_argument("--minutes", type=float, default=2.0, help="the measured (steady) part, after the ramp")
    parser.add_argument("--ramp", type=float, default=None, help="seconds over which reviewers sign in")
    parser.add_argument("--pace", choices=("human", "stress"), default="human")
    parser.add_argument("--median-s", type=float, default=20.0, help="median think time per task (human pace)")
    parser.add_argument("--kill-replica-after", type=float, default=None, help="seconds after the load starts")
    parser.add_argument("--proxy", action="store_true", help="nginx in front of one replica too")
    parser.add_argument("--tasks", type=int, default=None, help="tasks per reviewer (default: enough for the run)")
    parser.add_argument("--keep", action="store_true", help="keep the run's folder (logs) and print where it is")
    args = parser.parse_args()
    if args.db == "sqlite" and args.replicas != 1:
        parser.error("SQLite serves one replica only (replicas share a database through PostgreSQL)")
    if args.kill_replica_after is not None and args.replicas != 2:
        parser.error("--kill-replica-after needs two replicas")
    args.proxy = args.proxy or args.replicas == 2
    if args.ramp is None:
        args.ramp = float(min(60, max(10, args.reviewers // 2)))
    seconds = args.ramp + args.minutes * 60
    if args.tasks is None:
        args.tasks = (
            math.ceil(seconds / (args.median_s / 2)) + 10
            if args.pace == "human"
            else math.ceil(seconds * min(5.0, 40 / args.reviewers)) + 20
        )
    logging.getLogger("streamlit").setLevel(logging.ERROR)
    args.load_before = loadavg()
    folder = Path(tempfile.mkdtemp(prefix="medrev-panel-"))
    url, args.pg_name = create_database(args.db, folder)
    stack = Stack(args, url, folder)
    try:
        started = time.perf_counter()
        accounts = seed(url, folder, args.reviewers, args.tasks)
        print(f"seeded {args.reviewers} reviewers x {args.tasks} tasks in {time.perf_counter() - started:.0f} s "
              f"({args.db}); load average {args.load_before}", flush=True)  # fmt: skip
        stack.start()
        baseline = warm_up(stack)
        print(f"{args.replicas} replica(s) up{' behind nginx' if args.proxy else ''} at {stack.base}; "
              f"RSS after warm-up {[round(b) for b in baseline]} MB; "
              f"ramp {args.ramp:.0f} s, then {args.minutes} min at {args.pace} pace", flush=True)  # fmt: skip
        run = asyncio.run(drive(args, stack, accounts))
        db = read_back(url, [a[0] for a in accounts], run["figures"].accepted)
        result = summarise(args, stack, accounts, run, baseline, db)
    finally:
        stack.stop()
        with contextlib.suppress(Exception):
            drop_database(args.pg_name)
        if args.keep:
            print(f"logs kept in {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)
    for key in ("submit_to_next_p50_ms", "submit_to_next_p95_ms", "score_p95_ms", "submits_per_s", "rss_per_session_mb",
                "sessions_per_replica", "errors", "lost", "duplicates", "cpu_cores"):  # fmt: skip
        print(f"{key:<24} {result[key]}")
    for sample in result["error_samples"]:
        print(f"  error: {sample}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
