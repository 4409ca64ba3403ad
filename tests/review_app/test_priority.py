"""Reviewers first in the app's one interpreter: lead work waits while a reviewer's request runs.

No test measures the machine's time: a reviewer's request runs until the test releases it, the seconds
a lead step reports come from a clock the test hands it, and "the lead step is waiting" is seen on the
module's condition itself, so the tests pass or fail alike on an idle and on a loaded machine.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest

from review_app.services import priority

JOIN_S = 60  # a generous bound for a thread that has nothing left to wait for


class _Reviewer:
    """A reviewer's request in another thread that runs until the test releases it."""

    def __init__(self, events: list[str]) -> None:
        self.events = events
        self.entered, self.release = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._work, daemon=True)
        self.thread.start()
        assert self.entered.wait(JOIN_S)

    def _work(self) -> None:
        with priority.reviewer_work():
            self.entered.set()
            self.release.wait()
            self.events.append("reviewer done")

    def finish(self) -> None:
        self.release.set()
        self.thread.join(JOIN_S)
        assert not self.thread.is_alive()


@pytest.fixture
def reviewer() -> Iterator[Callable[[list[str]], _Reviewer]]:
    """Start reviewers' requests; any still running when the test ends is released (no count left over)."""
    started: list[_Reviewer] = []

    def start(events: list[str]) -> _Reviewer:
        started.append(_Reviewer(events))
        return started[-1]

    yield start
    for request in started:
        request.release.set()
        request.thread.join(JOIN_S)


class _WatchedCondition(threading.Condition):
    """The module's condition, telling the test when a lead step begins to wait on it."""

    def __init__(self) -> None:
        super().__init__(threading.Lock())
        self.waiting = threading.Event()

    def wait_for(self, predicate: Callable[[], bool], timeout: float | None = None) -> bool:
        self.waiting.set()
        return super().wait_for(predicate, timeout)


class _Untouchable:
    """Stands in for the module's condition where the code must not take the lock."""

    def __enter__(self) -> None:
        raise AssertionError("took the lock")

    def __exit__(self, *exc: object) -> None:  # pragma: no cover - never entered
        return None


def _unread_clock() -> float:
    raise AssertionError("read the clock: it timed a wait")


def _clock(*ticks: float) -> Callable[[], float]:
    values = iter(ticks)
    return lambda: next(values)


def _in_thread(target: Callable[[], None]) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def test_no_reviewer_in_flight_costs_no_wait(monkeypatch):
    """The common case is one integer read: no lock taken, no clock read, nothing waited."""
    monkeypatch.setattr(priority, "_changed", _Untouchable())
    assert priority.reviewers_in_flight() == 0
    assert priority.yield_to_reviewers(max_wait=5, clock=_unread_clock) == 0.0


def test_a_lead_step_waits_for_the_reviewer_in_flight_to_end(monkeypatch, reviewer):
    condition = _WatchedCondition()
    monkeypatch.setattr(priority, "_changed", condition)
    events: list[str] = []
    request = reviewer(events)
    assert priority.reviewers_in_flight() == 1
    waited: list[float] = []

    def lead() -> None:
        try:
            # far longer than the test's own bound: only the reviewer's end can wake the step in time
            waited.append(priority.yield_to_reviewers(max_wait=10 * JOIN_S, clock=_clock(10.0, 10.25)))
            events.append("lead step")
        finally:
            condition.waiting.set()  # also when it did not wait: the test goes on and sees it

    step = _in_thread(lead)
    assert condition.waiting.wait(JOIN_S)
    assert events == []  # waiting, while the reviewer's request runs
    request.finish()
    step.join(JOIN_S)
    assert not step.is_alive(), "the lead step was not woken when the reviewer's request ended"
    assert events == ["reviewer done", "lead step"]
    assert waited == [0.25]  # the seconds between the clock's two readings
    assert priority.reviewers_in_flight() == 0


def test_a_stream_of_reviewers_slows_a_lead_step_but_never_stops_it(reviewer):
    events: list[str] = []
    request = reviewer(events)  # never ends while the lead step runs
    waited: list[float] = []
    step = _in_thread(lambda: waited.append(priority.yield_to_reviewers(max_wait=0.01, clock=_clock(3.0, 3.5))))
    step.join(JOIN_S)
    assert not step.is_alive(), "the lead step waited past its bound for a reviewer that did not end"
    assert waited == [0.5] and events == [] and priority.reviewers_in_flight() == 1  # went on while it ran
    request.finish()
    assert priority.reviewers_in_flight() == 0


def test_a_reviewer_s_own_thread_never_waits_for_itself():
    with priority.reviewer_work(), priority.reviewer_work():  # nested: still one thread's request
        assert priority.reviewers_in_flight() == 2
        assert priority.yield_to_reviewers(max_wait=5, clock=_unread_clock) == 0.0
    assert priority.reviewers_in_flight() == 0


def test_the_count_drops_when_a_reviewer_s_request_fails():
    try:
        with priority.reviewer_work():
            raise ValueError("the request failed")
    except ValueError:
        pass
    assert priority.reviewers_in_flight() == 0
    assert priority.yield_to_reviewers(max_wait=5, clock=_unread_clock) == 0.0


def test_lead_steps_and_decorated_reviewer_requests_keep_their_function():
    calls: list[str] = []

    @priority.lead_step
    def draw(x: int) -> int:
        """Draw."""
        calls.append("draw")
        return x + 1

    @priority.reviewer_work()
    def region() -> int:
        return priority.reviewers_in_flight()

    assert draw(1) == 2 and calls == ["draw"] and draw.__name__ == "draw" and draw.__doc__ == "Draw."
    assert region() == 1 and region.__name__ == "region"
    assert priority.reviewers_in_flight() == 0


def test_listeners_hear_the_first_request_start_and_the_last_one_end(monkeypatch, reviewer):
    monkeypatch.setattr(priority, "_listeners", [])
    heard: list[str] = []
    priority.on_reviewers(lambda: heard.append("first started"), lambda: heard.append("last ended"))
    request = reviewer([])
    with priority.reviewer_work(), priority.reviewer_work():
        assert heard == ["first started"]  # a second request in flight, then a nested one: no new start
    assert heard == ["first started"]  # the other request still runs
    request.finish()
    assert heard == ["first started", "last ended"]
    with priority.reviewer_work():
        pass
    assert heard == ["first started", "last ended"] * 2
