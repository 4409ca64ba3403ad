"""One analysis per study and data state, shared by the agreement, analysis and export pages.

The key includes the study's data version (annotations and adjudications counted and maxed), so
a new rating or decision recomputes, while page reruns and page switches reuse the result.
"""

from __future__ import annotations

import streamlit as st

from review_app.services.study_analysis import StudyAnalysis, data_version, study_analysis


@st.cache_resource(max_entries=16, show_spinner=False)
def _cached(url: str, study: str, version: tuple, n_boot: int) -> StudyAnalysis:
    from review_app.db.connect import get_engine

    return study_analysis(get_engine(url), study, n_boot=n_boot)


def analysis_for(db, study: str, *, n_boot: int = 2000) -> StudyAnalysis:
    with st.spinner("Computing the study's statistics..."):
        return _cached(db.url.render_as_string(hide_password=False), study, data_version(db, study), n_boot)
