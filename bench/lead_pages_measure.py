"""The lead pages, the export and reviewers' submits measured in this process, as ``medrev app``'s server runs them.

Used by ``bench/lead_pages_speed.py`` (its docstring says what is measured and why) on a study that
``bench/lead_pages_study.py`` built.
"""

from __future__ import annotations

import gc
import os
import random
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

from lead_pages_study import LEAD, LEAD_PASSWORD, STUDY

APP = Path(__file__).resolve().parents[1] / "review_app" / "ui" / "app.py"
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
