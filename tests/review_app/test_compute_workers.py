"""Lead statistics computed in a worker process: the same numbers, fresh, recovered, errors intact, no frame here."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd
import pytest
from sqlalchemy import create_engine
from sqlalchemy.pool import StaticPool

from review_app.analysis import AnalysisInputError
from review_app.db.engine import make_engine
from review_app.db.errors import DatabaseUnavailable
from review_app.services import adjudication, compute_workers, reviewer_monitoring
from review_app.services.cached_analyses import cached_analysis, study_agreement
from review_app.services.errors import InvalidInput, NotFound
from review_app.services.export.agreement_page import cached_agreement_page
from review_app.services.study_cache import CACHE
from review_app.services.study_frames import study_frame

from .factories import rate
from .test_study_cache import SAFE, WORST, make_study


@pytest.fixture
def study(engine, tmp_path):
    return make_study(engine, tmp_path)


@pytest.fixture(autouse=True)
def empty_cache(monkeypatch):
    monkeypatch.setenv(compute_workers.WORKERS_SETTING, "1")
    CACHE.clear()
    yield
    CACHE.clear()


# Jobs must be module-level functions (the worker imports them by name).
def _pid_job(engine) -> tuple[int, str]:
    return os.getpid(), engine.url.render_as_string(hide_password=True)


def _raise_job(engine, kind: str) -> None:
    if kind == "invalid":
        raise InvalidInput("the minimum number of ratings must be at least 1")
    if kind == "analysis":
        raise AnalysisInputError("no Rubric A annotations")
    if kind == "database":
        raise DatabaseUnavailable("the database is gone.", "postgresql+psycopg://u:secret@h/db")
    raise _Unpicklable("a", "b")


class _Unpicklable(Exception):
    def __init__(self, first: str, second: str) -> None:  # pickling calls cls(*args): args are one string
        super().__init__(f"{first} and {second}")


def _everything(engine):
    """What the lead pages show, as plain comparable values."""
    lead = _lead(engine)
    agreement = cached_agreement_page(engine, "main").result
    analysis = cached_analysis(engine, "main")
    report = reviewer_monitoring.cached_quality_report(engine, lead, "main")
    queue = adjudication.disagreement_queue(engine, "main", "B", include_unanimous=True)
    return agreement, analysis, report, queue


def _lead(engine):
    from sqlmodel import select

    from review_app.db.engine import read_session
    from review_app.db.models import Reviewer

    with read_session(engine) as session:
        return session.exec(select(Reviewer).where(Reviewer.role == "lead")).first()


def test_a_worker_computes_the_same_numbers_as_the_app(study, monkeypatch):
    engine, _lead_row, _slots = study
    monkeypatch.setenv(compute_workers.WORKERS_SETTING, "0")
    here = _everything(engine)
    CACHE.clear()
    monkeypatch.setenv(compute_workers.WORKERS_SETTING, "1")
    pid, url = compute_workers.run(engine, _pid_job)
    assert pid != os.getpid() and pid in compute_workers.worker_pids()  # it really runs elsewhere
    assert url == engine.url.render_as_string(hide_password=True)
    there = _everything(engine)
    pd.testing.assert_frame_equal(here[0].frame(), there[0].frame())
    assert here[0].notes == there[0].notes
    a, b = here[1], there[1]
    pd.testing.assert_frame_equal(a.agreement_frame(), b.agreement_frame())
    pd.testing.assert_frame_equal(a.rubric_b.to_frame(), b.rubric_b.to_frame())
    assert a.notes == b.notes and a.parameters == b.parameters
    assert a.factor_levels() == b.factor_levels() and a.default_references() == b.default_references()
    pd.testing.assert_frame_equal(here[2].table(), there[2].table())
    assert here[2].quality.alerts == there[2].quality.alerts
    assert here[3] == there[3] and len(there[3]) == 4
    # the app kept only results: no frame was read here, and the analysis carries none
    keys = [key for entry in CACHE._entries.values() for key in entry.values]
    assert not any(isinstance(key, tuple) and key[0] == "frame" for key in keys)
    assert there[1].annotations.empty
    assert list(there[1].annotations.columns) == list(study_frame(engine, "main").columns)


def test_no_stale_numbers_after_a_submit_with_a_worker(study):
    engine, _lead_row, slots = study
    before = cached_agreement_page(engine, "main").result
    assert cached_agreement_page(engine, "main").result is before
    rate(engine, slots[4][1][0], WORST)
    rate(engine, slots[4][1][1], SAFE)
    after = cached_agreement_page(engine, "main").result
    assert after.reports["B"]["harm_potential"].n_units == before.reports["B"]["harm_potential"].n_units + 1
    pd.testing.assert_frame_equal(after.frame(), study_agreement(engine, "main").frame())
    queue = adjudication.disagreement_queue(engine, "main", "B", include_unanimous=True)
    assert slots[4][0] in {e.task_id for e in queue}


def _dtypes_job(engine) -> dict[str, str]:
    return {name: str(dtype) for name, dtype in study_frame(engine, "main").dtypes.items()}


def test_a_spawned_worker_builds_frames_with_the_apps_types_and_exports_write_parquet(study, tmp_path):
    """pandas 3 keeps text as pyarrow strings: a worker's frames must have the app's types, column for column."""
    from review_app.services.export import export_study

    engine, _lead_row, _slots = study
    compute_workers.shutdown()  # an app's workers are spawned (a forked one has its parent's modules)
    cached_agreement_page(engine, "main")
    here = {name: str(dtype) for name, dtype in study_frame(engine, "main").dtypes.items()}
    assert compute_workers.run(engine, _dtypes_job) == here
    result = export_study(engine, "main", tmp_path / "out", formats="csv,parquet")
    raw = {file.format: file for file in result.files if file.table == "raw_annotations"}
    assert set(raw) == {"csv", "parquet"}  # the CSV from the worker, the Parquet from here
    parquet = pd.read_parquet(tmp_path / "out" / raw["parquet"].path)
    assert len(parquet) == raw["parquet"].rows == len(pd.read_csv(tmp_path / "out" / raw["csv"].path)) > 0
    assert list(parquet["annotation_id"]) == list(study_frame(engine, "main")["annotation_id"])


def test_workers_yield_the_cpu_to_the_app(study):
    """Lead statistics run at a lower priority than reviewers' requests in the app."""
    engine, _lead_row, _slots = study
    cached_agreement_page(engine, "main")
    (pid,) = compute_workers.worker_pids()
    expected = min(19, os.getpriority(os.PRIO_PROCESS, 0) + compute_workers.WORKER_NICENESS)
    assert os.getpriority(os.PRIO_PROCESS, pid) == expected


