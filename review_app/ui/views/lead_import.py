"""Import items, responses or a roster through the browser: preview, validate, then import.

The checks and messages are the command line's (``importing.import_upload``): a refused file lists
every problem with its line and field, naming the file as uploaded; the temporary copy the
readers need is removed by the service after every check and import.
"""

import pandas as pd
import streamlit as st

from review_app.services import importing
from review_app.services.errors import ServiceError
from review_app.ui.components.text import plain
from review_app.ui.session import engine, require_role

user = require_role("lead", "admin")
db = engine()
st.markdown("### Import")
st.caption(
    "Items in the released MedMisBench format (name the file after its subset, e.g. MEDMISQA.jsonl, or add a "
    "subset column), model responses, or a reviewer roster (CSV). The same checks as `medrev review import`: "
    "a file with any bad row is refused whole. Bench run directories are imported with `medrev review import`."
)
kind_choice = st.radio("What is in the file?", ["detect", *importing.UPLOAD_KINDS], horizontal=True)
skip_bad_rows = st.checkbox(
    "Import the good rows and skip the bad ones", help="Each skipped row is listed with its problem."
)
upload = st.file_uploader("File", type=["jsonl", "json", "csv", "parquet"])
if upload is None:
    st.stop()

name, data = upload.name, upload.getvalue()
kind = None if kind_choice == "detect" else kind_choice
options = {"kind": kind, "skip_bad_rows": skip_bad_rows}


def _show_rows(issues) -> None:
    st.dataframe(
        pd.DataFrame([{"line": i.line, "field": i.field or "", "problem": i.message} for i in issues]),
        hide_index=True,
        width="stretch",
    )


preview = importing.preview_upload(name, data)
st.markdown(f"**Preview** (first {len(preview)} rows of {plain(name)})")
st.dataframe(pd.DataFrame(preview).astype(str), hide_index=True, width="stretch")

try:
    (summary,) = importing.import_upload(db, name, data, dry_run=True, actor=user, **options)
except importing.ImportRefused as exc:
    st.error(f"This file cannot be imported: {len(exc.issues)} problem(s). Nothing was written.")
    _show_rows(exc.issues)
    if exc.hint:
        st.caption(plain(exc.hint.replace("pass --skip-bad-rows to", "tick the box above to")))
    st.stop()
except ServiceError as exc:
    st.error(plain(exc))
    st.stop()

st.success(
    f"Ready: {summary.rows} {summary.kind} rows, {summary.new} new, {summary.unchanged} already imported"
    + (f", {summary.updated} updated" if summary.updated else "")
    + (f", {len(summary.skipped)} bad row(s) to skip" if summary.skipped else "")
    + "."
)
if summary.skipped:
    _show_rows(summary.skipped)
if st.button("Import", type="primary", disabled=summary.new == 0 and summary.updated == 0):
    try:
        (done,) = importing.import_upload(db, name, data, actor=user, **{**options, "kind": summary.kind})
    except importing.ImportRefused as exc:
        st.error(f"This file cannot be imported: {len(exc.issues)} problem(s). Nothing was written.")
        _show_rows(exc.issues)
    except ServiceError as exc:
        st.error(plain(exc))
    else:
        st.success(plain(f"Imported: {done}"))
