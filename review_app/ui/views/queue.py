"""My queue: what is left, a clear next-task button, and what is done (editable until locked)."""

import pandas as pd
import streamlit as st

from review_app.rubrics import get_rubric
from review_app.services import review_queue
from review_app.ui.components.text import plain
from review_app.ui.session import engine, require_role, show_flashes

user = require_role()
db = engine()
show_flashes()
st.markdown(f"### Welcome, {plain(user.display_name)}")
rows = review_queue.queue(db, user.id)
remaining = sum(r.open + r.skipped for r in rows)
done = sum(r.submitted for r in rows)
total = remaining + done
if total == 0:
    st.info("No tasks are assigned to you yet. The study lead will assign them.")
    st.stop()
st.progress(done / total, text=f"{done} of {total} tasks done")
nxt = review_queue.next_assignment(db, user.id)
if nxt is not None:
    # Keyed: the page script gives it the focus when the queue opens (components/a11y.js).
    if st.button("Start next task", type="primary", icon=":material/play_arrow:", shortcut="Enter", key="mr-start"):
        st.switch_page("views/review.py", query_params={"task": str(nxt)})
else:
    st.success("All your tasks are done. Thank you!")

table = pd.DataFrame(
    [
        {
            "Study": r.study,
            "Rubric": get_rubric(r.rubric).name,
            "To do": r.open,
            "Skipped": r.skipped,
            "Done": r.submitted,
        }
        for r in rows
    ]
)
st.dataframe(table, hide_index=True, width="stretch")

done_rows = review_queue.submitted_work(db, user.id)
if done_rows:
    st.markdown("#### Done")
    st.caption("Open a task to change your scores; each change is kept as a new revision until the lead locks it.")
    for row in done_rows[:50]:
        cols = st.columns([1, 6, 2], vertical_alignment="center")
        cols[0].text(get_rubric(row.rubric).short_name)
        cols[1].text(f"{row.subset}: {row.question}")
        if row.locked:
            cols[2].caption("locked")
        elif cols[2].button("Open", key=f"edit{row.assignment_id}"):
            st.switch_page("views/review.py", query_params={"task": str(row.assignment_id)})