def test_a_killed_worker_is_replaced_and_the_computation_retried(study):
    engine, _lead_row, _slots = study
    first = cached_agreement_page(engine, "main").result
    (pid,) = compute_workers.worker_pids()
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while pid in compute_workers.worker_pids() and time.monotonic() < deadline:
        time.sleep(0.05)
    CACHE.clear()
    again = cached_agreement_page(engine, "main").result  # the broken pool is replaced; the page is not broken
    pd.testing.assert_frame_equal(first.frame(), again.frame())
    assert compute_workers.worker_pids() and pid not in compute_workers.worker_pids()


def test_errors_come_back_with_their_type_and_message(engine):
    with pytest.raises(InvalidInput, match="at least 1"):
        compute_workers.run(engine, _raise_job, "invalid")
    with pytest.raises(AnalysisInputError, match="no Rubric A annotations"):
        compute_workers.run(engine, _raise_job, "analysis")
    with pytest.raises(DatabaseUnavailable, match="the database is gone") as raised:
        compute_workers.run(engine, _raise_job, "database")
    assert "secret" not in str(raised.value.url)
    with pytest.raises(RuntimeError, match="_Unpicklable: a and b"):
        compute_workers.run(engine, _raise_job, "other")
    assert compute_workers.run(engine, _pid_job)[0] != os.getpid()  # the pool survived every error
    with pytest.raises(NotFound):  # a service error from inside a real job (no such study)
        compute_workers.run(engine, adjudication._queue, "nope", "B", (0,), False, False, True)


