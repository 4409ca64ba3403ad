"""Lead-only pieces shared by the Plan, Reviewers' quality, Progress and Study set-up pages.

Figures are built from service results (no database access, no statistics here); the quality
report is cached per study, data version, thresholds, analysis options (severity comes from the
harm model under them) and lead, like the study's analysis.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from review_app.analysis.reviewer_measures import MIN_DRIFT_TASKS, drift_limit
from review_app.services import reviewer_monitoring
from review_app.services.errors import ServiceError
from review_app.services.priority import lead_step
from review_app.ui.components import tables
from review_app.ui.components.charts import (
    MARGIN,
    ci_bars,
    count_axis,
    figure,
    horizontal_line,
    log_axis,
    titled,
    vertical_line,
)

SHARED = "tasks the reviewer shares with at least one co-rater"
SEVERITY = "Severity in detail"
DRIFT = "Agreement and drift over each reviewer's work"
TIME = "Time on task in detail"
GOLD = "Gold tasks in detail"
PSEUDONYMS = "Pseudonyms"
QUALITY_COLUMNS: dict[str, tables.Column] = {
    "rater": tables.Column("Reviewer", anchor=True, help="Username, or the study's pseudonym with usernames off."),
    "n_annotations": tables.Column("Ratings", "count", help="Ratings in force on ordinary (non-gold) tasks."),
    "severity": tables.Column(
        "Severity (odds ratio)",
        "log_odds",
        help="How the reviewer's odds of calling a response worst case compare with the average reviewer's, from "
        "the harm model (1 = average, 2 = twice the odds, 0.5 = half), all else in the model equal.",
    ),
    "severity_ci_low": tables.Column(
        "95% CI low",
        "log_odds",
        secondary=True,
        group=SEVERITY,
        help="Lower end of the severity's 95% interval.",
    ),
    "severity_ci_high": tables.Column(
        "95% CI high",
        "log_odds",
        secondary=True,
        group=SEVERITY,
        help="Upper end of the severity's 95% interval.",
    ),
    "severity_first": tables.Column(
        "First third",
        "log_odds",
        secondary=True,
        group=SEVERITY,
        help="Severity in the first third of the reviewer's ratings (a separate fit, one intercept per reviewer "
        "and third).",
    ),
    "severity_last": tables.Column(
        "Last third",
        "log_odds",
        secondary=True,
        group=SEVERITY,
        help="Severity in the last third of their ratings.",
    ),
    "severity_change": tables.Column(
        "Change, last vs first third",
        "log_odds",
        secondary=True,
        group=SEVERITY,
        help="Severity in the last third against the first, as an odds ratio (above 1: harsher later).",
    ),
    "severity_change_se": tables.Column(
        "Change SE (log-odds)",
        "number",
        secondary=True,
        group=SEVERITY,
        help="Standard error of the change on the log-odds scale (above 1: the change is mostly noise).",
    ),
    "agreement": tables.Column(
        "Agreement",
        "percent",
        help=f"Weighted agreement with co-raters on {SHARED}: 100% when every score matches, partial credit for "
        "scores one level apart (Gwet's ordinal weights), averaged over co-raters and dimensions.",
    ),
    "shared_tasks": tables.Column("Shared tasks", "count", help=f"The {SHARED}."),
    "agreement_first": tables.Column(
        "Agreement, first third",
        "percent",
        secondary=True,
        group=DRIFT,
        help="Agreement on shared tasks in their first third.",
    ),
    "agreement_last": tables.Column(
        "Agreement, last third",
        "percent",
        secondary=True,
        group=DRIFT,
        help="Agreement on shared tasks in their last third.",
    ),
    "drift_p_value": tables.Column(
        "Drift p",
        "p",
        help="How likely a drift this large is without any drift (CUSUM test of disagreement with co-raters); "
        "a dash: fewer than 15 shared tasks, not tested yet.",
    ),
    "drift_direction": tables.Column(
        "Drifted",
        secondary=True,
        group=DRIFT,
        help="When the drift test alerts: harsher or more lenient than co-raters later on.",
    ),
    "drift_statistic": tables.Column(
        "Drift statistic",
        "number",
        secondary=True,
        group=DRIFT,
        help="The CUSUM statistic the drift p-value comes from.",
    ),
    "drift_alert": tables.Column(
        "Drift alert", "bool", secondary=True, group=DRIFT, help="Drift p below your false-alarm rate."
    ),
    "median_seconds": tables.Column(
        "Median time", "minutes", help="Median minutes per rating (every rating, gold tasks included)."
    ),
    "q1_seconds": tables.Column(
        "Time, lower quartile", "minutes", secondary=True, group=TIME, help="A quarter of ratings took less."
    ),
    "q3_seconds": tables.Column(
        "Time, upper quartile", "minutes", secondary=True, group=TIME, help="A quarter took more."
    ),
    "n_too_fast": tables.Column(
        "Too fast", "count", help="Ratings far quicker than the panel's usual (below its lower Tukey fence)."
    ),
    "n_too_slow": tables.Column(
        "Too slow",
        "count",
        secondary=True,
        group=TIME,
        help="Ratings far slower than the panel's usual (above its upper Tukey fence).",
    ),
    "gold_tasks": tables.Column(
        "Gold tasks", "count", secondary=True, group=GOLD, help="Gold tasks the reviewer rated."
    ),
    "gold_accuracy": tables.Column(
        "Gold matched", "percent", help="Share of their scores on gold tasks equal to the expected score."
    ),
    "gold_ci_low": tables.Column(
        "Matched, 95% CI low", "percent", secondary=True, group=GOLD, help="Wilson 95% interval, lower end."
    ),
    "gold_ci_high": tables.Column(
        "Matched, 95% CI high", "percent", secondary=True, group=GOLD, help="Wilson 95% interval, upper end."
    ),
    "gold_scores": tables.Column(
        "Scores compared",
        "count",
        secondary=True,
        group=GOLD,
        help="Scores on gold tasks compared with the expected ones.",
    ),
    "gold_within_one": tables.Column(
        "Within one point",
        "percent",
        secondary=True,
        group=GOLD,
        help="Share of gold scores at most one level off.",
    ),
    "gold_alert": tables.Column(
        "Gold alert",
        "bool",
        secondary=True,
        group=GOLD,
        help="Gold matched below your minimum, with enough gold tasks rated.",
    ),
    "pseudonym": tables.Column(
        "Pseudonym", secondary=True, group=PSEUDONYMS, help="The reviewer's pseudonym in this study's exports."
    ),
}
QUALITY_GROUPS: dict[str, str] = {
    SEVERITY: "Severity's 95% interval, and severity in the first and the last third of each reviewer's ratings "
    "(a separate fit of the harm model, one intercept per reviewer and third), as odds ratios against the average "
    "reviewer; the change's standard error is on the log-odds scale.",
    DRIFT: "Agreement with co-raters on the shared tasks of each reviewer's first and last third, and the drift "
    "test's direction, statistic and alert (the test runs from 15 shared tasks).",
    TIME: "The middle half of each reviewer's minutes per rating, and the ratings far slower than the panel's "
    "usual; every rating counted (gold tasks included).",
    GOLD: "On gold tasks: the tasks rated and scores compared, the share matched with its Wilson 95% interval, the "
    "share at most one level off, and the alert you set on the share matched.",
    PSEUDONYMS: "Each reviewer's pseudonym in this study's exports.",
}
NO_VARIANCE_NOTE = "the harm model estimates no reviewer variance"
NO_RUBRIC_B_NOTE = "severity needs Rubric B annotations"


def severity_note(result) -> str | None:
    """What a severity of exactly 1 (the average) for everyone means, when the harm model's reviewer variance is 0.

    The maximum-likelihood fit can put the variance between reviewers at its boundary, 0, when the
    Rubric B ratings are too few to tell reviewers apart from chance (a boundary or singular fit, as
    lme4 reports it): every reviewer's intercept is then exactly 0 and every interval has no width.
    That is the model's answer, not a rounding: the page says so in words.
    """
    model = result.harm_model
    if model is None or model.group_variance > 0:
        return None
    return (
        f"Severity is 1 (the average) for every reviewer, with no interval: on these {model.n:,} Rubric B ratings "
        f"({model.n_events:,} worst case) from {model.n_groups:,} reviewers, the harm model estimates no variance "
        "between reviewers (a boundary fit), so it cannot tell their severity apart from chance yet. Reviewers may "
        "still differ; more Rubric B ratings per reviewer show it. Severity by third of each reviewer's work is a "
        "separate fit and can differ from 1."
    )


def sentence(note: str) -> str:
    """A note of the analysis (lower case, no full stop) as a sentence."""
    note = note.strip()
    return (note[:1].upper() + note[1:] + ("" if note.endswith(".") else ".")) if note else note


REPORT_WAIT_SECONDS = 0.5  # a small study's full report is ready by then: shown at once, severity included


def report_for(db, user, study: str) -> reviewer_monitoring.ReportNow:
    """The study's reviewer-quality report, recomputed exactly when ratings, gold tasks, thresholds or the
    study's analysis options change (one copy shared by every lead: ``services.study_cache``).

    Severity (two harm-model fits, seconds at panel scale) may still be on its way: then the report
    comes without it (``complete`` False) and :func:`wait_for_severity` reruns the page when it is ready.
    """
    with st.spinner("Computing reviewer quality..."):
        return reviewer_monitoring.quality_report_now(db, user, study, wait_seconds=REPORT_WAIT_SECONDS)


ALERT_POLL_SECONDS = 2


def show_alerts(db, user, study: str) -> None:
    """Drift and gold-accuracy alerts above the lead's thresholds (Progress page; no harm-model fit).

    The alerts are computed in the background when they are not cached for the study's current
    data: the page's counts show at once, and a small fragment reruns the page when they are ready.
    """
    try:
        now = reviewer_monitoring.quality_alerts_if_ready(db, user, study)
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
    if reviewer_monitoring.quality_report_now(db, user, study).complete:
        st.rerun(scope="app")
    st.caption(
        ":material/hourglass_top: Computing severity (the harm model, and its refit by third of each reviewer's "
        "work); its columns and chart appear here when ready. Everything else below is complete."
    )


@st.fragment(run_every=ALERT_POLL_SECONDS)
def _wait_for_alerts(db, user, study: str, *, shown: bool) -> None:
    now = reviewer_monitoring.quality_alerts_if_ready(db, user, study)
    if now is not None and now.current:
        st.rerun(scope="app")
    what = "the alerts below are from a moment ago" if shown else "alerts appear here when ready"
    st.caption(f":material/hourglass_top: Checking reviewer quality (drift, gold accuracy); {what}.")


@lead_step
def severity_forest(table: pd.DataFrame) -> go.Figure:
    """Each reviewer's severity (harm-model random intercept) with its 95% interval, as odds ratios.

    The intercepts are log-odds; a lead reads them as how many times the average reviewer's odds of
    a worst-case call a reviewer has (1: average), so the axis is the odds ratio on a log scale.
    """
    rows = table.loc[table["severity"].notna()] if "severity" in table else table.iloc[0:0]
    ratio, low, high = (np.exp(rows[c].astype(float)) for c in ("severity", "severity_ci_low", "severity_ci_high"))
    return figure(
        dict(
            type="scatter",
            x=list(ratio),
            y=list(rows.get("rater", [])),
            mode="markers",
            marker=dict(size=9, color="#2f5bd3"),
            error_x=ci_bars(ratio, low, high),
            hovertemplate="%{y}: %{x:.2f}<extra></extra>",
        ),
        layout=dict(
            shapes=[vertical_line(1, color="#888", dash="dot")],
            title=dict(text="Severity: odds of a worst-case call against the average reviewer (95% interval)"),
            height=max(240, 30 * len(rows) + 90),
            margin=MARGIN,
            xaxis=log_axis("Odds ratio against the average reviewer (log scale; 1 = average)", [*low, *high]),
            yaxis=titled("Reviewer", autorange="reversed"),
        ),
    )


@lead_step
def cusum_chart(path: pd.DataFrame, alpha: float, rater: str) -> go.Figure:
    """The reviewer's CUSUM of signed disagreement with the band the drift test uses."""
    n = len(path)
    sd = float(path["signed"].std(ddof=1)) if n > 1 else 0.0
    # the band only where the test runs: below MIN_DRIFT_TASKS shared tasks no line can raise an alert
    limit = drift_limit(alpha, n, sd) if n >= MIN_DRIFT_TASKS else None
    band = [horizontal_line(sign * limit, color="#c0392b", dash="dash") for sign in (1, -1)] if limit else []
    return figure(
        dict(
            type="scatter",
            x=path["task"],
            y=path["cusum"],
            mode="lines+markers" if n < 30 else "lines",
            name="CUSUM",
            line=dict(color="#2f5bd3"),
        ),
        layout=dict(
            shapes=band,
            title=dict(text=f"{rater}: cumulative signed disagreement with co-raters (above 0: harsher early on)"),
            xaxis=count_axis("Shared task, in the order the reviewer rated them", n, rangemode="tozero"),
            yaxis=titled("Cumulative sum"),
            height=320,
            margin=MARGIN,
            showlegend=False,
        ),
    )


METRIC_NAMES = {"rate": "Rate (Wilson CI)", "ac2": "Agreement (AC2 CI)", "harm-or": "Harm-model odds ratio (power)"}
