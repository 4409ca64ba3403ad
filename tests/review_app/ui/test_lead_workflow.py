"""The study lead's day under AppTest: a reviewer's flag reaches the lead's Flags page and
is resolved; adjudication pre-fills the dimensions the raters agree on and shows a refusal next to
its control; the Export page follows the selected study and states the pending tasks, as the
manifest does; the Progress page's numbers are whole, with throughput and pairs.
"""

from __future__ import annotations

import io
import json
import zipfile

from sqlmodel import select

from review_app.db.engine import read_session
from review_app.db.models import Adjudication, AuditEvent, TaskFlag
from review_app.demo import DEMO_JUDGE_STUDY, DEMO_STUDY, SHARED_UNITS, UNTOUCHED
from review_app.rubrics import get_rubric
from review_app.services import adjudication, export, progress, rating_comparison, review_queue, reviewing
from review_app.services.accounts import get_user
from review_app.services.actors import SYSTEM
from review_app.services.study_analysis import PENDING_RULE

from .conftest import sign_in


def _page(at, page: str, study: str = DEMO_STUDY):
    at.session_state["lead_study"] = study
    at.switch_page(f"views/{page}.py").run()
    assert not at.exception, at.exception
    return at


def _sequence(at) -> list[tuple[str, str]]:
    """(element type, label or value) of every element on the page, in page order."""
    out: list[tuple[str, str]] = []

    def walk(node) -> None:
        kind = getattr(node, "type", "")
        text = getattr(node, "label", None)
        if text is None and kind in ("error", "markdown", "warning", "success", "caption"):
            text = getattr(node, "value", "")
        if text is not None:
            out.append((kind, str(text)))
        children = getattr(node, "children", {}) or {}
        for key in sorted(children):
            walk(children[key])

    walk(at.main)
    return out


def test_a_reviewers_flag_reaches_the_lead_who_resolves_it(demo_db):
    reviewer = sign_in("rev03")
    user = reviewer.session_state["medrev_user"]
    aid = review_queue.next_assignment(demo_db, user.id)
    reviewer.query_params["task"] = str(aid)
    reviewer.switch_page("views/review.py").run()
    assert not reviewer.exception, reviewer.exception
    reviewer.radio(key=f"flag{aid}:kind").set_value("item")
    reviewer.text_area(key=f"flag{aid}:comment").input("Option C is also correct.")
    next(b for b in reviewer.button if b.label == "Send to lead").click().run()
    assert "Flag sent to the study lead." in [t.value for t in reviewer.toast]  # a toast: Submit stays put
    assert any(b.label == "Unflag" for b in reviewer.button)

    lead = sign_in("lead01")
    _page(lead, "lead_progress")
    assert next(m for m in lead.metric if m.label == "Open flags").value == "1"
    _page(lead, "lead_flags")
    table = lead.dataframe[0].value
    (row,) = table.to_dict("records")
    assert row["Problem"] == "Problem with the item" and row["Comment"] == "Option C is also correct."
    assert row["Reviewer"].startswith("R") and row["Status"] == "open" and "rev03" not in table.to_csv()
    flag_id = row["Flag"]
    lead.text_area(key=f"flag{flag_id}:reply").input("Thanks: the key is being checked.")
    next(b for b in lead.button if b.label == "Resolve").click().run()
    assert not lead.exception, lead.exception
    assert f"Flag {flag_id} resolved." in [s.value for s in lead.success]
    assert "No open flags" in lead.success[-1].value
    with read_session(demo_db) as session:
        flag = session.get(TaskFlag, flag_id)
        event = session.exec(select(AuditEvent).where(AuditEvent.action == "flag.resolve")).one()
    assert (flag.status, flag.reply) == ("resolved", "Thanks: the key is being checked.")
    assert event.entity_id == str(flag_id)
    _page(lead, "lead_progress")
    assert next(m for m in lead.metric if m.label == "Open flags").value == "0"


def _disagreeing_task(db):
    """A Rubric B task of the demo where the raters agree on some dimensions and not on others."""
    for entry in adjudication.disagreement_queue(db, DEMO_STUDY, "B"):
        view = adjudication.adjudication_view(db, entry.task_id, actor=SYSTEM)
        agreed = rating_comparison.agreed_dimensions("B", view.ratings)
        if agreed and len(agreed) < len(view.dimensions) and len(view.ratings) == 2:
            return view, agreed
    raise AssertionError("the demo has no partly agreed Rubric B task")


