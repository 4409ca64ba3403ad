"""Lead-only pieces shared by the Plan, Reviewers' quality, Progress and Study set-up pages.

Figures are built from service results (no database access, no statistics here); the quality
report is cached per study, data version, thresholds, analysis options (severity comes from the
harm model under them) and lead, like the study's analysis.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from review_app.analysis.reviewer_quality import drift_limit
from review_app.services import planning, quality
from review_app.services.errors import ServiceError
from review_app.services.priority import lead_step
from review_app.ui.components.charts import MARGIN, horizontal_line, titled, vertical_line

REPORT_WAIT_SECONDS = 0.5  # a small study's full report is ready by then: shown at once, severity included


def report_for(db, user, study: str) -> quality.ReportNow:
    """The study's reviewer-quality report, recomputed exactly when ratings, gold tasks, thresholds or the
    study's analysis options change (one copy shared by every lead: ``services.study_cache``).

    Severity (two harm-model fits, seconds at panel scale) may still be on its way: then the report
    comes without it (``complete`` False) and :func:`wait_for_severity` reruns the page when it is ready.
    """
    with st.spinner("Computing reviewer quality..."):
        return quality.quality_report_now(db, user, study, wait_seconds=REPORT_WAIT_SECONDS)


ALERT_POLL_SECONDS = 2


def show_alerts(db, user, study: str) -> None:
    """Drift and gold-accuracy alerts above the lead's thresholds (Progress page; no harm-model fit).

    The alerts are computed in the background when they are not cached for the study's current
    data: the page's counts show at once, and a small fragment reruns the page when they are ready.
    """
    try:
        now = quality.quality_alerts_if_ready(db, user, study)
    except ServiceError as error:  # pragma: no cover - the page checked the role already
        st.error(str(error))
        return
    if now is None or not now.current:
        _wait_for_alerts(db, user, study, shown=now is not None)
    for alert in now.alerts if now is not None else ():
        st.warning(f"Reviewer quality: {alert.message}", icon=":material/warning:")
    if now is not None and now.alerts:
        st.page_link("views/lead_quality.py", label="Open Reviewers' quality", icon=":material/insights:")


@st.fragment(run_every=ALERT_POLL_SECONDS)
def wait_for_severity(db, user, study: str) -> None:
    """A note while severity is computed; reruns the page once the full report is ready."""
    if quality.quality_report_now(db, user, study).complete:
        st.rerun(scope="app")
    st.caption(
        ":material/hourglass_top: Computing severity (the harm model, and its refit by third of each reviewer's "
        "work); its columns and chart appear here when ready. Everything else below is complete."
    )


@st.fragment(run_every=ALERT_POLL_SECONDS)
def _wait_for_alerts(db, user, study: str, *, shown: bool) -> None:
    now = quality.quality_alerts_if_ready(db, user, study)
    if now is not None and now.current:
        st.rerun(scope="app")
    what = "the alerts below are from a moment ago" if shown else "alerts appear here when ready"
    st.caption(f":material/hourglass_top: Checking reviewer quality (drift, gold accuracy); {what}.")


@lead_step
def severity_forest(table: pd.DataFrame) -> go.Figure:
    """Each reviewer's severity (harm-model random intercept) with its 95% interval."""
    rows = table.loc[table["severity"].notna()] if "severity" in table else table.iloc[0:0]
    return go.Figure(
        dict(
            type="scatter",
            x=rows.get("severity", []),
            y=rows.get("rater", []),
            mode="markers",
            marker=dict(size=9, color="#2f5bd3"),
            error_x=dict(
                type="data",
                symmetric=False,
                array=(rows["severity_ci_high"] - rows["severity"]) if len(rows) else [],
                arrayminus=(rows["severity"] - rows["severity_ci_low"]) if len(rows) else [],
            ),
        ),
        layout=dict(
            shapes=[vertical_line(0, color="#888", dash="dot")],
            title=dict(text="Severity: log-odds of a worst-case call vs. the average reviewer (95% interval)"),
            height=max(240, 30 * len(rows) + 90),
            margin=MARGIN,
            xaxis=titled("Severity (log-odds vs the average reviewer)"),
            yaxis=titled("Reviewer", autorange="reversed"),
        ),
    )


@lead_step
def cusum_chart(path: pd.DataFrame, alpha: float, rater: str) -> go.Figure:
    """The reviewer's CUSUM of signed disagreement with the band the drift test uses."""
    n = len(path)
    sd = float(path["signed"].std(ddof=1)) if n > 1 else 0.0
    limit = drift_limit(alpha, n, sd)
    return go.Figure(
        dict(type="scatter", x=path["task"], y=path["cusum"], mode="lines", name="CUSUM", line=dict(color="#2f5bd3")),
        layout=dict(
            shapes=[horizontal_line(sign * limit, color="#c0392b", dash="dash") for sign in (1, -1)],
            title=dict(text=f"{rater}: cumulative signed disagreement with co-raters (above 0: harsher early on)"),
            xaxis=titled("shared task, in the order the reviewer rated them"),
            yaxis=titled("cumulative sum"),
            height=320,
            margin=MARGIN,
            showlegend=False,
        ),
    )


def plan_metrics(plan) -> None:
    """A plan's numbers as metrics (Plan page and Study set-up page)."""
    cols = st.columns(5)
    cols[0].metric("Tasks", plan.n_tasks)
    cols[1].metric(f"Rated by {plan.raters}", plan.n_dual, help="Dual-rated tasks")
    cols[2].metric("Dual share", f"{plan.dual_share:.2f}")
    hours = plan.reviewer_hours
    cols[3].metric("Reviewer-hours", "—" if hours is None else f"{hours:.1f}")
    if plan.metric == "harm-or":
        cols[4].metric("Simulated power", f"{plan.achieved:.3f}", help=f"target {plan.target:.2f}")
    else:
        cols[4].metric("Simulated CI width", f"{plan.achieved:.3f}", help=f"target {plan.target:.3f}")


METRIC_NAMES = {"rate": "Rate (Wilson CI)", "ac2": "Agreement (AC2 CI)", "harm-or": "Harm-model odds ratio (power)"}


def plan_panel(box, db, study: str) -> None:
    """The study's plans next to its pool: what is needed, what is drawn, and what falls short."""
    check = planning.plan_check(db, study)
    with box.container(border=True):
        st.markdown("**Study plan**")
        if not check.plans:
            st.caption("No plan kept for this study yet. The Plan page computes one from your targets.")
            return
        for plan in check.plans:
            st.caption(
                f"{METRIC_NAMES[plan.metric]}: {plan.n_tasks} tasks, {plan.n_dual} rated by {plan.raters} "
                f"(seed {plan.seed}, {plan.simulations} simulations)"
            )
        st.markdown(
            f"Needs **{check.needed_tasks}** units, **{check.needed_dual}** multi-rated "
            f"(dual share ≥ {check.needed_share:.2f}). Pool now: {check.units} units"
            + (f", {check.dual_units} multi-rated." if check.assigned_units else ", not yet assigned.")
        )
        for warning in check.warnings:
            st.warning(warning)
        if not check.warnings:
            st.success("The pool meets the plan." if check.assigned_units else "The pool size meets the plan.")
