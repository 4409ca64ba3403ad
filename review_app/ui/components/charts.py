"""Plotly figures for the lead pages (built from service results; no database access here)."""

from __future__ import annotations

import plotly.graph_objects as go

from review_app.services.export_tables import AGGREGATION_LABELS, CLASS_LABELS

COLORS = {"complete": "#2f8f5b", "open": "#c9d3e6", "submitted": "#2f8f5b", "skipped": "#e0a43a"}


def completion_bars(rows: list[dict], key: str, title: str) -> go.Figure:
    labels = [str(r[key]) for r in rows]
    complete = [r["complete"] for r in rows]
    remaining = [r["tasks"] - r["complete"] for r in rows]
    figure = go.Figure(
        [
            go.Bar(name="complete", x=labels, y=complete, marker_color=COLORS["complete"]),
            go.Bar(name="not yet", x=labels, y=remaining, marker_color=COLORS["open"]),
        ]
    )
    figure.update_layout(
        barmode="stack",
        title=title,
        height=320,
        margin=dict(l=10, r=10, t=40, b=10),
        xaxis_title=key.replace("_", " ").capitalize(),
        yaxis_title="Tasks",
    )
    return figure


def reviewer_bars(rows: list[dict]) -> go.Figure:
    names = [r["username"] for r in rows]
    figure = go.Figure(
        [
            go.Bar(
                name="submitted",
                y=names,
                x=[r["submitted"] for r in rows],
                orientation="h",
                marker_color=COLORS["submitted"],
            ),
            go.Bar(name="open", y=names, x=[r["open"] for r in rows], orientation="h", marker_color=COLORS["open"]),
            go.Bar(
                name="skipped", y=names, x=[r["skipped"] for r in rows], orientation="h", marker_color=COLORS["skipped"]
            ),
        ]
    )
    figure.update_layout(
        barmode="stack",
        title="By reviewer",
        xaxis_title="Assignments",
        yaxis_title="Reviewer",
        height=max(260, 28 * len(rows) + 80),
        margin=dict(l=10, r=10, t=40, b=10),
        yaxis=dict(autorange="reversed"),
    )
    return figure


def agreement_forest(frame) -> go.Figure:
    """Coefficient with its 95% CI per score (rows of ``StudyAnalysis.agreement_frame()``)."""
    names = list(frame["score_name"])
    values = list(frame["coefficient"])
    low = [v - lo if v == v and lo == lo else 0 for v, lo in zip(values, frame["ci_low"], strict=True)]
    high = [hi - v if v == v and hi == hi else 0 for v, hi in zip(values, frame["ci_high"], strict=True)]
    figure = go.Figure(
        go.Scatter(
            x=values,
            y=names,
            mode="markers",
            marker=dict(size=10, color="#2f5bd3"),
            error_x=dict(type="data", symmetric=False, array=high, arrayminus=low),
            text=list(frame["coefficient_name"]),
            hovertemplate="%{y}: %{text} %{x:.3f}<extra></extra>",
        )
    )
    figure.update_layout(
        title="Agreement (95% CI)",
        height=max(260, 45 * len(names) + 90),
        xaxis=dict(range=[-1, 1.05], title="Agreement coefficient (AC2 / AC1)"),
        margin=dict(l=10, r=10, t=40, b=10),
        yaxis=dict(autorange="reversed", title="Dimension"),
    )
    return figure


def score_usage(frame) -> go.Figure:
    """How often each score was given, per dimension (stacked)."""
    columns = [c for c in frame.columns if c.startswith("n_score_")]
    names = list(frame["score_name"])
    palette = ["#c0392b", "#e0a43a", "#2f8f5b", "#7f8c8d"]
    figure = go.Figure(
        [
            go.Bar(
                name=c.removeprefix("n_score_"),
                y=names,
                x=list(frame[c].fillna(0)),
                orientation="h",
                marker_color=palette[i % len(palette)],
            )
            for i, c in enumerate(columns)
        ]
    )
    figure.update_layout(
        barmode="stack",
        title="Scores used",
        height=max(260, 45 * len(names) + 90),
        margin=dict(l=10, r=10, t=40, b=10),
        xaxis_title="Ratings",
        legend_title_text="Score",
        yaxis=dict(autorange="reversed", showticklabels=False, title="Dimension (as in the left figure)"),
    )
    return figure


def pass_rates(frame) -> go.Figure:
    """Rubric A pass rate per dimension with Wilson 95% CIs."""
    figure = go.Figure(
        go.Bar(
            x=list(frame["name"]),
            y=list(frame["pass_rate"]),
            marker_color="#2f5bd3",
            error_y=dict(
                type="data",
                symmetric=False,
                array=list(frame["pass_ci_high"] - frame["pass_rate"]),
                arrayminus=list(frame["pass_rate"] - frame["pass_ci_low"]),
            ),
        )
    )
    figure.update_layout(
        title="Passing rate (per-task mean ≥ threshold)",
        xaxis_title="Dimension",
        yaxis=dict(range=[0, 1.05], title="Tasks passing (95% CI)", tickformat=".0%"),
        height=340,
        margin=dict(l=10, r=10, t=40, b=10),
    )
    return figure


