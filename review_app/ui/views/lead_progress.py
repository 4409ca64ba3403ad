"""Progress of a study by rubric, subset and reviewer (counts computed in the database).

Read at a glance on a 1366x768 laptop: the big numbers are short (thousands separated, the total
in the label) so no metric is cut; per-reviewer throughput and median time on task; the
dual-rated tasks still waiting for a rater; open flags; a warning per reviewer far behind.
"""

import pandas as pd
import streamlit as st

from review_app.services import progress
from review_app.services.errors import ServiceError
from review_app.ui.components import charts, tables
from review_app.ui.components.pickers import pick_study
from review_app.ui.components.quality import show_alerts
from review_app.ui.components.text import plain
from review_app.ui.session import engine, require_role

REVIEWER_COLUMNS = {
    "username": tables.Column("Reviewer", anchor=True),
    "display_name": tables.Column("Name", secondary=True),
    "assigned": tables.Column("Assigned", "count", help="Ratings assigned in this study (withdrawn ones left out)."),
    "submitted": tables.Column("Submitted", "count"),
    "open": tables.Column("Open", "count", help="Assigned or in progress."),
    "skipped": tables.Column("Skipped", "count"),
    "flagged": tables.Column("Flagged", "count", help="Assignments the reviewer flagged for the lead."),
    "done_share": tables.Column("Done", "percent", help="Submitted of assigned."),
    "per_active_day": tables.Column(
        "Per active day", "number", digits=1, help="Submitted ratings per day with at least one submission."
    ),
    "last_7_days": tables.Column("Last 7 days", "count", help="First submissions in the last seven days."),
    "median_minutes": tables.Column(
        "Median time on task (min)", "number", digits=1, help="Median minutes per rating, first submissions only."
    ),
    "median_seconds": tables.Column("Median time on task (s)", "seconds", secondary=True),
}

user = require_role("lead", "admin")
db = engine()
study = pick_study(db, user)
if study is None:
    st.stop()
try:
    report = progress.study_progress(db, study.name, actor=user)
except ServiceError as exc:  # not a lead of this study (any more): say so, show nothing of it
    st.error(plain(exc))
    st.stop()
show_alerts(db, user, study.name)
for warning in report.warnings:
    st.warning(plain(warning), icon=":material/schedule:")
done = report.complete_tasks
total = report.tasks
counts = report.assignments
a, b, c, d = st.columns(4)
a.metric(f"Tasks complete, of {total:,}", f"{done:,}", help="A task is complete when all its planned raters submitted.")
b.metric("Submitted ratings", f"{counts.get('submitted', 0):,}")
c.metric("Open ratings", f"{counts.get('assigned', 0) + counts.get('in_progress', 0):,}")
d.metric("Skipped", f"{counts.get('skipped', 0):,}")
pairs = report.pairs
e, f, g, h = st.columns(4)
e.metric(
    f"Pairs pending, of {pairs.get('planned', 0):,}",
    f"{pairs.get('waiting_for_a_rater', 0):,}",
    help="Dual-rated tasks (planned for two or more raters) where some, not all, raters have submitted: "
    "they cannot enter agreement or adjudication yet.",
)
f.metric("Pairs not started", f"{pairs.get('not_started', 0):,}", help="Dual-rated tasks no rater has submitted.")
g.metric("Open flags", f"{report.flags.get('open', 0):,}", help="Answer them on the Flags page.")
h.metric("Tasks excluded by a lead", f"{report.flags.get('excluded', 0):,}")
if report.flags.get("open"):
    st.page_link(
        "views/lead_flags.py", label=f"{report.flags['open']:,} open flag(s) wait for you", icon=":material/flag:"
    )
if total:
    st.progress(done / total, text=f"{tables.percent(done / total, 1)} complete")

POOL = "every task drawn into the study's pool, gold tasks and tasks excluded on the Flags page included"
left, right = st.columns(2)
with left:
    st.plotly_chart(charts.completion_bars(report.by_rubric, "rubric", "By rubric"), width="stretch")
    tables.caption(f"Tasks by rubric, complete when every planned rater has submitted; {POOL}.")
with right:
    st.plotly_chart(charts.completion_bars(report.by_subset, "subset", "By subset"), width="stretch")
    tables.caption(f"The same tasks by benchmark subset of their item; {POOL}.")
st.plotly_chart(charts.reviewer_bars(report.by_reviewer), width="stretch")
tables.caption(
    "Each reviewer's assignments in this study by status: submitted, still open (assigned or in progress) and "
    "skipped; assignments withdrawn from a reviewer who left are not counted."
)
st.markdown("**Reviewers**")
table = pd.DataFrame(report.by_reviewer, columns=list(REVIEWER_COLUMNS))
table["median_minutes"] = pd.to_numeric(table["median_seconds"], errors="coerce") / 60
tables.show(
    table,
    REVIEWER_COLUMNS,
    what="One row per reviewer with assignments in this study. Done is the share of their assigned ratings "
    "submitted; throughput and time on task count first submissions only (an edit is not new work), per day "
    "with at least one submission; a dash means nothing submitted yet.",
    more="Names, and time on task in seconds",
    more_what="Each reviewer's name, and their median seconds per rating (first submissions only).",
)
