"""Lead statistics computed in a separate worker process, so reviewers in the app are never slowed.

Reading a study's annotations frame and computing agreement, the analysis, the Rubric A bootstrap,
reviewers' quality or the adjudication queue from it is Python and pandas work that holds the GIL
for seconds at panel scale. Done in the Streamlit process, it would stall every reviewer's submit in
the same process while a lead reloads a page, and the frames it caches would make the app large.
:func:`run` sends such a computation (a module-level *job* function and its small arguments) to a
pool of ``MEDREV_COMPUTE_WORKERS`` processes (``spawn`` context, or forked from a command line, see
:func:`prestart`; started on first use, shut down at exit); the app thread that asked waits on the
future without the GIL, and gets back only the small, picklable result, which
:mod:`review_app.services.study_cache` keeps per data version.

* A job is ``job(engine, *args, **kwargs)``. In a worker, ``engine`` is the worker's own engine on
  the same database (opened from the URL with its password, one per URL, a few kept); the frame is
  read through the worker's own :data:`~review_app.services.study_cache.CACHE`, keyed by data version
  like the app's, so agreement, analysis and quality on one version read the frame once there.
* ``MEDREV_COMPUTE_WORKERS=0`` computes in the calling process. So does a database a
  second process cannot open: in-memory SQLite (``sqlite://``, ``StaticPool``). A job run inside a
  worker runs its nested jobs in place.
* An exception raised by a job is raised again in the app with its type and message (service and
  analysis errors pickle). A worker that died (killed, out of memory: ``BrokenProcessPool``) is
  replaced and the computation tried once more, so a page does not stay broken.
* Jobs live in importable modules: a worker does not run the parent's ``__main__`` (Streamlit's
  page script) again.
* ``progress``: a job that reports progress (the bootstrap's bar) writes the fraction done into a
  slot of shared memory; the waiting app thread polls it and calls the page's callback.
* Reviewers first: while a reviewer's request is in flight in the app (``priority.reviewer_work``),
  the workers are stopped (``SIGSTOP``) and continued when none is. On a small machine a worker
  computing agreement slows reviewers' submits on another core through the hardware they share
  (caches, memory bandwidth), which its niceness cannot prevent. A pause lasts at most ``PAUSE_AT_MOST_S``
  and the workers then run at least as long before the next one, so a stream of reviewers halves a
  lead's statistics at worst and a worker holding something a reviewer waits for (a database lock)
  goes on within that time. :func:`shutdown` continues them first.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import ctypes.util
import gc
import importlib
import multiprocessing
import multiprocessing.connection
import os
import pickle
import signal
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import popen_spawn_posix, spawn
from multiprocessing.context import SpawnContext, SpawnProcess
from typing import Any, TypeVar

from sqlalchemy import Engine

from review_app.db.engine import memory_only
from review_app.services import priority

T = TypeVar("T")
WORKERS_SETTING = "MEDREV_COMPUTE_WORKERS"
DEFAULT_WORKERS = 1
PROGRESS_SLOTS = 64  # concurrent jobs that can report progress; more run without a bar
POLL_SECONDS = 0.1
WORKER_ENGINES = 4  # engines a worker keeps open (one per database URL, least recently used closed)
# Workers run at a lower CPU priority than the app: when cores are short, a reviewer's submit in the app
# goes first and a lead's statistics take what is left (on an idle machine they run at full speed).
WORKER_NICENESS = 10

_lock = threading.Lock()
_executor: ProcessPoolExecutor | None = None
_slots: Any = None  # multiprocessing RawArray of doubles shared with the workers
_free_slots: list[int] = []
_in_worker = False  # set in worker processes: their nested jobs run in place
_PENDING = object()


def workers() -> int:
    """Worker processes for lead statistics (``MEDREV_COMPUTE_WORKERS``; 0: compute in this process)."""
    if _in_worker:
        return 0
    raw = os.environ.get(WORKERS_SETTING, "").strip()
    if not raw:
        return DEFAULT_WORKERS
    try:
        count = int(raw)
    except ValueError:
        raise ValueError(
            f"{WORKERS_SETTING} must be a whole number of processes (0: compute in the app), got {raw!r}"
        ) from None
    if count < 0:
        raise ValueError(f"{WORKERS_SETTING} must be 0 or more, got {count}")
    return count


def in_process(engine: Engine) -> bool:
    """Whether jobs on ``engine`` run in this process: no workers, or a database only this process sees."""
    return workers() == 0 or memory_only(engine)


def run(
    engine: Engine,
    job: Callable[..., T],
    *args: Any,
    progress: Callable[[float], None] | None = None,
    **kwargs: Any,
) -> T:
    """``job(engine, *args, **kwargs)`` in a worker process (or here, see :func:`in_process`).

    ``job`` must be a module-level function and its arguments and result picklable. With
    ``progress``, the job is also passed ``progress=`` (a callable taking the fraction done) and the
    page's callback sees the worker's progress while this thread waits.
    """
    if in_process(engine):
        if progress is not None:
            kwargs["progress"] = progress
        return job(engine, *args, **kwargs)
    from review_app.services.study_cache import note_measured, uncached_active

    url = engine.url.render_as_string(hide_password=False)
    call = (url, job, args, kwargs, uncached_active())
    for attempt in range(2):
        executor = _pool()
        slot = _take_slot() if progress is not None else None
        try:
            future = executor.submit(_call_in_worker, *call, slot)
            value, size = _wait(future, progress, slot)
            note_measured(value, size)  # the cache files it under the worker's measure
            return value
        except BrokenProcessPool:
            _discard(executor)  # a worker died: start new ones and try once more
            if attempt:
                raise
        finally:
            if slot is not None:
                _give_slot(slot)
    raise AssertionError("unreachable")  # pragma: no cover


def prestart(engine: Engine, modules: tuple[str, ...] = (), *, fork: bool = False) -> bool:
    """Start the worker processes now, without waiting, so a lead's first statistic does not pay for it.

    A worker's start (a new interpreter importing pandas, SciPy, statsmodels and the services) took
    0.8-2 s, added to the first lead page that needed it. ``medrev app``'s server calls this when it
    starts, and every page run again (``ui.session.start_compute_workers``), naming the modules whose
    jobs the pages send (``modules``, imported in the worker now); once the pool is up it costs a
    lock and a check.
    Nothing happens when statistics run in the app (:func:`in_process`).

    ``fork=True`` (a command line, before it starts any thread): the workers are forked from this
    process, which has imported the jobs' modules already, instead of started as new interpreters
    that import them again. A command-line export's worker spent 1.5 s of CPU on those imports, on
    two cores the export keeps busy to its end. A process may fork only while it runs one thread (a
    lock another thread held at that moment would stay held in the child forever), so with other
    threads running the workers are started as usual (:func:`can_fork`). Before forking, the objects
    this process holds (its imported modules, mostly) are frozen out of the garbage collector
    (``gc.freeze``, Python's advice before a fork): the worker's collections do not write to the pages
    it shares with this process, and this process's own collections, including its last one at exit,
    do not walk them again (0.4 s of CPU less for a command-line export). The freeze is not undone: a
    command line's process ends after its command, which shuts the workers it started down
    (:func:`shutdown`), so that a process running the command in place (a test) keeps no forked pool.

    Returns whether this call started the workers.
    """
    if in_process(engine):
        return False
    with _lock:
        started = _executor is not None
    if started:
        return False
    forking = fork and can_fork()
    if forking:
        gc.freeze()
    executor = _pool(fork=forking)
    for _ in range(workers()):
        executor.submit(_import_modules, modules)
    return True


def can_fork() -> bool:
    """Whether workers may be forked from this process: on Linux (macOS's system libraries are not safe
    to use after a fork, which is why Python spawns there), while only this thread runs."""
    return sys.platform.startswith("linux") and threading.active_count() == 1


def _import_modules(modules: tuple[str, ...]) -> None:
    """Import ``modules`` in a worker, so its first job finds them loaded."""
    for name in modules:
        importlib.import_module(name)


def _wait(future: Future, progress: Callable[[float], None] | None, slot: int | None) -> Any:
    """The future's result; while it runs, the job's progress goes to ``progress`` (GIL released)."""
    if progress is None or slot is None:
        return future.result()
    last = 0.0
    while True:
        try:
            result = future.result(timeout=POLL_SECONDS)
        except TimeoutError:
            result = _PENDING
        done = float(_slots[slot])
        if done > last:  # the last report too, even when the job ended between two polls
            last = done
            progress(done)
        if result is not _PENDING:
            return result


class _WorkerProcess(SpawnProcess):
    """A spawned worker that does not run the parent's ``__main__`` again.

    ``spawn`` re-imports the parent's main script in the child so that functions defined there
    unpickle; here that script is Streamlit's app page (run as ``__main__``), which must not run
    in a worker (it would draw a page and fail without a session). Jobs live in importable
    modules, so the worker starts from the parent's ``sys.path`` and working folder only.
    """

    @staticmethod
    def _Popen(process_obj):
        with _spawn_lock:
            original = spawn.get_preparation_data

            def without_main(name: str) -> dict[str, Any]:
                data = original(name)
                data.pop("init_main_from_path", None)
                data.pop("init_main_from_name", None)
                return data

            spawn.get_preparation_data = without_main
            try:
                return popen_spawn_posix.Popen(process_obj)
            finally:
                spawn.get_preparation_data = original


class _WorkerContext(SpawnContext):
    Process = _WorkerProcess


_spawn_lock = threading.Lock()


def _pool(*, fork: bool = False) -> ProcessPoolExecutor:
    """The worker pool, made on first use: spawned workers, or (``fork``, see :func:`prestart`) forked
    ones. A pool that broke is replaced by a spawned one."""
    global _executor, _slots
    with _lock:
        if _executor is None:
            context = multiprocessing.get_context("fork") if fork else _WorkerContext()
            if _slots is None:
                _slots = context.RawArray("d", PROGRESS_SLOTS)
                _free_slots.extend(range(PROGRESS_SLOTS))
            _executor = ProcessPoolExecutor(
                max_workers=workers(), mp_context=context, initializer=_start_worker, initargs=(_slots, fork)
            )
        return _executor


def _discard(executor: ProcessPoolExecutor) -> None:
    """Forget a broken pool (if still the current one); the next job starts a new one."""
    global _executor
    with _lock:
        if _executor is executor:
            _executor = None
    executor.shutdown(wait=False, cancel_futures=True)


def _take_slot() -> int | None:
    with _lock:
        if not _free_slots:
            return None
        slot = _free_slots.pop()
        _slots[slot] = 0.0
        return slot


def _give_slot(slot: int) -> None:
    with _lock:
        _free_slots.append(slot)


def shutdown() -> None:
    """Stop the worker processes (at exit; tests). Queued jobs are cancelled, a running one finishes."""
    global _executor
    _continue_workers()
    with _lock:
        executor, _executor = _executor, None
    if executor is not None:
        executor.shutdown(wait=True, cancel_futures=True)


# --- paused while reviewers' requests run (see the module's docstring) ------------------------------

PAUSE_AT_MOST_S = 0.1
# The pauses' clock. A seam: a test's own clock decides when a pause has lasted long enough, so what
# it checks does not depend on how fast the machine runs; it notifies ``_pause`` after moving it.
_clock: Callable[[], float] = time.monotonic
_pause = threading.Condition(threading.Lock())
_paused: list[int] = []  # the workers stopped now
_paused_at = 0.0
_run_until = 0.0  # after a pause cut short, the workers run until then whatever reviewers do
_watchdog: threading.Thread | None = None


def _signal(pids: list[int], signum: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):  # ended meanwhile
            os.kill(pid, signum)


def _pause_workers() -> None:
    """A reviewer's request started with none in flight: stop the workers (``priority.on_reviewers``)."""
    global _paused_at, _watchdog
    if not hasattr(signal, "SIGSTOP"):
        return
    with _pause:
        if _paused or _clock() < _run_until:
            return
        with _lock:
            pids = list(getattr(_executor, "_processes", None) or {}) if _executor is not None else []
        if not pids:
            return
        _signal(pids, signal.SIGSTOP)
        _paused.extend(pids)
        _paused_at = _clock()
        if _watchdog is None or not _watchdog.is_alive():
            _watchdog = threading.Thread(target=_cut_short, name="medrev-worker-pause", daemon=True)
            _watchdog.start()
        _pause.notify_all()


def _continue_workers() -> None:
    """The last reviewer's request in flight ended (or exit): continue the stopped workers."""
    with _pause:
        if _paused:
            _signal(_paused, signal.SIGCONT)
            _paused.clear()
            _pause.notify_all()


def _cut_short() -> None:
    """Continue the workers of a pause that reached ``PAUSE_AT_MOST_S``, and let them run as long."""
    global _run_until
    with _pause:
        while True:
            _pause.wait_for(lambda: bool(_paused))
            started = _paused_at
            ends = started + PAUSE_AT_MOST_S
            while _paused and _paused_at == started and (left := ends - _clock()) > 0:
                _pause.wait(left)
            if _paused and _paused_at == started:
                _signal(_paused, signal.SIGCONT)
                _paused.clear()
                _run_until = _clock() + PAUSE_AT_MOST_S


priority.on_reviewers(_pause_workers, _continue_workers)


def worker_pids() -> list[int]:
    """Process ids of the live workers (benchmarks count their memory; tests kill one)."""
    with _lock:
        if _executor is None:
            return []
        processes = dict(getattr(_executor, "_processes", None) or {})
    return [pid for pid, process in processes.items() if process.is_alive()]


atexit.register(shutdown)


# --- in the worker process ---------------------------------------------------------------------------

_worker_slots: Any = None
_engines: OrderedDict[str, Engine] = OrderedDict()
_libc: Any = None


def _start_worker(slots: Any, forked: bool = False) -> None:
    """Set up a worker: its nested jobs run in place, progress goes to ``slots``, and it ends with the app.

    It runs niced (:data:`WORKER_NICENESS`), so reviewers' requests in the app win the CPU from it.

    It loads pandas as the app does, pyarrow included: pandas 3 keeps text columns as pyarrow
    strings whenever pyarrow is installed, so frames sent to a worker and the results it returns
    carry pyarrow arrays, and a worker without pyarrow could neither read the one nor compute the
    other with the app's types.

    An app killed without running its exit handlers (SIGTERM, SIGKILL) would leave its workers
    waiting for jobs forever; a watcher thread ends the worker when its parent process is gone.

    A forked worker holds copies of its parent's engines and their pooled connections: it lets go of
    them without closing them (they are the parent's), and opens its own (:func:`_worker_engine`).
    """
    global _in_worker, _worker_slots
    _in_worker = True
    _worker_slots = slots
    if forked:
        from review_app.db.connect import forget_engines

        forget_engines()
    with contextlib.suppress(OSError):  # not permitted here: run at the app's priority
        os.nice(WORKER_NICENESS)
    parent = multiprocessing.parent_process()
    if parent is not None:
        threading.Thread(target=_exit_with, args=(parent.sentinel,), daemon=True, name="parent-watch").start()


def _exit_with(sentinel: int) -> None:
    multiprocessing.connection.wait([sentinel])
    os._exit(0)


def _worker_engine(url: str) -> Engine:
    from review_app.db.engine import make_engine

    engine = _engines.get(url)
    if engine is None:
        # workers only read: SQLite checkpoints are the app's (``db.engine``), not a stopped worker's
        engine = _engines[url] = make_engine(url, pool_size=2, max_overflow=2, sqlite_checkpoints="commit")
        while len(_engines) > WORKER_ENGINES:
            _url, old = _engines.popitem(last=False)
            old.dispose()
    _engines.move_to_end(url)
    return engine


def _call_in_worker(
    url: str, job: Callable[..., T], args: tuple, kwargs: dict, uncached: bool, slot: int | None
) -> tuple[T, int]:
    """Run one job in a worker: on the worker's engine, uncached if the app's call was, with progress.
    Returns the result and its size (``study_cache.nbytes``), measured here rather than in the app.

    An exception that would not survive the trip back (a class whose constructor takes other
    arguments than its message) is raised as a ``RuntimeError`` naming it, rather than breaking the
    pool.
    """
    from review_app.services.study_cache import compute_uncached, nbytes

    engine = _worker_engine(url)
    if slot is not None:

        def progress(done: float) -> None:
            _worker_slots[slot] = float(done)

        kwargs = {**kwargs, "progress": progress}
    try:
        if uncached:
            value = compute_uncached(lambda _version: job(engine, *args, **kwargs), ())
        else:
            value = job(engine, *args, **kwargs)
    except Exception as error:
        try:
            pickle.loads(pickle.dumps(error))
        except Exception:
            raise RuntimeError(f"{type(error).__name__}: {error}") from None
        raise
    finally:
        _release_memory()
    return value, nbytes(value)


def _release_memory() -> None:
    """Return the heap a job freed to the system (glibc keeps it otherwise).

    A statistic's temporaries are freed when it ends but stay in the worker's resident memory;
    trimming after each job took a worker from 282 to 252 MB after agreement, analysis and
    quality at bench scale 0.1. A no-op where the C library has no ``malloc_trim``.
    """
    global _libc
    if _libc is None:
        try:
            _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        except OSError:
            _libc = False
    if _libc and hasattr(_libc, "malloc_trim"):
        _libc.malloc_trim(0)