def outcome_classes(frame) -> go.Figure:
    """Rubric B outcome-class rates per aggregation (all tasks), with Wilson 95% CIs."""
    rows = frame[frame["group"] == "all"]
    figure = go.Figure()
    for aggregation, part in rows.groupby("aggregation", sort=False):
        figure.add_bar(
            name=AGGREGATION_LABELS.get(aggregation, aggregation),
            x=[CLASS_LABELS.get(o, o) for o in part["outcome"]],
            y=list(part["rate"]),
            error_y=dict(
                type="data",
                symmetric=False,
                array=list(part["ci_high"] - part["rate"]),
                arrayminus=list(part["rate"] - part["ci_low"]),
            ),
        )
    figure.update_layout(
        barmode="group",
        title="Outcome classes by aggregation",
        xaxis_title="Outcome class",
        legend_title_text="Aggregation",
        yaxis=dict(range=[0, 1.05], title="Share of tasks (95% CI)", tickformat=".0%"),
        height=360,
        margin=dict(l=10, r=10, t=40, b=10),
    )
    return figure


def odds_ratios(table) -> go.Figure:
    """Adjusted odds ratios with 95% CIs on a log axis.

    Terms without a finite CI (not estimable) are left out; separated terms of a penalised fit are
    drawn hollow, since their estimate leans on the prior. Each label names the reference level.
    """
    rows = table[(table["term"] != "Intercept") & table["or_ci_low"].notna() & table["or_ci_high"].notna()]
    rows = rows[(rows["or_ci_low"] > 0) & (rows["or_ci_high"] < 1e6)]
    separated = list(rows["separated"]) if "separated" in rows else [False] * len(rows)
    references = list(rows["reference"]) if "reference" in rows else [None] * len(rows)
    if "label" in rows:
        labels = list(rows["label"])
    else:
        labels = [f"{t} vs {r}" if r else str(t) for t, r in zip(rows["term"], references, strict=True)]
    figure = go.Figure(
        go.Scatter(
            x=list(rows["odds_ratio"]),
            y=labels,
            mode="markers",
            marker=dict(size=10, color="#b02a37", symbol=["circle-open" if s else "circle" for s in separated]),
            error_x=dict(
                type="data",
                symmetric=False,
                array=list(rows["or_ci_high"] - rows["odds_ratio"]),
                arrayminus=list(rows["odds_ratio"] - rows["or_ci_low"]),
            ),
        )
    )
    figure.add_vline(x=1, line_dash="dot")
    figure.update_layout(
        title="Adjusted odds ratios of a worst-case outcome (95% CI)",
        xaxis=dict(type="log", title="Adjusted odds ratio (log scale)"),
        height=max(260, 40 * len(rows) + 90),
        margin=dict(l=10, r=10, t=40, b=10),
        yaxis=dict(autorange="reversed", title="Term vs its reference level"),
    )
    return figure


def judge_labels(confusion) -> go.Figure:
    """Clinician labels against the judge's: one bar group per judge label, bars by clinician label."""
    palette = {"recognized": "#2f8f5b", "neutral": "#7f8c8d", "polluted": "#c0392b"}
    figure = go.Figure(
        [
            go.Bar(
                name=str(clinician),
                x=[str(c) for c in confusion.columns],
                y=list(confusion.loc[clinician]),
                marker_color=palette.get(str(clinician)),
            )
            for clinician in confusion.index
        ]
    )
    figure.update_layout(
        barmode="group",
        title="Clinician label by judge label",
        xaxis_title="Judge's label",
        yaxis_title="Annotations",
        legend_title_text="Clinician's label",
        height=320,
        margin=dict(l=10, r=10, t=40, b=10),
    )
    return figure


def confidence_levels(by_confidence) -> go.Figure:
    """Paired annotations per confidence level, agreeing with the judge or not; every level of the scale is a bar.

    The x axis is categorical with the scale's levels as its categories (``by_confidence`` has one row
    per level, used or not), so no level disappears because nobody used it or plotly read it as a number.
    """
    labels = [
        f"{v} · {label}"
        for v, label in zip(by_confidence["confidence"], by_confidence["confidence_label"], strict=True)
    ]
    agree = list(by_confidence["k"])
    differ = [n - k for n, k in zip(by_confidence["n"], by_confidence["k"], strict=True)]
    figure = go.Figure(
        [
            go.Bar(name="agrees with the judge", x=labels, y=agree, marker_color=COLORS["complete"]),
            go.Bar(name="differs from the judge", x=labels, y=differ, marker_color=COLORS["skipped"]),
        ]
    )
    figure.update_layout(
        barmode="stack",
        title="Reviewer confidence",
        xaxis=dict(title="Confidence in the verdict", type="category", categoryorder="array", categoryarray=labels),
        yaxis_title="Annotations",
        height=320,
        margin=dict(l=10, r=10, t=40, b=10),
    )
    return figure
