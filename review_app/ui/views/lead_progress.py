"""Progress of a study by rubric, subset and reviewer (counts computed in the database)."""

import pandas as pd
import streamlit as st

from review_app.services import progress, studies
from review_app.ui.components import charts
from review_app.ui.components.pickers import pick_study
from review_app.ui.components.quality import show_alerts
from review_app.ui.session import engine, require_role

user = require_role("lead", "admin")
db = engine()
study = pick_study(db, studies)
if study is None:
    st.stop()
show_alerts(db, user, study.name)
report = progress.study_progress(db, study.name)
done = report.complete_tasks
total = report.tasks
a, b, c, d = st.columns(4)
a.metric("Tasks complete", f"{done} / {total}")
b.metric("Submitted ratings", report.assignments.get("submitted", 0))
c.metric("Open ratings", report.assignments.get("assigned", 0) + report.assignments.get("in_progress", 0))
d.metric("Skipped", report.assignments.get("skipped", 0))
if total:
    st.progress(done / total)

left, right = st.columns(2)
with left:
    st.plotly_chart(charts.completion_bars(report.by_rubric, "rubric", "By rubric"), width="stretch")
with right:
    st.plotly_chart(charts.completion_bars(report.by_subset, "subset", "By subset"), width="stretch")
st.plotly_chart(charts.reviewer_bars(report.by_reviewer), width="stretch")
st.dataframe(pd.DataFrame(report.by_reviewer), hide_index=True, width="stretch")