def test_adjudication_prefills_agreed_dimensions_and_the_lead_decides_only_the_others(demo_db):
    view, agreed = _disagreeing_task(demo_db)
    rubric = get_rubric("B")
    disputed = [d for d in rubric.dimensions if d.key not in agreed]
    lead = sign_in("lead01")
    lead.session_state["lead_study"] = DEMO_STUDY
    lead.switch_page("views/lead_adjudication.py").run()
    lead.radio[0].set_value("B").run()
    next(s for s in lead.selectbox if s.label == "Task to adjudicate").set_value(view.task_id).run()
    assert not lead.exception, lead.exception
    badges = [m.value for m in lead.markdown if "agreed]" in m.value]
    assert len(badges) == len(agreed)
    for dimension in rubric.dimensions:
        if dimension.key in agreed:
            assert any(b.startswith(f"**{dimension.name}**: {agreed[dimension.key]} ") for b in badges)
    radios = {r.label: r for r in lead.radio}
    assert [d.name for d in disputed] == [n for n in radios if n in {d.name for d in rubric.dimensions}]
    assert all(radios[d.name].value is None for d in disputed)  # the lead decides these

    next(b for b in lead.button if b.label == "Record decision").click().run()
    assert not lead.exception, lead.exception
    missing = disputed[0].name
    order = _sequence(lead)
    errors = [i for i, (kind, text) in enumerate(order) if kind == "error" and f"missing: {missing}" in text]
    radio_at = next(i for i, (kind, text) in enumerate(order) if kind == "radio" and text == missing)
    assert errors and errors[0] == radio_at + 1  # right below the control that caused it
    assert [kind for kind, _ in order].count("error") == 1  # once: not repeated under Rationale or by the button
    assert order[errors[0]][1].startswith("Not recorded:")

    chosen = {}
    for dimension in disputed:
        chosen[dimension.key] = view.ratings[0].scores[dimension.key]  # side with the first rater: no rationale
        lead.radio(key=f"adj{view.task_id}:{dimension.key}").set_value(chosen[dimension.key])
    next(b for b in lead.button if b.label == "Record decision").click().run()
    assert not lead.exception, lead.exception
    assert any(s.value.startswith("Recorded version 1 (adjudicated)") for s in lead.success), lead.error
    with read_session(demo_db) as session:
        row = session.exec(select(Adjudication).where(Adjudication.task_id == view.task_id)).one()
    assert row.final_scores == agreed | chosen


def test_overriding_an_agreed_dimension_needs_a_rationale(demo_db):
    view, agreed = _disagreeing_task(demo_db)
    key = next(iter(agreed))
    lead = sign_in("lead01")
    _page(lead, "lead_adjudication")
    lead.radio[0].set_value("B").run()
    next(s for s in lead.selectbox if s.label == "Task to adjudicate").set_value(view.task_id).run()
    for dimension in get_rubric("B").dimensions:
        if dimension.key not in agreed:
            lead.radio(key=f"adj{view.task_id}:{dimension.key}").set_value(view.ratings[0].scores[dimension.key])
    lead.toggle(key=f"adj{view.task_id}:{key}:override").set_value(True).run()
    other = next(v for v in get_rubric("B").dimension(key).values if v != agreed[key])
    lead.radio(key=f"adj{view.task_id}:{key}").set_value(other)
    next(b for b in lead.button if b.label == "Record decision").click().run()
    order = _sequence(lead)
    rationale_at = next(i for i, (kind, text) in enumerate(order) if kind == "text_area" and text == "Rationale")
    assert order[rationale_at + 1][0] == "error" and "overrides every rater" in order[rationale_at + 1][1]
    lead.text_area(key=f"adj{view.task_id}:rationale").input("Both raters missed the dose error.")
    next(b for b in lead.button if b.label == "Record decision").click().run()
    assert any(s.value.startswith("Recorded version 1 (adjudicated)") for s in lead.success), lead.error
    with read_session(demo_db) as session:
        row = session.exec(select(Adjudication).where(Adjudication.task_id == view.task_id)).one()
    assert row.final_scores[key] == other and row.rationale == "Both raters missed the dose error."


def _manifest(archive) -> dict:
    with zipfile.ZipFile(io.BytesIO(archive.data)) as zipped:
        name = next(n for n in zipped.namelist() if n.endswith("manifest.json"))
        return json.loads(zipped.read(name))


