"""Drive the review page's score panel under AppTest, as its browser code does.

AppTest runs no JavaScript, so these helpers play the panel's part: they read the data the page
sends it and send back events in the panel's format (the cumulative list of events with a source
and a sequence number, each naming the assignment, its submission and the dimension).
"""

from __future__ import annotations

import json
from typing import Any

from sqlmodel import select
from streamlit.testing.v1 import AppTest

from review_app.db.engine import read_session
from review_app.db.models import Assignment, Reviewer, Task
from review_app.ui.components.scoring import PANEL_KEY

from .conftest import sign_in


def judge_assignment(engine, username: str = "rev01") -> int:
    """A judge-audit assignment of ``username`` in the demo: the pages that rubric changes are checked on it."""
    with read_session(engine) as session:
        return session.exec(
            select(Assignment.id)
            .join(Task, Task.id == Assignment.task_id)
            .join(Reviewer, Reviewer.id == Assignment.reviewer_id)
            .where(Task.rubric == "judge", Reviewer.username == username)
        ).first()


def open_review(username: str, aid: int) -> AppTest:
    """``username`` signed in on the review page of assignment ``aid``, which rendered without an exception."""
    at = sign_in(username)
    at.query_params["task"] = str(aid)
    at.switch_page("views/review.py").run()
    assert not at.exception, at.exception
    return at


def panel(at: AppTest) -> dict[str, Any]:
    """The data of the score panel on the page (exactly one)."""
    (element,) = at.get("bidi_component")
    return json.loads(element.proto.json)


class Panel:
    """One browser page's score panel: its events get increasing sequence numbers."""

    def __init__(self, at: AppTest, source: str = "page-1") -> None:
        self.at = at
        self.source = source
        self.seq = 0
        self.sent: list[dict[str, Any]] = []

    @property
    def data(self) -> dict[str, Any]:
        return panel(self.at)

    def event(self, kind: str, *, data: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
        """An event as the panel builds it, for the task the panel shows (or the given data's task)."""
        data = data or self.data
        self.seq += 1
        return {
            "t": kind,
            "src": self.source,
            "seq": self.seq,
            "aid": data["aid"],
            "token": data["token"],
            "base": data["base"],
            **fields,
        }

    def send(self, *events: dict[str, Any]) -> AppTest:
        """Send events the way the browser does: every event not acknowledged yet, in one list."""
        acked = self.data["ack"].get(self.source, 0) if self.at.get("bidi_component") else 0
        self.sent = [e for e in self.sent if e["seq"] > acked] + list(events)
        self.at.session_state[PANEL_KEY] = {"events": list(self.sent)}
        return self.at.run()

    def score(self, dimension: str, value: int | None) -> AppTest:
        return self.send(self.event("score", dim=dimension, value=value))

    def score_all(self, values: dict[str, int]) -> AppTest:
        """Several keys typed before the page reruns: one list carrying them all."""
        data = self.data
        return self.send(*[self.event("score", data=data, dim=k, value=v) for k, v in values.items()])

    def flags(self, *keys: str) -> AppTest:
        return self.send(self.event("flags", flags=list(keys)))

    def comment(self, text: str) -> AppTest:
        return self.send(self.event("comment", text=text))

    def submit(self, scores: dict[str, int] | None = None, *, flags=None, comment=None) -> AppTest:
        """Submit the vector the panel shows (or the one given, as a panel out of step would)."""
        data = self.data
        return self.send(
            self.event(
                "submit",
                data=data,
                rubric=data["rubric"],
                scores=data["scores"] if scores is None else scores,
                flags=data["chosen_flags"] if flags is None else flags,
                comment=data["comment"] if comment is None else comment,
            )
        )

    def notice(self) -> str:
        shown = self.data["notice"]
        return f"{shown['kind']}: {shown['text']}" if shown else ""
