"""Lead pages and reviewers at panel scale, on SQLite and PostgreSQL.

Builds a study of 500,000 items (Rubric A and Rubric B tasks, one model response per item, a quarter
of the units dual-rated), 200 reviewers and 200,000 submitted annotations with fast bulk inserts (in a
child process, so the figures below are the app's alone), then measures, server side:

- every lead page under Streamlit's AppTest with a signed-in lead: first load (a fresh session) and
  rerun (the same session again);
- ``medrev review export`` in a child process: wall time and peak RSS;
- the process starts as ``medrev app``'s server does (its start-up imports, frozen: ``medrev_asgi``; its
  settings: ``server.DEFAULTS`` and ``PROCESS_DEFAULTS`` where unset) and every page run ends as in the
  server: the app script's collection of the run's young objects (``session.collect_after_run``; the
  reviewers' runs here call the services, so they call it too), and Streamlit's full collection after a
  script run if ``runner.postScriptGC`` is on (AppTest makes none; ``medrev app`` turns it off:
  ``STREAMLIT_RUNNER_POST_SCRIPT_GC=true`` measures Streamlit's default); AppTest waits for each run
  as the server does, without its polling from the calling thread every millisecond
  (``MEDREV_BENCH_POLLING_WAIT=1`` keeps the polling), and compiles each script once, as the server
  does (``MEDREV_BENCH_COMPILE_EVERY_RUN=1`` keeps AppTest's compilation on every run);
- reviewers' submit-to-next (submit, fetch the next task, open its material) p95, idle and while a
  lead reloads the Agreement page in a loop in another thread of the same process (as in the app's
  server), in alternating blocks (``idle_and_with_lead``), and their ratio;
- the app process's RSS after all that; ``next_task`` p95; Progress right after the bulk import on a
  cold process (the bulk build ends as medrev's import, pool and assign services do: ``ANALYZE`` of
  the tables they wrote). Progress before that ANALYZE is printed too, as the baseline.

The last line is one JSON object: ``{"sqlite": {...}, "postgresql": {...}}`` with the keys
``<page>_first_load_s``, ``<page>_rerun_s`` per lead page, ``export_s``, ``export_rss_mb``,
``submit_p95_idle_ms``, ``submit_p95_with_lead_ms``, ``submit_p95_ratio``, ``app_rss_mb`` (the app
process and its compute workers: ``app_process_rss_mb`` + ``worker_rss_mb``, ``compute_workers`` of them),
``lead_quality_severity_s`` (from the Reviewers' quality page's first load to its severity columns,
computed in the background), ``next_task_p95_ms``, ``progress_after_import_s`` (and ``select1_p95_ms``, the
baseline of next task: ``SELECT 1`` through the same sessions, interleaved with it).

Targets: page rerun <= 1 s, first load <= 3 s, export <= 10 s, p95 with a lead <= 1.25x
idle, app RSS <= 600 MB, next task p95 <= 5 ms, Progress <= 0.5 s after a bulk import (PostgreSQL).

    .venv/bin/python bench/lead_pages_speed.py [--db sqlite|postgresql|both] [--scale 0.1]
    .venv/bin/python bench/lead_pages_speed.py --build sqlite:////tmp/lead.db --scale 0.25   # fill once
    .venv/bin/python bench/lead_pages_speed.py --use sqlite:////tmp/lead.db                   # measure it
    MEDREV_COMPUTE_WORKERS=0 .venv/bin/python bench/lead_pages_speed.py --use ...   # statistics in the app (baseline)
    STREAMLIT_RUNNER_POST_SCRIPT_GC=true .venv/bin/python bench/lead_pages_speed.py --use ...  # full GC per run
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

APP = ROOT / "review_app" / "ui" / "app.py"
STUDY = "bench"
LEAD = "benchlead"
LEAD_PASSWORD = "bench-lead-password-1"
MODELS = ("model-a", "model-b", "model-c")
LEAD_PAGES = (
    "lead_progress",
    "lead_agreement",
    "lead_analysis",
    "lead_adjudication",
    "lead_quality",
    "lead_reviewers",
    "lead_setup",
    "lead_import",
    "lead_plan",
    "lead_export",
)
CHUNK = 5_000


# --- building the study (child process) --------------------------------------------------------------


def _insert(session, table, rows: list[dict]) -> None:
    """Multi-row INSERT statements (as the services' ORM flushes write), not one statement per row.

    PostgreSQL keeps the progress counters per statement (migration 0009); a row-per-statement bulk
    load would update each counter row once per row. Rows per statement stay under PostgreSQL's
    65,535 parameters.
    """
    size = max(1, min(CHUNK, 60_000 // max(1, len(rows[0]) if rows else 1)))
    for start in range(0, len(rows), size):
        session.execute(table.__table__.insert().values(rows[start : start + size]))


def build(url: str, scale: float, seed: int = 1) -> dict[str, float]:
    """Fill a migrated, empty database at ``url``; returns timings. Runs in a child process."""
    from sqlalchemy import select, update

    from bench_core.medmisbench import taxonomy
    from review_app.db.engine import make_engine, write_session
    from review_app.db.migrate import upgrade
    from review_app.db.models import (
        Annotation,
        AnnotationScore,
        Assignment,
        Enrollment,
        Item,
        ModelResponse,
        Reviewer,
        Study,
        Task,
        utcnow,
    )
    from review_app.rubrics import get_rubric
    from review_app.services import accounts, studies
    from review_app.services.actors import SYSTEM
    from review_app.services.importing import content_hash

    n_items = max(int(500_000 * scale), 20)
    n_annotations = max(int(200_000 * scale), 10)
    n_reviewers = max(int(200 * scale), 4)
    rng = random.Random(seed)
    engine = make_engine(url)
    upgrade(engine)
    started = time.perf_counter()
    now = utcnow()
    contents = [c.id for c in taxonomy.CONTENT_TYPES]
    provenances = [p.id for p in taxonomy.PROVENANCES]
    subsets = ["MEDMISQA", "MEDMISMCQA", "MEDMISXPERTQA", "MEDMISHLE"]
    accounts.create_user(
        engine,
        accounts.UserProfile(username=LEAD, display_name="Bench lead", role="lead"),
        password=LEAD_PASSWORD,
        actor=SYSTEM,
    )
    studies.create_study(engine, STUDY, rubrics=["A", "B"], actor=SYSTEM)
    studies.set_study_lead(engine, STUDY, LEAD, actor=SYSTEM)
    with write_session(engine) as session:
        study_id = session.execute(select(Study.id).where(Study.name == STUDY)).scalar_one()
        _insert(
            session,
            Reviewer,
            [
                {
                    "username": f"rev{i:04d}",
                    "display_name": f"Reviewer {i}",
                    "role": "reviewer",
                    "profession": "physician",
                    "country": "",
                    "languages": "en",
                    "active": True,
                    "failed_logins": 0,
                    "session_version": 1,
                    "created_at": now,
                }
                for i in range(n_reviewers)
            ],
        )
        reviewer_ids = list(
            session.execute(select(Reviewer.id).where(Reviewer.role == "reviewer").order_by(Reviewer.id)).scalars()
        )
        _insert(
            session,
            Enrollment,
            [{"study_id": study_id, "reviewer_id": r, "active": True, "enrolled_at": now} for r in reviewer_ids],
        )
        items = []
        for i in range(n_items):
            options = [[c.upper(), f"option {c} of item {i}"] for c in "abcde"]
            row = {
                "subset": subsets[i % 4],
                "external_id": f"b{i:07d}",
                "kind": "mcq",
                "language": "en",
                "question": f"A {30 + i % 50}-year-old patient presents with finding {i}. What is the next step?",
                "options": options,
                "gold_label": "C",
                "content_type": contents[i % len(contents)],
                "provenance": provenances[i % len(provenances)],
                "injections": {c.upper(): f"context sentence {c} for item {i}" for c in "abcde"},
                "target_label": "ABDE"[i % 4],
                "payload": {},
            }
            row["content_hash"] = content_hash(row)
            items.append(row | {"created_at": now})
        _insert(session, Item, items)
        del items
        item_ids = list(session.execute(select(Item.id).order_by(Item.id)).scalars())
        responses = []
        for n, item_id in enumerate(item_ids):
            chosen = "ABCDE"[rng.randrange(5)]
            row = {
                "item_id": item_id,
                "model": MODELS[n % 3],
                "condition": "type1",
                "response_text": f"The answer is {chosen}. Step by step reasoning for item {n}.",
                "reasoning": "",
                "chosen_label": chosen,
                "auto_label": "SUCCESS" if chosen == "C" else "FAIL",
                "target_label": "ABDE"[n % 4],
                "payload": {},
            }
            row["content_hash"] = content_hash(row)
            responses.append(row | {"created_at": now})
        _insert(session, ModelResponse, responses)
        del responses
        response_ids = list(session.execute(select(ModelResponse.id).order_by(ModelResponse.item_id)).scalars())
        dual = {rank for rank in range(n_items) if rng.random() < 0.25}
        tasks = []
        for rank, (item_id, response_id) in enumerate(zip(item_ids, response_ids, strict=True)):
            raters = 2 if rank in dual else 1
            for key in ("A", "B"):
                tasks.append(
                    {
                        "study_id": study_id,
                        "rubric": key,
                        "item_id": item_id,
                        "response_id": response_id if key == "B" else None,
                        "unit_key": f"{key}:r{response_id}" if key == "B" else f"{key}:i{item_id}",
                        "pool_rank": rank + 1,
                        "target_raters": raters,
                        "locked": False,
                        "created_at": now,
                    }
                )
        _insert(session, Task, tasks)
        del tasks
        task_rows = session.execute(
            select(Task.id, Task.target_raters).where(Task.study_id == study_id).order_by(Task.pool_rank, Task.rubric)
        ).all()
        assignments = []
        for n, (task_id, raters) in enumerate(task_rows):
            first = n % len(reviewer_ids)
            for slot in range(1, raters + 1):
                assignments.append(
                    {
                        "task_id": task_id,
                        "reviewer_id": reviewer_ids[(first + 7 * (slot - 1)) % len(reviewer_ids)],
                        "study_id": study_id,
                        "slot": slot,
                        "status": "assigned",
                        "flagged": False,
                        "note": "",
                        "assigned_at": now,
                    }
                )
        _insert(session, Assignment, assignments)
        del assignments, task_rows
        # reviewers work in pool order: the first assignments (both slots of a dual task) are done
        done = session.execute(
            select(Assignment.id, Assignment.task_id, Assignment.reviewer_id, Task.rubric)
            .join(Task, Task.id == Assignment.task_id)
            .where(Assignment.study_id == study_id)
            .order_by(Task.pool_rank, Task.rubric, Assignment.slot)
            .limit(n_annotations)
        ).all()
        _insert(
            session,
            Annotation,
            [
                {
                    "assignment_id": aid,
                    "task_id": tid,
                    "reviewer_id": rid,
                    "rubric": key,
                    "revision": 1,
                    "flags": [],
                    "comment": "",
                    "seconds_on_task": 60.0 + rng.random() * 120,
                    "client_token": f"seed-{aid}",
                    "created_at": now,
                }
                for aid, tid, rid, key in done
            ],
        )
        ids = session.execute(
            select(Annotation.id, Annotation.task_id, Annotation.rubric).order_by(Annotation.id)
        ).all()
        consensus: dict[tuple[int, str], int] = {}
        scores = []
        for annotation_id, task_id, key in ids:
            for dimension in get_rubric(key).dimensions:
                values = dimension.values
                agreed = consensus.setdefault((task_id, dimension.key), rng.choice(values))
                value = agreed if rng.random() < 0.75 else rng.choice(values)
                scores.append(
                    {"annotation_id": annotation_id, "dimension": dimension.key, "rubric": key, "value": value}
                )
        _insert(session, AnnotationScore, scores)
        del scores, consensus
        submitted = [aid for aid, *_rest in done]
        for start in range(0, len(submitted), CHUNK):
            session.execute(
                update(Assignment)
                .where(Assignment.id.in_(submitted[start : start + CHUNK]))
                .values(status="submitted", submitted_at=now)
            )
    engine.dispose()
    return {
        "build_s": time.perf_counter() - started,
        "items": n_items,
        "tasks": 2 * n_items,
        "annotations": n_annotations,
        "reviewers": n_reviewers,
    }


# --- measuring (this process: the "app") -------------------------------------------------------------


def rss_mb(pid: int | str = "self") -> float:
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def p95(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))] if ordered else float("nan")


def signed_in_lead():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(APP), default_timeout=600)
    at.run()
    at.text_input[0].input(LEAD)
    at.text_input[1].input(LEAD_PASSWORD)
    at.button[0].click()
    at.run()
    if "medrev_user" in at.session_state:
        at.run()
    at.session_state["lead_study"] = STUDY
    return at


def _until_severity(at, poll: float = 0.5, limit: float = 600.0) -> float:
    """Seconds of reruns until the Reviewers' quality page no longer says severity is being computed."""
    start = time.perf_counter()
    while any("Computing severity" in c.value for c in at.caption) and time.perf_counter() - start < limit:
        time.sleep(poll)
        at.run()
    return time.perf_counter() - start


def time_pages(figures: dict[str, float]) -> None:
    # A running server has imported the libraries the pages use; do it before timing the first page
    import plotly.express  # noqa: F401

    import review_app.ui.components.charts  # noqa: F401

    for page in LEAD_PAGES:
        at = signed_in_lead()
        start = time.perf_counter()
        at.switch_page(f"views/{page}.py").run()
        _after_script_run()
        first = time.perf_counter() - start
        failure = at.exception[0].value if at.exception else None
        reruns = []
        for _ in range(3):
            start = time.perf_counter()
            at.run()
            _after_script_run()
            reruns.append(time.perf_counter() - start)
        figures[f"{page}_first_load_s"] = round(first, 3)
        figures[f"{page}_rerun_s"] = round(statistics.median(reruns), 3)
        note = f"  EXCEPTION: {str(failure)[:160]}" if failure else ""
        print(f"   {page:<20} first load {first:7.2f} s   rerun {statistics.median(reruns):7.2f} s{note}", flush=True)
        if page == "lead_quality" and not failure:
            # Severity (the harm model and its refit by third) comes in the background after the first load;
            # wait for it here, so that it is measured and the pages after this one do not queue behind it.
            figures["lead_quality_severity_s"] = round(first + sum(reruns) + _until_severity(at), 3)
            print(f"   {'':<20} severity shown after {figures['lead_quality_severity_s']:7.2f} s", flush=True)


def time_export(url: str, workdir: Path, *flags: str) -> tuple[float, float]:
    """``medrev review export`` in a child process: (seconds, peak RSS in MB)."""
    out = workdir / f"export-{uuid.uuid4().hex[:6]}"
    env = os.environ | {"MEDREV_DATABASE_URL": url}
    medrev = Path(sys.executable).with_name("medrev")
    start = time.perf_counter()
    proc = subprocess.Popen(
        [str(medrev), "review", "export", "--study", STUDY, "--out", str(out), *flags],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _pid, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    if status != 0:
        print(f"   export failed: {proc.stderr.read().decode()[-400:]}")
    proc.stderr.close()
    proc.returncode = os.waitstatus_to_exitcode(status)
    return seconds, usage.ru_maxrss / 1024


class _Reviewers:
    """Reviewers working through their queues with the real services: submit, next task, open it."""

    def __init__(self, engine) -> None:
        from sqlalchemy import select

        from review_app.db.engine import read_session
        from review_app.db.models import Reviewer

        with read_session(engine) as session:
            self.ids = list(session.execute(select(Reviewer.id).where(Reviewer.role == "reviewer")).scalars())
        self.engine = engine
        self.rng = random.Random(11)
        self.current: dict[int, int | None] = {}
        self.n = 0

    def _sheet(self, rubric_key: str):
        from review_app.rubrics import ScoreSheet, get_rubric

        rubric = get_rubric(rubric_key)
        return ScoreSheet(rubric=rubric_key, scores={d.key: self.rng.choice(d.values) for d in rubric.dimensions})

    def one(self) -> float | None:
        """One reviewer's submit-to-next in seconds (None when they have nothing left), as a reviewer's
        request: the app runs the review page's runs as ``priority.reviewer_work`` (lead work yields to them)."""
        from review_app.services.priority import reviewer_work

        with reviewer_work():
            return self._one()

    def _one(self) -> float | None:
        from review_app.services import review_queue, reviewing

        reviewer = self.rng.choice(self.ids)
        aid = self.current.get(reviewer) or review_queue.next_assignment(self.engine, reviewer)
        if aid is None:
            return None
        view = reviewing.open_task(self.engine, aid, reviewer)
        self.n += 1
        start = time.perf_counter()
        reviewing.submit(
            self.engine,
            aid,
            reviewer,
            self._sheet(view.rubric),
            client_token=f"bench-{uuid.uuid4().hex[:16]}",
            base_revision=0,
            seconds_on_task=30,
        )
        following = review_queue.next_assignment(self.engine, reviewer)
        if following is not None:
            reviewing.open_task(self.engine, following, reviewer)
        self.current[reviewer] = following
        _reviewer_run_ends()  # what ends the reviewer's page run in the server, before the rest is sent
        return time.perf_counter() - start

    def sample(self, n: int, pause: float = 0.02) -> list[float]:
        out = []
        for _ in range(n):
            seconds = self.one()
            if seconds is not None:
                out.append(seconds)
            time.sleep(pause)  # reviewers think between tasks; the lead's work shares the process meanwhile
        return out


BLOCKS = 6  # blocks of idle and of with-a-lead samples, alternating


def idle_and_with_lead(reviewers: _Reviewers, samples: int, blocks: int = BLOCKS) -> tuple[list, list, list]:
    """Reviewers' submit-to-next samples with no lead, and while a lead reloads Agreement in a loop in
    another thread of this process (as in the app's server), and the lead's reload times.

    The two kinds are taken in alternating blocks (``blocks`` of each, ``samples`` in all of each), so
    both see the same database (every submit adds to it) and the same machine. All idle samples before
    all busy ones compared an early moment with a later one: the idle p95 varied 25-77 ms between
    runs of the same code, and the ratio with it.
    """
    active, stop, ready = threading.Event(), threading.Event(), threading.Event()
    running = threading.Lock()
    lead_runs: list[float] = []
    failures: list[str] = []

    def lead_loop() -> None:
        at = signed_in_lead()
        at.switch_page("views/lead_agreement.py").run()
        _after_script_run()
        ready.set()
        while not stop.is_set():
            if not active.wait(timeout=0.1):
                continue
            with running:
                if not active.is_set():
                    continue
                start = time.perf_counter()
                at.run()
                _after_script_run()
                lead_runs.append(time.perf_counter() - start)
                if at.exception:  # a reload that failed is not a reload: the figures would mislead
                    failures.append(str(at.exception[0].value)[:300])

    lead = threading.Thread(target=lead_loop, daemon=True)
    lead.start()
    ready.wait(timeout=600)
    idle: list[float] = []
    busy: list[float] = []
    per_block = max(samples // blocks, 1)
    for _ in range(blocks):
        idle += reviewers.sample(per_block)
        active.set()
        busy += reviewers.sample(per_block)
        active.clear()
        with running:  # the lead's last reload has ended: the next block is idle
            pass
    stop.set()
    lead.join(timeout=600)
    if failures:
        raise RuntimeError(f"{len(failures)} of the lead's Agreement reloads failed; the first: {failures[0]}")
    if not lead_runs:  # a lead that never reloaded would make the busy samples idle ones
        raise RuntimeError("the lead's Agreement page never reloaded while reviewers submitted")
    return idle, busy, lead_runs


def time_next_task(engine, n: int) -> tuple[float, float]:
    """p95 of next_assignment and, interleaved with it, of ``SELECT 1`` through the same sessions (ms)."""
    from sqlalchemy import text

    from review_app.db.engine import read_session
    from review_app.services import review_queue

    reviewers = _Reviewers(engine)
    samples, baseline = [], []
    for _ in range(n):
        reviewer = reviewers.rng.choice(reviewers.ids)
        start = time.perf_counter()
        review_queue.next_assignment(engine, reviewer)
        samples.append(time.perf_counter() - start)
        start = time.perf_counter()
        with read_session(engine) as session:
            session.execute(text("SELECT 1")).scalar()
        baseline.append(time.perf_counter() - start)
    return p95(samples) * 1000, p95(baseline) * 1000


def _as_the_server_starts() -> None:
    """What ``medrev app``'s server does at start-up: import the pages' modules and freeze them (``medrev_asgi``);
    and AppTest waits for a script run as the server does (:func:`_wait_as_the_server_does`) and
    compiles each script once, as the server does."""
    import review_app.ui.medrev_asgi  # noqa: F401

    if not POLLING_WAIT:
        from streamlit.testing.v1 import local_script_runner

        local_script_runner.require_widgets_deltas = _wait_as_the_server_does
    if not COMPILE_EVERY_RUN:
        from streamlit.runtime.scriptrunner.script_cache import ScriptCache
        from streamlit.testing.v1 import app_test, local_script_runner

        scripts = ScriptCache()
        app_test.ScriptCache = local_script_runner.ScriptCache = lambda: scripts


# AppTest waits for a script run by polling from the calling thread every millisecond, taking the
# interpreter's lock a thousand times a second (14-29 ms of CPU per Agreement reload, most of it while
# the page waits for the compute worker), which reviewers in this process then wait for; the server
# waits for the run's end without polling. MEDREV_BENCH_POLLING_WAIT=1 keeps AppTest's polling (as
# the figures before this change were taken).
POLLING_WAIT = os.environ.get("MEDREV_BENCH_POLLING_WAIT") == "1"
# AppTest also compiles app.py and the page again on every run (a new ScriptCache each time: 7-12 ms of
# the interpreter per Agreement reload, the magic commands' AST pass included); the server compiles
# each script once (its Runtime's one ScriptCache). MEDREV_BENCH_COMPILE_EVERY_RUN=1 keeps AppTest's.
COMPILE_EVERY_RUN = os.environ.get("MEDREV_BENCH_COMPILE_EVERY_RUN") == "1"


def _wait_as_the_server_does(runner, timeout: float = 3) -> None:
    """AppTest's ``require_widgets_deltas`` without its polling: wait for the run's shutdown event."""
    from streamlit.runtime.scriptrunner import ScriptRunnerEvent

    done = threading.Event()

    def on_event(sender, event, **kwargs) -> None:
        if event == ScriptRunnerEvent.SHUTDOWN:
            done.set()

    runner.on_event.connect(on_event, weak=False)
    try:
        if runner.script_stopped() or done.wait(timeout):  # stopped before the connection: in its events
            return
        runner.request_stop()
        runner.join()
        raise RuntimeError(f"AppTest script run timed out after {timeout}(s)")
    finally:
        runner.on_event.disconnect(on_event)


def _after_script_run() -> None:
    """What Streamlit's server does after every script run and AppTest does not: a full collection if
    ``runner.postScriptGC`` is on (Streamlit's default; ``medrev app`` turns it off), holding the GIL in
    the thread that ran the script."""
    from streamlit import config

    if config.get_option("runner.postScriptGC"):
        gc.collect(2)


def _reviewer_run_ends() -> None:
    """The end of a reviewer's page run: the app script's own collection, then the server's."""
    from review_app.ui.session import collect_after_run

    collect_after_run()
    _after_script_run()


def measure(url: str, backend: str, workdir: Path, samples: int, include_pending: bool = False) -> dict[str, float]:
    from review_app.db.connect import dispose_engines, get_engine
    from review_app.db.statistics import refresh_statistics
    from review_app.services import progress

    os.environ["MEDREV_DATABASE_URL"] = url
    _as_the_server_starts()
    figures: dict[str, float] = {}
    engine = get_engine(url)
    if backend == "postgresql":
        start = time.perf_counter()
        progress.study_progress(engine, STUDY)
        print(f"   progress before ANALYZE (baseline)     {time.perf_counter() - start:7.2f} s", flush=True)
    refresh_statistics(engine, ["item", "model_response", "task", "assignment", "annotation", "annotation_score"])
    dispose_engines()
    engine = get_engine(url)
    start = time.perf_counter()
    progress.study_progress(engine, STUDY)
    figures["progress_after_import_s"] = round(time.perf_counter() - start, 3)
    print(f"   progress after the import's ANALYZE    {figures['progress_after_import_s']:7.2f} s", flush=True)
    next_task, select_one = time_next_task(engine, samples)
    figures["next_task_p95_ms"], figures["select1_p95_ms"] = round(next_task, 2), round(select_one, 2)
    print(
        f"   next task p95                          {next_task:7.2f} ms (SELECT 1 baseline p95 {select_one:.2f} ms)",
        flush=True,
    )
    time_pages(figures)
    seconds, peak = time_export(url, workdir)
    figures["export_s"], figures["export_rss_mb"] = round(seconds, 2), round(peak, 1)
    print(f"   export (medrev review export)          {seconds:7.2f} s, peak RSS {peak:.0f} MB", flush=True)
    if include_pending:
        seconds, peak = time_export(url, workdir, "--include-pending")
        figures["export_with_pending_s"], figures["export_with_pending_rss_mb"] = round(seconds, 2), round(peak, 1)
        print(f"   export --include-pending               {seconds:7.2f} s, peak RSS {peak:.0f} MB", flush=True)

    idle, busy, lead_runs = idle_and_with_lead(_Reviewers(engine), samples)
    figures["submit_p95_idle_ms"] = round(p95(idle) * 1000, 2)
    figures["submit_p95_with_lead_ms"] = round(p95(busy) * 1000, 2)
    figures["submit_p95_ratio"] = round(figures["submit_p95_with_lead_ms"] / figures["submit_p95_idle_ms"], 2)
    print(
        f"   submit-to-next p95 idle {figures['submit_p95_idle_ms']:.1f} ms, with a lead on Agreement "
        f"{figures['submit_p95_with_lead_ms']:.1f} ms ({len(lead_runs)} Agreement reloads meanwhile): "
        f"ratio {figures['submit_p95_ratio']:.2f}",
        flush=True,
    )
    from review_app.services import compute_workers

    # the app's memory is its own process's and its compute workers' (they hold the frames now)
    figures["app_process_rss_mb"] = round(rss_mb(), 1)
    figures["worker_rss_mb"] = round(sum(rss_mb(pid) for pid in compute_workers.worker_pids()), 1)
    figures["app_rss_mb"] = round(figures["app_process_rss_mb"] + figures["worker_rss_mb"], 1)
    figures["compute_workers"] = len(compute_workers.worker_pids())
    print(
        f"   app RSS                                {figures['app_rss_mb']:7.0f} MB (app process "
        f"{figures['app_process_rss_mb']:.0f} MB + {figures['compute_workers']} compute worker(s) "
        f"{figures['worker_rss_mb']:.0f} MB; MEDREV_COMPUTE_WORKERS={compute_workers.workers()})",
        flush=True,
    )
    dispose_engines()
    return figures


def run(backend: str, scale: float, samples: int, include_pending: bool = False) -> dict[str, float]:
    from review_db_speed import bench_database

    with bench_database(backend, "medrev_lead_bench") as (workdir, url):
        # a child process builds the study, so this process's memory is the app's alone
        built = subprocess.run(
            [sys.executable, __file__, "--build", url, "--scale", str(scale)],
            check=True,
            stdout=subprocess.PIPE,
            text=True,
        )
        info = json.loads(built.stdout.strip().splitlines()[-1])
        print(
            f"\n== {backend}: {info['items']:,} items, {info['tasks']:,} tasks, {info['annotations']:,} "
            f"annotations, {info['reviewers']} reviewers (bulk build {info['build_s']:.1f} s)",
            flush=True,
        )
        return measure(url, backend, workdir, samples, include_pending)


def _as_the_app_process() -> None:
    """Run again under the settings ``medrev app`` gives its server (``DEFAULTS``, ``PROCESS_DEFAULTS``), if unset.

    This process stands in for the app's server (its AppTest sessions and reviewers' threads), so it
    runs under the same Streamlit settings (the collection after each run) and allocator settings
    (glibc reads them at start only).
    """
    from review_app.ui.server import DEFAULTS, PROCESS_DEFAULTS

    missing = {key: value for key, value in (DEFAULTS | PROCESS_DEFAULTS).items() if key not in os.environ}
    if missing:
        os.execve(sys.executable, [sys.executable, *sys.argv], os.environ | missing)


def main() -> None:
    _as_the_app_process()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies the study size (0.1: a quick check)")
    parser.add_argument(
        "--samples",
        type=int,
        default=600,
        help="submit-to-next samples of each kind (idle, with a lead) and next-task samples (a p95 of 200 moved "
        "by a third between runs of the same code)",
    )
    parser.add_argument("--build", metavar="URL", help="only fill the empty database at URL (migrated here)")
    parser.add_argument(
        "--use",
        metavar="URL",
        help="measure a database an earlier --build filled (it is not rebuilt; reviewers' submits stay in it)",
    )
    parser.add_argument(
        "--export-with-pending",
        action="store_true",
        help="also time the export with the pending tasks included (--include-pending; export_with_pending_s)",
    )
    args = parser.parse_args()
    if args.build:
        print(json.dumps(build(args.build, args.scale)))
        return
    if args.use:
        with tempfile.TemporaryDirectory() as tmp:
            backend = "postgresql" if args.use.startswith("postgresql") else "sqlite"
            print(
                json.dumps(
                    {backend: measure(args.use, backend, Path(tmp), args.samples, args.export_with_pending)},
                    sort_keys=True,
                )
            )
        return
    results = {}
    for backend in ("sqlite", "postgresql") if args.db == "both" else (args.db,):
        results[backend] = run(backend, args.scale, args.samples, args.export_with_pending)
    print(json.dumps(results, sort_keys=True))


if __name__ == "__main__":
    main()
