"""A panel of simulated reviewers on real `medrev app` replicas: how many one replica holds, and whether two hold more.

Starts everything itself: a fresh database (PostgreSQL, or SQLite with one replica) seeded through the
services with ``--reviewers`` accounts, each with a queue of Rubric A tasks; one or two ``medrev app``
replicas (as ``medrev app`` runs them); for two replicas (or ``--proxy``) nginx with the shipped
``deploy/nginx.conf`` over TLS (ports and a self-signed certificate filled in, an access log and an
``X-Medrev-Upstream`` header added to count sessions per replica: ``bench/panel_stack.py``). Then every
reviewer, in a browser of its own behind one address (``bench/panel_client.py`` on ``bench/panel_tab.py``:
Streamlit's websocket protocol, as the frontend speaks it), signs in at a random moment of the ramp, opens
the next task, scores each dimension and submits, task after task:

- ``--pace human``: per task a log-normal think time with a median of ``--median-s`` (20 s), shared
  over its five scores and the submit;
- ``--pace stress``: no think time (every reviewer clicks as soon as the page has answered).

``--kill-replica-after S`` kills the first replica (SIGKILL, its process group) S seconds after the
load starts, at the first moment one of its reviewers holds a task half scored (at most 30 s later): its
reviewers reconnect through nginx to the live replica, as browsers do, and that draft is checked there.

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
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from panel_client import Figures, Pace, Reviewer
from panel_stack import Stack, create_database, drop_database, loadavg, machine_busy, rss_mb, warm_up
from review_db_speed import write_items

STUDY = "Panel load"
SAMPLE_EVERY_S = 2.0
KILL_WAIT_S = 30.0  # the longest wait past --kill-replica-after for a half-scored task on the first replica


# ------------------------------------------------------------------------------------------ the database


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
        due = args.kill_replica_after is not None and killed_at is None and now - t0 >= args.kill_replica_after
        drafting = any(r.drafting and where.get(r.username) == "r1" for r in reviewers)
        if due and (drafting or now - t0 >= args.kill_replica_after + KILL_WAIT_S):
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
