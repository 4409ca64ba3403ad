"""Import items, responses or a roster through the browser: preview, validate, then import."""

import tempfile
from pathlib import Path

import pandas as pd
import streamlit as st

from bench_core.kernel.errors import DatasetError
from bench_core.kernel.tabular import iter_rows
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
    "a file with any bad row is refused whole."
)
kind_choice = st.radio("What is in the file?", ["detect", *importing.KINDS], horizontal=True)
upload = st.file_uploader("File", type=["jsonl", "json", "csv", "parquet"])
if upload is None:
    st.stop()

folder = Path(tempfile.mkdtemp(prefix="medrev-upload-"))
path = folder / Path(upload.name).name
path.write_bytes(upload.getvalue())
kind = None if kind_choice == "detect" else kind_choice

preview = []
try:
    for _line, row in iter_rows(path):
        if isinstance(row, dict):
            preview.append(row)
        if len(preview) >= 20:
            break
except DatasetError as exc:
    st.error(plain(exc))
    st.stop()
st.markdown(f"**Preview** (first {len(preview)} rows of {plain(upload.name)})")
st.dataframe(pd.DataFrame(preview).astype(str), hide_index=True, width="stretch")

try:
    (summary,) = importing.import_path(db, path, kind=kind, actor=user, dry_run=True)
except importing.ImportRefused as exc:
    st.error(f"This file cannot be imported: {len(exc.issues)} problem(s). Nothing was written.")
    issues = pd.DataFrame([{"line": i.line, "field": i.field or "", "problem": i.message} for i in exc.issues])
    st.dataframe(issues, hide_index=True, width="stretch")
    st.stop()
except (ServiceError, DatasetError) as exc:
    st.error(plain(exc))
    st.stop()

st.success(
    f"Ready: {summary.rows} {summary.kind} rows, {summary.new} new, {summary.unchanged} already imported"
    + (f", {summary.updated} updated" if summary.updated else "")
    + "."
)
if st.button("Import", type="primary", disabled=summary.new == 0 and summary.updated == 0):
    try:
        (done,) = importing.import_path(db, path, kind=summary.kind, actor=user)
    except ServiceError as exc:
        st.error(plain(exc))
    else:
        st.success(plain(f"Imported: {done}"))