def test_in_memory_sqlite_and_zero_workers_compute_here(monkeypatch, tmp_path):
    memory = create_engine("sqlite://", poolclass=StaticPool)
    assert compute_workers.in_process(memory)
    assert compute_workers.in_process(create_engine("sqlite:///:memory:"))
    assert not compute_workers.in_process(make_engine(f"sqlite:///{tmp_path / 'x.db'}"))
    assert compute_workers.in_process(create_engine(f"sqlite:///{tmp_path / 'x.db'}", poolclass=StaticPool))
    assert compute_workers.run(memory, _pid_job)[0] == os.getpid()
    monkeypatch.setenv(compute_workers.WORKERS_SETTING, "0")
    assert compute_workers.workers() == 0 and compute_workers.in_process(make_engine(f"sqlite:///{tmp_path / 'y.db'}"))
    monkeypatch.setenv(compute_workers.WORKERS_SETTING, "many")
    with pytest.raises(ValueError, match="MEDREV_COMPUTE_WORKERS"):
        compute_workers.workers()


def test_prestart_starts_the_workers_before_any_statistic_and_only_for_a_worker_database(monkeypatch, tmp_path):
    compute_workers.shutdown()
    memory = create_engine("sqlite://", poolclass=StaticPool)
    compute_workers.prestart(memory)  # statistics of an in-memory database run here: nothing to start
    assert compute_workers.worker_pids() == []
    engine = make_engine(f"sqlite:///{tmp_path / 'x.db'}")
    compute_workers.prestart(engine, ("review_app.services.study_analysis",))
    deadline = time.monotonic() + 30
    while not compute_workers.worker_pids() and time.monotonic() < deadline:
        time.sleep(0.05)
    (pid,) = compute_workers.worker_pids()
    compute_workers.prestart(engine)  # started already: the same worker
    assert compute_workers.worker_pids() == [pid]
    assert compute_workers.run(engine, _pid_job)[0] == pid


def _forked_job(engine) -> tuple[int, bool, int]:
    """The worker's pid, whether it has a module only its parent imported (it was forked), and a
    query through its own engine."""
    with engine.connect() as connection:
        one = connection.exec_driver_sql("SELECT 1").scalar()
    return os.getpid(), "medrev_parent_only" in sys.modules, one


FORKED = """
import gc, os, sys, threading
from review_app.db.connect import get_engine
from review_app.services import compute_workers
from tests.review_app.test_compute_workers import _forked_job
engine = get_engine(sys.argv[1])
with engine.connect() as connection:  # a pooled connection the worker inherits if forked
    connection.exec_driver_sql("SELECT 1")
sys.modules["medrev_parent_only"] = type(sys)("medrev_parent_only")
if sys.argv[2] == "thread":  # another thread runs: forking is not safe
    threading.Thread(target=threading.Event().wait, daemon=True).start()
compute_workers.prestart(engine, (), fork=True)
pid, forked, one = compute_workers.run(engine, _forked_job)
compute_workers.shutdown()  # the worker ends
with engine.connect() as connection:  # the connection it shared is still this process's
    print(pid != os.getpid(), forked, one, connection.exec_driver_sql("SELECT 2").scalar(), gc.get_freeze_count() > 0)
"""


