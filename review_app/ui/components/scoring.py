"""The score panel: anchored choices, flags, comment, keyboard, autosave and a checked submit.

The panel is a small browser component (``score_panel.js``) that holds the reviewer's input on
the page, so nothing the reviewer does depends on when a Streamlit rerun gets to it. Each
keypress or click becomes an event naming the assignment, its submission (client token and base
revision) and the dimension it was meant for; the browser sends the list of events the server has
not acknowledged yet, and ``handle_events`` applies each one exactly once, in order, through
``reviewing.change_draft`` (which refuses a change whose submission is over). A submit event
carries the full score vector the panel showed; ``reviewing.submit`` refuses it when it differs
from the saved draft, and the reason appears next to Submit.

The draft in the database is the single copy of the scores: the panel is drawn from it on every
run, so a reload or a new session picks up exactly where the reviewer was. Per assignment, the
session keeps only the submission's client token, its base revision and when the task was opened
(for time on task).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import streamlit as st
from pydantic import ValidationError

from review_app.rubrics import Dimension, Rubric, ScoreSheet, get_rubric
from review_app.services import reviewing
from review_app.services.actors import Actor
from review_app.services.errors import ServiceError
from review_app.services.reviewing import DraftChange, TaskView
from review_app.ui.components import accessibility

PANEL_KEY = "mr_score_panel"
_ACK = "mr_score_ack"  # {browser source: last event seq handled}
_NOTICE = "mr_score_notice"  # {"aid": int | None, "kind": str, "text": str}: shown next to Submit
_SAVED = "mr_score_saved"  # {assignment id: time of the last saved change}
_SUBMITS = "mr_score_submits"  # {"source:seq" of an answered submit the browser may not have seen: assignment id}
_MAX_EVENTS = 500  # per run; the browser sends only what was not acknowledged yet
_HAS_CODE = "mr_score_panel_code"  # True once this session's page has run the panel's code (it sent events)

_HERE = Path(__file__).parent
# The panel's rules, put on the review page once, outside the task's fragment, so a click does not send them again.
STYLE = f"<style>{(_HERE / 'score_panel.css').read_text(encoding='utf-8')}</style>"
# The review page carries no inline script: the panel brings the page's accessibility repairs.
_panel = st.components.v2.component(
    "medrev_score_panel",
    js=accessibility.SCRIPT + "\n" + (_HERE / "score_panel.js").read_text(encoding="utf-8"),
    isolate_styles=False,  # the panel highlights and scrolls elements of the page around it
)
# The same panel once the page runs its code (see score_panel): a click's rerun then sends the data and this
# line instead of the 33 kB of code, which the page keeps from the panel's first drawing.
_panel_drawn = st.components.v2.component(
    "drawn_medrev_score_panel",
    js="// score_panel.js, already run on this page, draws it.\n"
    "export default (component) => window.__medrevScorePanel.draw(component);\n",
    isolate_styles=False,
)


def _k(aid: int, name: str) -> str:
    return f"a{aid}:{name}"


def shortcut_for(dimension: Dimension, index: int) -> str:
    """Digit keys: the score itself on 0-9 scales, otherwise the position (1, 2, 3)."""
    values = dimension.values
    if all(0 <= v <= 9 for v in values):
        return str(values[index])
    return str(index + 1)


def init_state(view: TaskView) -> None:
    """Start (or resume) the reviewer's submission of this assignment in this session, once.

    The client token and base revision come from the saved draft when there is one, so a reload
    continues the same submission (and a second window submitting it is recognised as a repeat).
    """
    aid = view.assignment_id
    if st.session_state.get(_k(aid, "init")):
        return
    draft = dict(view.draft)
    st.session_state[_k(aid, "token")] = draft.get("client_token") or reviewing.new_client_token()
    base = view.submitted.revision if view.submitted else 0
    st.session_state[_k(aid, "base")] = int(draft.get("base_revision", base))
    st.session_state[_k(aid, "seconds0")] = float(view.draft_seconds)
    st.session_state[_k(aid, "opened")] = time.monotonic()
    st.session_state[_k(aid, "init")] = True


def forget(aid: int) -> None:
    """Drop this session's state of an assignment; the next run starts from the database again."""
    for key in [k for k in st.session_state if isinstance(k, str) and k.startswith(f"a{aid}:")]:
        del st.session_state[key]


