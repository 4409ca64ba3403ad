"""Reviewers first in the app's one interpreter: lead work waits while a reviewer's request runs."""

from __future__ import annotations

import threading
import time

from review_app.services import priority


def _reviewer(hold: float, entered: threading.Event, events: list[str]) -> threading.Thread:
    def work() -> None:
        with priority.reviewer_work():
            entered.set()
            time.sleep(hold)
            events.append("reviewer done")

    thread = threading.Thread(target=work)
    thread.start()
    return thread


def test_no_reviewer_in_flight_costs_no_wait():
    assert priority.reviewers_in_flight() == 0
    start = time.perf_counter()
    assert priority.yield_to_reviewers() == 0.0
    assert time.perf_counter() - start < 0.01


def test_a_lead_step_waits_for_the_reviewer_in_flight_to_end():
    entered, events = threading.Event(), []
    thread = _reviewer(0.15, entered, events)
    entered.wait(5)
    assert priority.reviewers_in_flight() == 1
    waited = priority.yield_to_reviewers(max_wait=5)
    events.append("lead step")
    thread.join()
    assert events == ["reviewer done", "lead step"]
    assert 0.05 < waited < 4
    assert priority.reviewers_in_flight() == 0


def test_a_stream_of_reviewers_slows_a_lead_step_but_never_stops_it():
    entered, events = threading.Event(), []
    thread = _reviewer(1.5, entered, events)
    entered.wait(5)
    start = time.perf_counter()
    priority.yield_to_reviewers(max_wait=0.05)
    assert time.perf_counter() - start < 1.0 and events == []  # went on while the reviewer still ran
    thread.join()


def test_a_reviewer_s_own_thread_never_waits_for_itself():
    with priority.reviewer_work(), priority.reviewer_work():  # nested: still one thread's request
        assert priority.reviewers_in_flight() == 2
        assert priority.yield_to_reviewers(max_wait=5) == 0.0
    assert priority.reviewers_in_flight() == 0


def test_the_count_drops_when_a_reviewer_s_request_fails():
    try:
        with priority.reviewer_work():
            raise ValueError("the request failed")
    except ValueError:
        pass
    assert priority.reviewers_in_flight() == 0
    assert priority.yield_to_reviewers(max_wait=5) == 0.0


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


def test_listeners_hear_the_first_request_start_and_the_last_one_end(monkeypatch):
    monkeypatch.setattr(priority, "_listeners", [])
    heard: list[str] = []
    priority.on_reviewers(lambda: heard.append("first started"), lambda: heard.append("last ended"))
    entered, events = threading.Event(), []
    thread = _reviewer(0.1, entered, events)
    entered.wait(5)
    with priority.reviewer_work(), priority.reviewer_work():
        assert heard == ["first started"]  # a second request in flight, then a nested one: no new start
    thread.join()
    assert heard == ["first started", "last ended"]
    with priority.reviewer_work():
        pass
    assert heard == ["first started", "last ended"] * 2
