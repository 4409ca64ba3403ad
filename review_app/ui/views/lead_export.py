"""Download the study's publication exports: labels, raw annotations, agreement and analysis tables.

The built archive is remembered per study (``export_archive:<study>``), so after switching study
the page offers that study's files, never the zip of the study shown before. Whether pending tasks
are included is the study's task choice, shared with the Analysis page (``components.task_choice``):
the same choice gives the same numbers on both.
"""

import streamlit as st

from review_app.services import export
from review_app.services.errors import ServiceError
from review_app.ui.components.pickers import pick_study
from review_app.ui.components.task_choice import task_choice
from review_app.ui.components.text import plain
from review_app.ui.session import engine, require_role

user = require_role("lead", "admin")
db = engine()
study = pick_study(db, user)
if study is None:
    st.stop()
st.caption(
    "Adjudicated labels (wide), raw annotations (long), agreement and analysis tables in CSV, JSONL and "
    "Parquet, LaTeX tables, a codebook and a manifest with checksums. Reviewers are pseudonymised "
    "(R01, R02, ...) unless you ask for usernames."
)
try:
    pending = export.pending_tasks(db, study.name, actor=user)
except ServiceError as exc:  # not a lead of this study: say so, offer nothing
    st.error(plain(exc))
    st.stop()
FORMAT_LABELS = {"csv": "CSV", "jsonl": "JSONL", "parquet": "Parquet"}
formats = st.multiselect(
    "Formats", list(export.EXPORT_FORMATS), default=list(export.EXPORT_FORMATS), format_func=FORMAT_LABELS.get
)
real_names = st.toggle("Use reviewers' usernames instead of pseudonyms")
include = task_choice(study.name, pending, page="export") == "include"
key = f"export_archive:{study.name}"
if st.button("Build export", type="primary", disabled=not formats):
    try:
        bar = st.progress(0.0, text="Exporting...")
        archive = export.export_archive(
            db,
            study.name,
            formats=tuple(formats),
            real_names=real_names,
            actor=user,
            pending="include" if include else "exclude",
            progress=lambda done, text: bar.progress(done, text=text),
        )
        bar.empty()
    except ServiceError as exc:
        st.error(plain(exc))
    else:
        st.session_state[key] = archive
archive = st.session_state.get(key)
if archive is not None:
    st.success(
        f"{plain(archive.result.study)}: {len(archive.result.files)} files, snapshot {archive.result.snapshot_utc}."
    )
    for note in archive.result.notes:
        st.info(plain(note))
    st.download_button(
        "Download the export (.zip)", archive.data, file_name=archive.filename, mime="application/zip", type="primary"
    )