def seconds_on_task(aid: int) -> float | None:
    """Time on task so far, or None when this session has not opened the task (keep the saved time)."""
    if not st.session_state.get(_k(aid, "init")):
        return None
    opened = st.session_state.get(_k(aid, "opened"), time.monotonic())
    return st.session_state.get(_k(aid, "seconds0"), 0.0) + (time.monotonic() - opened)


def _notice(aid: int | None, kind: str, text: str) -> None:
    st.session_state[_NOTICE] = {"aid": aid, "kind": kind, "text": text}


def _well_formed(event: Any) -> bool:
    if not isinstance(event, dict) or event.get("t") not in ("score", "flags", "comment", "submit"):
        return False
    return (
        isinstance(event.get("src"), str)
        and 0 < len(event["src"]) <= 64
        and all(isinstance(event.get(f), int) and not isinstance(event.get(f), bool) for f in ("seq", "aid", "base"))
        and isinstance(event.get("token"), str)
    )


def handle_events(engine, reviewer: Actor, address: int | None) -> int | None:
    """Apply the panel's events not handled yet, in order; returns the assignment just submitted, if any.

    Runs at the top of the review page, before anything is drawn, so the page shows their effect.
    Every event is acknowledged (applied, refused or a repeat) and never handled twice; a refusal
    is shown next to Submit. Applying events does not depend on which task the page shows.

    ``address`` is the task the browser's address names in this run. The browser keeps sending an
    answered submit until its next key or click (a fresh list then leaves it out), and an answer
    can be lost: a run cut short by the next rerun never sends the browser the next task's address.
    So a submit answered by an earlier run still counts as "just submitted" while the address names
    its task, and the page moves on all the same; once a run comes with another address, the
    browser has the answer and the submit is forgotten (opening that task again later opens it).
    The server tracks this itself, so the panel needs no extra rerun to withdraw the submit.
    """
    state = st.session_state.get(PANEL_KEY) or {}
    events = state.get("events") if isinstance(state, dict) else None
    if not isinstance(events, list):
        return None
    acks: dict[str, int] = st.session_state.setdefault(_ACK, {})
    answered: dict[str, int] = st.session_state.get(_SUBMITS, {})
    fresh: dict[str, int] = {}
    submitted = None
    todo = sorted((e for e in events[:_MAX_EVENTS] if _well_formed(e)), key=lambda e: e["seq"])
    for event in todo:
        if event["seq"] <= acks.get(event["src"], 0):
            continue
        if event["t"] == "submit":
            if _submit(engine, reviewer, event):
                fresh[f"{event['src']}:{event['seq']}"] = submitted = event["aid"]
        else:
            _change(engine, reviewer, event)
        acks[event["src"]] = event["seq"]
    names = {f"{e['src']}:{e['seq']}" for e in todo}
    waiting = {name: a for name, a in answered.items() if name in names and a == address}
    st.session_state[_SUBMITS] = waiting | fresh
    if submitted is None and waiting:
        submitted = address
    return submitted


def _change(engine, reviewer: Actor, event: dict[str, Any]) -> None:
    aid = event["aid"]
    fields: dict[str, Any] = {}
    if event["t"] == "score":
        value = event.get("value")
        fields["scores"] = {str(event.get("dim")): value if isinstance(value, int) else None}
    elif event["t"] == "flags":
        fields["flags"] = tuple(str(f) for f in event.get("flags") or ())
    else:
        fields["comment"] = str(event.get("text") or "")
    change = DraftChange(
        client_token=event["token"], base_revision=event["base"], source=event["src"], seq=event["seq"], **fields
    )
    try:
        reviewing.change_draft(engine, aid, reviewer, change, seconds_on_task=seconds_on_task(aid))
    except ServiceError as exc:
        if (pending := st.session_state.get(_NOTICE)) and pending.get("aid") is None:
            return  # a key that followed a submit: it goes nowhere, and the submit's message stays
        _notice(aid, "error", f"Your last change was not saved: {exc}.")
        return
    st.session_state.setdefault(_SAVED, {})[aid] = time.strftime("%H:%M:%S")
    notice = st.session_state.get(_NOTICE)
    if notice and notice.get("aid") in (aid, None):
        st.session_state.pop(_NOTICE, None)  # the reviewer has moved on from the last message


