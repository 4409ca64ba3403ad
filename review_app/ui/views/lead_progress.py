"""Progress of a study by rubric, subset and reviewer (counts computed in the database).

Read at a glance on a 1366x768 laptop: the big numbers are short (thousands separated, the total
in the label) so no metric is cut; per-reviewer throughput and median time on task; the
dual-rated tasks still waiting for a rater; open flags; a warning per reviewer far behind.
"""

import pandas as pd
import streamlit as st

from review_app.services import progress, studies
from review_app.ui.components import charts
from review_app.ui.components.pickers import pick_study
from review_app.ui.components.quality import show_alerts
from review_app.ui.components.text import plain
from review_app.ui.session import engine, require_role

user = require_role("lead", "admin")
db = engine()
study = pick_study(db, studies)
if study is None:
    st.stop()
show_alerts(db, user, study.name)
report = progress.study_progress(db, study.name)
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
    st.progress(done / total, text=f"{done / total:.1%} complete")

left, right = st.columns(2)
with left:
    st.plotly_chart(charts.completion_bars(report.by_rubric, "rubric", "By rubric"), width="stretch")
with right:
    st.plotly_chart(charts.completion_bars(report.by_subset, "subset", "By subset"), width="stretch")
st.plotly_chart(charts.reviewer_bars(report.by_reviewer), width="stretch")
st.markdown("**Reviewers**")
table = pd.DataFrame(report.by_reviewer)
if not table.empty:
    table = table.assign(
        done_share=table["done_share"] * 100,
        median_minutes=table["median_seconds"].astype(float) / 60,
    )[
        [
            "username",
            "assigned",
            "submitted",
            "open",
            "skipped",
            "flagged",
            "done_share",
            "per_active_day",
            "last_7_days",
            "median_minutes",
        ]
    ]
st.dataframe(
    table,
    hide_index=True,
    width="stretch",
    column_config={
        "username": st.column_config.TextColumn("Reviewer"),
        "assigned": st.column_config.NumberColumn("Assigned", format="localized"),
        "submitted": st.column_config.NumberColumn("Submitted", format="localized"),
        "open": st.column_config.NumberColumn("Open", format="localized"),
        "skipped": st.column_config.NumberColumn("Skipped", format="localized"),
        "flagged": st.column_config.NumberColumn("Flagged", format="localized"),
        "done_share": st.column_config.ProgressColumn("Done", format="%.0f%%", min_value=0, max_value=100),
        "per_active_day": st.column_config.NumberColumn(
            "Per active day", format="%.1f", help="Submitted ratings per day with at least one submission."
        ),
        "last_7_days": st.column_config.NumberColumn("Last 7 days", format="localized"),
        "median_minutes": st.column_config.NumberColumn(
            "Median time on task (min)", format="%.1f", help="First submissions only."
        ),
    },
)
