"""The study's cached analyses as lead pages show them: a spinner while computing, a progress bar
for the bootstrap.

The numbers and the cache live in the services (``services.study_cache``: one copy per study and
data version, shared by every session, bounded); this module only adds what a page shows while
they are computed. The analyses take the signed-in user, whom the services check before serving a
cached result: a lead reads only the studies they lead.
"""

from __future__ import annotations

import streamlit as st

from review_app.analysis import RubricASummary
from review_app.services.cached_analyses import cached_analysis, cached_rubric_a_intervals
from review_app.services.export.agreement_page import AgreementPage, cached_agreement_page
from review_app.services.study_analysis import DEFAULT_N_BOOT, StudyAnalysis
from review_app.ui.session import CurrentUser


def analysis_for(db, user: CurrentUser, study: str, *, pending: str = "include") -> StudyAnalysis:
    """The study's analyses without the Rubric A bootstrap (see :func:`rubric_a_intervals_for`), on the
    tasks ``pending`` chooses (``exclude``: complete tasks only, as the export by default)."""
    with st.spinner("Computing the study's statistics..."):
        return cached_analysis(db, study, pending=pending, actor=user)


def agreement_page_for(
    db, user: CurrentUser, study: str, *, weights: str = "ordinal", min_ratings: int = 2
) -> AgreementPage:
    """The Agreement page's numbers with its tables (built where the numbers are computed)."""
    with st.spinner("Computing agreement..."):
        return cached_agreement_page(db, study, weights=weights, min_ratings=int(min_ratings), actor=user)


def rubric_a_intervals_for(
    db, user: CurrentUser, study: str, *, n_boot: int = DEFAULT_N_BOOT, pending: str = "include"
) -> RubricASummary | None:
    """The Rubric A summary with bootstrap CIs, with a progress bar while the resamples run."""
    bar = st.empty()

    def progress(done: float) -> None:
        bar.progress(min(1.0, done), text=f"Bootstrap CIs: {round(done * n_boot):,} of {n_boot:,} task resamples")

    try:
        return cached_rubric_a_intervals(db, study, n_boot=n_boot, progress=progress, pending=pending, actor=user)
    finally:
        bar.empty()