@pytest.mark.parametrize("threads", ["alone", "thread"])
def test_a_command_line_forks_its_workers_only_while_it_runs_one_thread(engine, threads):
    """``prestart(fork=True)``: forked (nothing to import again) from a process running one thread, its
    heap frozen first; the worker opens its own connections and leaves its parent's working after it ends."""
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", FORKED, engine.url.render_as_string(hide_password=False), threads],
        cwd=root,
        env=os.environ | {compute_workers.WORKERS_SETTING: "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    forked = str(threads == "alone")
    assert done.stdout.split() == ["True", forked, "1", "2", forked]  # frozen before the fork (see prestart)


APP_KILLED = """
import os, sys
from review_app.db.engine import make_engine
from review_app.services import compute_workers
from tests.review_app.test_compute_workers import _pid_job
print(compute_workers.run(make_engine(sys.argv[1]), _pid_job)[0], flush=True)
os.kill(os.getpid(), 15)  # SIGTERM: no exit handlers run
"""


def test_a_killed_app_leaves_no_worker_behind(tmp_path):
    root = Path(__file__).resolve().parents[2]
    url = f"sqlite:///{tmp_path / 'orphan.db'}"
    done = subprocess.run(
        [sys.executable, "-c", APP_KILLED, url],
        cwd=root,
        env=os.environ | {compute_workers.WORKERS_SETTING: "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == -signal.SIGTERM, done.stderr
    worker = int(done.stdout.split()[0])
    deadline = time.monotonic() + 60
    while _running(worker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _running(worker)  # it noticed its parent was gone and ended


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process (an ended one not yet reaped is a zombie: state Z)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _state(pid: int) -> str:
    """The process's state letter (``T``: stopped)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def _until(condition, seconds: float = 60.0) -> bool:
    """Wait for something that will happen (a signal taking effect); the bound only ends a failing test."""
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.005)
    return condition()


class _PauseClock:
    """The pauses' clock (``compute_workers._clock``), moved by the test instead of by the machine's time."""

    def __init__(self, now: float) -> None:
        self.now = now
        self.watchdog_read = threading.Event()

    def __call__(self) -> float:
        if threading.current_thread().name == "medrev-worker-pause":
            self.watchdog_read.set()
        return self.now

    def move_to(self, now: float) -> None:
        """Set the time; with a pause on, return once the pause's watchdog has looked at the new time and
        acted on it (it holds ``_pause`` until it waits again)."""
        with compute_workers._pause:
            self.now = now
            self.watchdog_read.clear()
            compute_workers._pause.notify_all()
            paused = bool(compute_workers._paused)
        if paused:
            assert self.watchdog_read.wait(60), "the pause's watchdog never looked at the clock"
            with compute_workers._pause:
                pass


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc")
def test_workers_are_paused_while_a_reviewer_s_request_runs_and_at_most_briefly(study, monkeypatch):
    from review_app.services.priority import reviewer_work

    engine, _lead_row, _slots = study
    clock = _PauseClock(1000.0)
    monkeypatch.setattr(compute_workers, "_clock", clock)
    monkeypatch.setattr(compute_workers, "_run_until", 0.0)  # no pause cut short by an earlier test
    monkeypatch.setattr(compute_workers, "PAUSE_AT_MOST_S", 0.5)
    assert compute_workers.run(engine, _pid_job)[0] != os.getpid()
    (pid,) = compute_workers.worker_pids()
    assert _state(pid) != "T"
    with reviewer_work(), reviewer_work():  # nested: one request
        assert compute_workers._paused == [pid]
        assert _until(lambda: _state(pid) == "T")  # a signal takes effect when the process next runs
    assert compute_workers._paused == []
    assert _until(lambda: _state(pid) != "T")
    # a reviewer's request that lasts: the worker stays stopped until the pause has lasted PAUSE_AT_MOST_S ...
    with reviewer_work(), ThreadPoolExecutor(1) as lead:
        assert compute_workers._paused == [pid]
        assert _until(lambda: _state(pid) == "T")
        job = lead.submit(compute_workers.run, engine, _pid_job)
        clock.move_to(1000.49)
        assert compute_workers._paused == [pid] and _state(pid) == "T" and not job.done()
        # ... then it runs (a lead's job with it), and goes on running for as long
        clock.move_to(1000.5)
        assert compute_workers._paused == [] and compute_workers._run_until == 1001.0
        assert job.result(timeout=120)[0] == pid
    # the next request within that time leaves the worker running ...
    clock.move_to(1000.99)
    with reviewer_work():
        assert compute_workers._paused == []
    # ... and the one after it pauses the worker again
    clock.move_to(1001.0)
    with reviewer_work():
        assert compute_workers._paused == [pid]
    compute_workers.shutdown()
    assert compute_workers.worker_pids() == []