def _submit(engine, reviewer: Actor, event: dict[str, Any]) -> bool:
    """Submit the vector the panel showed; True when the task is now submitted."""
    aid = event["aid"]
    scores = event.get("scores") if isinstance(event.get("scores"), dict) else {}
    try:
        rubric = get_rubric(str(event.get("rubric") or ""))
        sheet = ScoreSheet(
            rubric=rubric.key,
            scores=scores,
            flags=[str(f) for f in event.get("flags") or ()],
            comment=str(event.get("comment") or ""),
        )
    except (KeyError, ValidationError) as exc:
        message = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
        _notice(aid, "warning", f"Not submitted: {message.removeprefix('Value error, ')}.")
        return False
    try:
        result = reviewing.submit(
            engine,
            aid,
            reviewer,
            sheet,
            client_token=event["token"],
            base_revision=event["base"],
            seconds_on_task=seconds_on_task(aid),
            expected_scores=scores,
        )
    except reviewing.ScoresDiffer as exc:
        _notice(aid, "error", str(exc))
        return False
    except (ServiceError, ValueError) as exc:
        _notice(aid, "error", f"Not submitted: {exc}.")
        forget(aid)  # reload the latest state from the database
        return False
    forget(aid)
    if not result.created:
        _notice(None, "info", "This task was already submitted (from another window or a reconnect): nothing added.")
    else:
        what = "Submitted" if result.revision == 1 else f"Saved revision {result.revision}"
        _notice(None, "success", f"{what}. Thank you!")
    return True


def take_pending_notice() -> dict[str, Any] | None:
    """The message no task has shown yet (the last task of the queue was submitted), taken once."""
    notice = st.session_state.get(_NOTICE)
    if notice and notice.get("aid") is None:
        return st.session_state.pop(_NOTICE)
    return None


def panel_data(view: TaskView, rubric: Rubric) -> dict[str, Any]:
    """Everything the panel draws for one task: the rubric, the saved input, acknowledgements, messages."""
    aid = view.assignment_id
    init_state(view)
    source: dict[str, Any] = dict(view.draft)
    if not source and view.submitted is not None:  # an edit starts from the revision in force
        source = {
            "scores": dict(view.submitted.scores),
            "flags": list(view.submitted.flags),
            "comment": view.submitted.comment,
        }
    notice = st.session_state.get(_NOTICE)
    if notice and notice.get("aid") is None:
        notice = st.session_state[_NOTICE] = {**notice, "aid": aid}  # the message of the task before
    if view.locked:
        notice = {"aid": aid, "kind": "info", "text": "The study lead has locked this task; your scores are read-only."}
    label = "Submit" if view.submitted is None else f"Save as revision {view.submitted.revision + 1}"
    saved = st.session_state.get(_SAVED, {}).get(aid)
    return {
        "aid": aid,
        "token": st.session_state[_k(aid, "token")],
        "base": st.session_state[_k(aid, "base")],
        "rubric": rubric.key,
        "readonly": view.locked,
        "purpose": rubric.purpose,
        "dims": [
            {
                "key": d.key,
                "name": d.name,
                "question": d.question,
                "levels": [
                    {"value": lv.value, "label": lv.label, "anchor": lv.anchor, "key": shortcut_for(d, i)}
                    for i, lv in enumerate(d.levels)
                ],
            }
            for d in rubric.dimensions
        ],
        "flags": [{"key": f.key, "label": f.label, "help": f.help} for f in rubric.flags],
        "scores": {k: v for k, v in (source.get("scores") or {}).items() if k in rubric.dimension_keys},
        "chosen_flags": [f for f in source.get("flags") or [] if f in {fl.key for fl in rubric.flags}],
        "comment": source.get("comment", ""),
        "ack": dict(st.session_state.get(_ACK, {})),
        "notice": notice if notice and notice.get("aid") == aid else None,
        "submit_label": label,
        "saved_at": saved,
    }


def score_panel(view: TaskView, rubric: Rubric) -> None:
    """Draw the panel for one task (its events are handled by ``handle_events`` on the next run).

    The panel's code goes with it until the browser has sent events: only that code sends them, and
    a Streamlit session belongs to one load of the page (a reload starts a new one; a reconnection
    of the same page keeps it or, on another server, starts one with the page's widget values), so
    events in this session mean its page runs the code, which it keeps as long as it is open.
    """
    state = st.session_state.get(PANEL_KEY)
    if isinstance(state, dict) and isinstance(state.get("events"), list):
        st.session_state[_HAS_CODE] = True
    drawn = st.session_state.get(_HAS_CODE, False)
    (_panel_drawn if drawn else _panel)(key=PANEL_KEY, data=panel_data(view, rubric), on_events_change=_ignore)


def _ignore() -> None:
    """The panel's events are handled at the top of the page, where their order is kept."""
