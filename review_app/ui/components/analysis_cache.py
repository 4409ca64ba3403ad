"""One analysis per study, data state and analysis options, shared by the agreement, analysis and export pages.

The key includes the study's data version (annotations and adjudications counted and maxed) and its
saved analysis options, so a new rating, decision or setting recomputes, while page reruns and page
switches reuse the result (the Rubric A bootstrap never runs on a plain rerun). Agreement under the
Agreement page's own weights and minimum ratings is cached separately: it has no bootstrap, and
changing those choices must not recompute the rest.
"""

from __future__ import annotations

import json

import streamlit as st

from review_app.services.study_analysis import (
    AnalysisOptions,
    StudyAgreement,
    StudyAnalysis,
    analysis_options,
    data_version,
    study_agreement,
    study_analysis,
)


@st.cache_resource(max_entries=16, show_spinner=False)
def _cached(url: str, study: str, version: tuple, n_boot: int, options: str) -> StudyAnalysis:
    from review_app.db.connect import get_engine

    return study_analysis(get_engine(url), study, n_boot=n_boot, options=AnalysisOptions(**json.loads(options)))


@st.cache_resource(max_entries=32, show_spinner=False)
def _cached_agreement(url: str, study: str, version: tuple, weights: str, min_ratings: int) -> StudyAgreement:
    from review_app.db.connect import get_engine

    return study_agreement(get_engine(url), study, weights=weights, min_ratings=min_ratings)


def _url(db) -> str:
    return db.url.render_as_string(hide_password=False)


def analysis_for(db, study: str, *, n_boot: int = 2000) -> StudyAnalysis:
    options = analysis_options(db, study)
    with st.spinner("Computing the study's statistics..."):
        return _cached(_url(db), study, data_version(db, study), n_boot, options.key())


def agreement_for(db, study: str, *, weights: str = "ordinal", min_ratings: int = 2) -> StudyAgreement:
    with st.spinner("Computing agreement..."):
        return _cached_agreement(_url(db), study, data_version(db, study), weights, int(min_ratings))