def test_export_follows_the_selected_study_and_states_pending_tasks(demo_db):
    lead = sign_in("lead01")
    _page(lead, "lead_export")
    pending = export.pending_tasks(demo_db, DEMO_STUDY, actor=SYSTEM)
    assert pending > 0
    assert any(w.value.startswith(f"{pending:,} tasks are still pending") for w in lead.warning)
    next(b for b in lead.button if b.label == "Build export").click().run()
    assert not lead.exception, lead.exception
    first = _manifest(lead.session_state[f"export_archive:{DEMO_STUDY}"])
    assert first["study"]["name"] == DEMO_STUDY
    assert first["pending"]["tasks"] == pending and first["pending"]["excluded"] is True  # left out by default
    assert len(lead.get("download_button")) == 1

    next(s for s in lead.selectbox if s.label == "Study").set_value(DEMO_JUDGE_STUDY).run()
    assert not lead.exception, lead.exception
    assert not lead.get("download_button")  # the other study's zip is not offered here
    lead.toggle(key=f"export_pending:{DEMO_JUDGE_STUDY}").set_value(True).run()
    next(b for b in lead.button if b.label == "Build export").click().run()
    archive = lead.session_state[f"export_archive:{DEMO_JUDGE_STUDY}"]
    assert "judge-audit" in archive.filename
    manifest = _manifest(archive)
    assert manifest["study"]["name"] == DEMO_JUDGE_STUDY and manifest["study"]["rubrics"] == ["judge"]
    judge_pending = export.pending_tasks(demo_db, DEMO_JUDGE_STUDY, actor=SYSTEM)
    assert manifest["pending"] == {"tasks": judge_pending, "excluded": False, "rule": PENDING_RULE}
    assert any("included with the ratings they have so far" in i.value for i in lead.info)

    next(s for s in lead.selectbox if s.label == "Study").set_value(DEMO_STUDY).run()
    assert _manifest(lead.session_state[f"export_archive:{DEMO_STUDY}"])["study"]["name"] == DEMO_STUDY


def test_a_lead_of_another_study_is_offered_no_export(demo_db):
    from review_app.services import accounts, studies
    from review_app.services.accounts import UserProfile

    accounts.create_user(
        demo_db, UserProfile(username="lead09", display_name="Other lead", role="lead"), password="x" * 12, actor=SYSTEM
    )
    studies.create_study(demo_db, "Another study", rubrics=["A"], actor=SYSTEM)
    studies.set_study_lead(demo_db, "Another study", "lead09", actor=SYSTEM)
    lead = sign_in("lead09", "x" * 12)
    _page(lead, "lead_export")
    assert "not a lead of the study" in lead.error[0].value
    assert not any(b.label == "Build export" for b in lead.button)
    _page(lead, "lead_flags")
    assert "not a lead of the study" in lead.error[0].value


def test_progress_numbers_are_whole_with_throughput_and_pairs(demo_db):
    lead = sign_in("lead01")
    _page(lead, "lead_progress")
    report = progress.study_progress(demo_db, DEMO_STUDY)
    metrics = {m.label: m.value for m in lead.metric}
    assert metrics[f"Tasks complete, of {report.tasks:,}"] == f"{report.complete_tasks:,}"
    assert metrics["Submitted ratings"] == f"{report.assignments['submitted']:,}"
    waiting = f"Pairs pending, of {report.pairs['planned']:,}"
    assert metrics[waiting] == f"{report.pairs['waiting_for_a_rater']:,}"
    assert all(len(value) <= 9 and "…" not in value and "..." not in value for value in metrics.values())
    table = lead.dataframe[0].value
    assert {"username", "per_active_day", "last_7_days", "median_minutes", "done_share"} <= set(table.columns)
    busy = table[table["submitted"] > 0]
    assert busy["median_minutes"].notna().all()
    # rev01 and rev02 have done nothing yet while the panel has: both are far behind.
    warned = [w.value for w in lead.warning if "far behind" in w.value]
    assert {w.split(" ")[0] for w in warned} >= set(UNTOUCHED)


def test_demo_reviewers_share_tasks_and_the_printed_accounts_include_lead_and_admin(demo_db, tmp_path):
    from review_app.db.models import Assignment, Task

    ids = {u: get_user(demo_db, u).id for u in UNTOUCHED}
    with read_session(demo_db) as session:
        tasks = {
            u: set(session.exec(select(Assignment.task_id).where(Assignment.reviewer_id == i)).all())
            for u, i in ids.items()
        }
        shared = tasks["rev01"] & tasks["rev02"]
        units = set(session.exec(select(Task.pool_rank).where(Task.id.in_(shared))).all())
    assert len(units) == SHARED_UNITS
    for reviewer_id in ids.values():  # the shared tasks come first in both queues
        first = review_queue.next_assignment(demo_db, reviewer_id)
        assert reviewing.open_task(demo_db, first, reviewer_id).task_id in shared
    from review_app.demo import seed_demo

    described = seed_demo(tmp_path / "fresh.db").describe()
    for role, username in (("admin", "admin"), ("lead", "lead01"), ("reviewer", "rev01")):
        assert f"  {role:<8} {username:<8} {username}-demo-pw" in described
    assert described.index("admin-demo-pw") < described.index("rev01-demo-pw")
