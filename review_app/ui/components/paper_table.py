"""Show a results table as a paper prints it: title, table, one-sentence caption, CSV and LaTeX downloads."""

from __future__ import annotations

import re

import streamlit as st

from review_app.services.paper_tables import PaperTable
from review_app.services.priority import lead_step
from review_app.ui.components.text import plain


def _stem(study: str, key: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "_", f"{study}_{key}").strip("_").lower()


@lead_step
def show(table: PaperTable, study: str, *, heading: str = "#####") -> None:
    """Render ``table`` with its caption under it and a download button per file it has."""
    st.markdown(f"{heading} {plain(table.title)}")
    st.dataframe(table.frame, hide_index=True, width="stretch")
    st.caption(plain(table.caption))
    stem = _stem(study, table.key)
    csv = table.csv_bytes()
    left, right, _ = st.columns([1, 1, 4])
    if csv is not None:
        left.download_button(
            "CSV",
            csv,
            file_name=f"{stem}.csv",
            mime="text/csv",
            key=f"csv:{stem}",
            help="The export's table: full precision, codebook column names.",
            icon=":material/download:",
        )
    if table.latex is not None:
        right.download_button(
            "LaTeX",
            table.latex.encode("utf-8"),
            file_name=f"{stem}.tex",
            mime="application/x-tex",
            key=f"tex:{stem}",
            help="The export's booktabs table, ready to paste into a paper.",
            icon=":material/download:",
        )
