"""Reviewers first: in the app's one interpreter, a lead page's work waits while a reviewer's runs.

Every Streamlit session of ``medrev app`` runs its scripts in a thread of one Python process, and
Python runs one thread at a time (the GIL). A lead page's rerun still holds the interpreter for
tens of milliseconds in the app process after its numbers come back from the compute worker
(unpickling them, building its figures and tables, Streamlit's elements); a reviewer's submit that
arrives meanwhile shares the interpreter with it in slices of ``sys.getswitchinterval`` and is
slowed by the lead's work.

So the two kinds of work are told apart:

* a reviewer's request (the review and queue pages' runs, the scoring region's reruns) runs inside
  :func:`reviewer_work`, which counts the requests in flight;
* lead work calls :func:`yield_to_reviewers` between its steps (a lead page's start, each figure
  and table it draws: ``lead_step``): while a reviewer's request is in flight, it waits, without
  the interpreter, until none is, for at most ``MAX_WAIT_S`` per step, so a stream of reviewers
  slows a lead page but never stops it. A step already running is not interrupted: the shorter the
  steps, the less a reviewer waits.

Lead work in the compute workers (other processes) is paused while reviewers' requests are in flight
(``compute_workers`` listens through :func:`on_reviewers`): on a 2-core machine it otherwise slowed
them through the hardware they share, although it runs niced on the other core.

The wait needs no lock when no reviewer is in flight (the common case: one integer read). A thread
inside :func:`reviewer_work` never waits for itself (a lead reviewing tasks, a page that draws a
figure within a reviewer's request).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

# A lead step waits at most this long for reviewers (a stream of them must not stall a lead page:
# ten waits at the bound are a second).
MAX_WAIT_S = 0.1

_changed = threading.Condition(threading.Lock())
_in_flight = 0
_local = threading.local()
_listeners: list[tuple[Callable[[], None], Callable[[], None]]] = []


def on_reviewers(first_started: Callable[[], None], last_ended: Callable[[], None]) -> None:
    """Call ``first_started`` when a reviewer's request starts with none in flight, and ``last_ended``
    when the last one in flight ends. They are called under this module's lock, in order: keep them short.
    """
    with _changed:
        _listeners.append((first_started, last_ended))


@contextmanager
def reviewer_work() -> Iterator[None]:
    """Mark the calling thread's work as a reviewer's request while the block runs (nestable).

    Also a decorator (``@reviewer_work()``): each call of the decorated function is one request.
    """
    global _in_flight
    depth = getattr(_local, "depth", 0)
    _local.depth = depth + 1
    with _changed:
        _in_flight += 1
        if _in_flight == 1:
            for first_started, _ in _listeners:
                first_started()
    try:
        yield
    finally:
        with _changed:
            _in_flight -= 1
            if not _in_flight:
                _changed.notify_all()
                for _, last_ended in _listeners:
                    last_ended()
        _local.depth = depth


def lead_step(function: Callable[P, T]) -> Callable[P, T]:
    """Decorate a step of lead work (a figure, a table) so it first yields to reviewers in flight."""

    @wraps(function)
    def step(*args: P.args, **kwargs: P.kwargs) -> T:
        yield_to_reviewers()
        return function(*args, **kwargs)

    return step


def reviewers_in_flight() -> int:
    """How many reviewers' requests are running now (in every thread of this process)."""
    return _in_flight


def yield_to_reviewers(max_wait: float = MAX_WAIT_S, *, clock: Callable[[], float] = time.perf_counter) -> float:
    """Wait (without the interpreter) while a reviewer's request runs, at most ``max_wait`` seconds.

    Called by lead work between its steps. Returns the seconds waited by ``clock`` (0 when no
    reviewer was in flight or the caller is one; then the clock is not read). ``clock`` is a seam:
    a test's own clock makes the value it checks independent of the machine's speed.
    """
    if not _in_flight or getattr(_local, "depth", 0):
        return 0.0
    start = clock()
    with _changed:
        _changed.wait_for(lambda: not _in_flight, timeout=max_wait)
    return clock() - start
