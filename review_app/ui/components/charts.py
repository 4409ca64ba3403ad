"""Plotly figures for the lead pages (built from service results; no database access here).

Every figure is built in one call from plain dicts, its layout given whole to the constructor, which
validates everything once: trace objects built first were validated again by the figure, and
``update_layout`` after construction parsed and validated each property path once more. The Agreement
page's four figures took 22 ms of every rerun that way and take 4 ms this way (the same figures, key for
key), Python time that reviewers' requests in the same server wait for.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import plotly.graph_objects as go

from review_app.services.export.tables import AGGREGATION_LABELS, CLASS_LABELS
from review_app.services.priority import lead_step

COLORS = {"complete": "#2f8f5b", "open": "#c9d3e6", "submitted": "#2f8f5b", "skipped": "#e0a43a"}
MARGIN = dict(l=10, r=10, t=40, b=10)
LISTED = 24  # a trace with more points than this is summarised in the text alternative, not listed


def _number(value, percent: bool) -> str:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value)
    if not math.isfinite(number):
        return "missing"
    if percent:
        return f"{number:.0%}"
    return f"{number:,.0f}" if number.is_integer() else f"{number:.3g}"


def _points(trace: dict, percent: bool) -> str:
    """One trace's points as words: "A 12, B 8", each with its interval when the trace draws one."""
    def listed(value) -> list:  # a list, a tuple or a pandas Series (whose truth value is ambiguous)
        return [] if value is None else list(value)

    across = trace.get("orientation") == "h"
    places = listed(trace.get("y" if across else "x"))
    values = listed(trace.get("x" if across else "y"))
    bars = trace.get("error_x" if across else "error_y") or {}
    plus = listed(bars.get("array"))
    minus = listed(bars.get("arrayminus")) if bars.get("arrayminus") is not None else plus
    if len(values) > LISTED:
        finite = [float(v) for v in values if v is not None and math.isfinite(float(v))]
        if not finite:
            return f"{len(values)} points, none with a value"
        return (
            f"{len(values)} points from {places[0]} to {places[-1]}, values from {_number(min(finite), percent)} "
            f"to {_number(max(finite), percent)}, the last {_number(finite[-1], percent)}"
        )
    words = []
    for i, (place, value) in enumerate(zip(places, values, strict=False)):
        text = f"{place} {_number(value, percent)}"
        if i < len(plus) and i < len(minus):
            try:
                low, high = float(value) - float(minus[i]), float(value) + float(plus[i])
            except (TypeError, ValueError):
                low = high = math.nan
            if math.isfinite(low) and math.isfinite(high) and high > low:
                text += f" ({_number(low, percent)} to {_number(high, percent)})"
        words.append(text)
    return ", ".join(words) or "no points"


def alt_text(traces: list[dict], layout: dict) -> str:
    """The chart's text alternative (WCAG 1.1.1): its title, then every trace's numbers in words.

    The page's script gives it to the chart as its accessible name (``a11y.js``), so a screen reader
    reads the numbers the bars and markers show rather than the SVG's tick labels.
    """
    title = (layout.get("title") or {}).get("text", "")
    value_axis = layout.get("yaxis") or {}
    percent = "%" in str(value_axis.get("tickformat", ""))
    parts = []
    for trace in traces:
        name = trace.get("name")
        parts.append(f"{name}: {_points(trace, percent)}" if name else _points(trace, percent))
    return f"Chart: {title}. " + "; ".join(parts) + "."


def figure(traces: dict | list[dict], layout: dict) -> go.Figure:
    """``go.Figure(traces, layout=...)`` with the text alternative in the layout's ``meta``."""
    listed = [traces] if isinstance(traces, dict) else list(traces)
    return go.Figure(listed, layout=dict(layout, meta=dict(alt=alt_text(listed, layout))))


def titled(text: str, **axis) -> dict:
    """An axis (or legend) with its title: the nested form ``update_layout(xaxis_title=...)`` spells flat."""
    return dict(axis, title=dict(text=text))


def vertical_line(x: float, **line) -> dict:
    """A dotted-style reference line across the plot at ``x`` (what ``Figure.add_vline`` adds)."""
    return dict(type="line", x0=x, x1=x, xref="x", y0=0, y1=1, yref="y domain", line=line)


def horizontal_line(y: float, **line) -> dict:
    """A reference line across the plot at ``y`` (what ``Figure.add_hline`` adds)."""
    return dict(type="line", x0=0, x1=1, xref="x domain", y0=y, y1=y, yref="y", line=line)


def ci_bars(estimate, low, high) -> dict:
    """Asymmetric error bars from an interval's ends (``error_x=`` or ``error_y=`` of a trace).

    Plotly draws error bars as distances from the point, so the ends become ``high - estimate``
    and ``estimate - low``; the arguments are pandas Series (or numpy arrays) of equal length.
    """
    return dict(type="data", symmetric=False, array=list(high - estimate), arrayminus=list(estimate - low))


def count_axis(text: str, largest: float, **axis) -> dict:
    """An axis of whole numbers (tasks, ratings, the n-th shared task): ticks on whole numbers only.

    Plotly picks steps of 0.2 or 0.5 when the largest value is small (1, 1.2, 1.4 for one task);
    the step here is the smallest of 1, 2, 5, 10, 20, ... that leaves at most ten ticks.
    """
    step = 1
    while largest / step > 10:
        step = step * 5 // 2 if str(step).startswith("2") else step * 2  # 1, 2, 5, 10, 20, 50, ...
    return titled(text, **axis, tickmode="linear", tick0=0, dtick=step, tickformat=",d")


def log_axis(text: str, values: Iterable[float], **axis) -> dict:
    """A log axis for ratios with readable tick labels: 0.1, 0.2, 0.5, 1, 2, 5, 10 (or decades only).

    Plotly labels a log axis spanning a decade or two with its minor ticks (2 5 0.1 2 5 1 2 5 10), which
    reads as nonsense; here the ticks are chosen and labelled explicitly, and the range keeps 1 (no
    difference) well inside.
    """
    finite = [v for v in values if v is not None and math.isfinite(v) and v > 0]
    low = min([*finite, 1.0]) / 1.25
    high = max([*finite, 1.0]) * 1.25
    low, high = min(low, 0.5), max(high, 2.0)
    candidates = [m * 10.0**e for e in range(-6, 7) for m in (1, 2, 5)]
    ticks = [v for v in candidates if low <= v <= high]
    if len(ticks) > 10:  # beyond about three decades 1-2-5 crowds the axis: decades only
        ticks = [v for v in ticks if math.log10(v).is_integer()]
        while len(ticks) > 9:
            ticks = ticks[::2]
    labels = [f"{v:,.{max(0, -math.floor(math.log10(v) + 1e-9))}f}" for v in ticks]  # 0.05, 0.2, 1, 1,000
    return titled(text, **axis, type="log", range=[math.log10(low), math.log10(high)], tickvals=ticks, ticktext=labels)


@lead_step
def completion_bars(rows: list[dict], key: str, title: str) -> go.Figure:
    labels = [str(r[key]) for r in rows]
    complete = [r["complete"] for r in rows]
    remaining = [r["tasks"] - r["complete"] for r in rows]
    return figure(
        [
            dict(type="bar", name="complete", x=labels, y=complete, marker=dict(color=COLORS["complete"])),
            dict(type="bar", name="not yet", x=labels, y=remaining, marker=dict(color=COLORS["open"])),
        ],
        layout=dict(
            barmode="stack",
            title=dict(text=title),
            height=320,
            margin=MARGIN,
            xaxis=titled(key.replace("_", " ").capitalize()),
            yaxis=count_axis("Tasks", max((r["tasks"] for r in rows), default=0)),
        ),
    )


@lead_step
def reviewer_bars(rows: list[dict]) -> go.Figure:
    names = [r["username"] for r in rows]
    return figure(
        [
            dict(
                type="bar",
                name=status,
                y=names,
                x=[r[status] for r in rows],
                orientation="h",
                marker=dict(color=COLORS[status]),
            )
            for status in ("submitted", "open", "skipped")
        ],
        layout=dict(
            barmode="stack",
            title=dict(text="By reviewer"),
            xaxis=count_axis(
                "Assignments", max((sum(r[s] for s in ("submitted", "open", "skipped")) for r in rows), default=0)
            ),
            height=max(260, 28 * len(rows) + 80),
            margin=MARGIN,
            yaxis=titled("Reviewer", autorange="reversed"),
        ),
    )


@lead_step
def agreement_forest(frame) -> go.Figure:
    """Coefficient with its 95% CI per score (rows of ``StudyAnalysis.agreement_frame()``)."""
    names = list(frame["score_name"])
    values = list(frame["coefficient"])
    low = [v - lo if v == v and lo == lo else 0 for v, lo in zip(values, frame["ci_low"], strict=True)]
    high = [hi - v if v == v and hi == hi else 0 for v, hi in zip(values, frame["ci_high"], strict=True)]
    return figure(
        dict(
            type="scatter",
            x=values,
            y=names,
            mode="markers",
            marker=dict(size=10, color="#2f5bd3"),
            error_x=dict(type="data", symmetric=False, array=high, arrayminus=low),
            text=list(frame["coefficient_name"]),
            hovertemplate="%{y}: %{text} %{x:.3f}<extra></extra>",
        ),
        layout=dict(
            title=dict(text="Agreement (95% CI)"),
            height=max(260, 45 * len(names) + 90),
            xaxis=titled("Agreement coefficient (AC2 / AC1)", range=[-1, 1.05]),
            margin=MARGIN,
            yaxis=titled("Dimension", autorange="reversed"),
        ),
    )


@lead_step
def score_usage(frame) -> go.Figure:
    """How often each score was given, per dimension (stacked)."""
    columns = [c for c in frame.columns if c.startswith("n_score_")]
    names = list(frame["score_name"])
    palette = ["#c0392b", "#e0a43a", "#2f8f5b", "#7f8c8d"]
    return figure(
        [
            dict(
                type="bar",
                name=c.removeprefix("n_score_"),
                y=names,
                x=list(frame[c].fillna(0)),
                orientation="h",
                marker=dict(color=palette[i % len(palette)]),
            )
            for i, c in enumerate(columns)
        ],
        layout=dict(
            barmode="stack",
            title=dict(text="Scores used"),
            height=max(260, 45 * len(names) + 90),
            margin=MARGIN,
            xaxis=count_axis("Ratings", float(frame[columns].fillna(0).sum(axis=1).max()) if columns else 0),
            legend=titled("Score"),
            yaxis=titled("Dimension (as in the left figure)", autorange="reversed", showticklabels=False),
        ),
    )


@lead_step
def pass_rates(frame) -> go.Figure:
    """Rubric A pass rate per dimension with Wilson 95% CIs.

    Rows without a pass rate (the composite, which has no pass threshold) are left out rather than
    drawn as an empty slot.
    """
    frame = frame[frame["pass_rate"].notna()]
    return figure(
        dict(
            type="bar",
            x=list(frame["name"]),
            y=list(frame["pass_rate"]),
            marker=dict(color="#2f5bd3"),
            error_y=ci_bars(frame["pass_rate"], frame["pass_ci_low"], frame["pass_ci_high"]),
        ),
        layout=dict(
            title=dict(text="Passing rate (per-task mean ≥ threshold)"),
            xaxis=titled("Dimension"),
            yaxis=titled("Tasks passing (95% CI)", range=[0, 1.05], tickformat=".0%"),
            height=340,
            margin=MARGIN,
        ),
    )


@lead_step
def outcome_classes(frame) -> go.Figure:
    """Rubric B outcome-class rates per aggregation (all tasks), with Wilson 95% CIs."""
    rows = frame[frame["group"] == "all"]
    return figure(
        [
            dict(
                type="bar",
                name=AGGREGATION_LABELS.get(aggregation, aggregation),
                x=[CLASS_LABELS.get(o, o) for o in part["outcome"]],
                y=list(part["rate"]),
                error_y=ci_bars(part["rate"], part["ci_low"], part["ci_high"]),
            )
            for aggregation, part in rows.groupby("aggregation", sort=False)
        ],
        layout=dict(
            barmode="group",
            title=dict(text="Outcome classes by aggregation"),
            xaxis=titled("Outcome class"),
            legend=titled("Aggregation"),
            yaxis=titled("Share of tasks (95% CI)", range=[0, 1.05], tickformat=".0%"),
            height=360,
            margin=MARGIN,
        ),
    )


@lead_step
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
    return figure(
        dict(
            type="scatter",
            x=list(rows["odds_ratio"]),
            y=labels,
            mode="markers",
            marker=dict(size=10, color="#b02a37", symbol=["circle-open" if s else "circle" for s in separated]),
            error_x=ci_bars(rows["odds_ratio"], rows["or_ci_low"], rows["or_ci_high"]),
        ),
        layout=dict(
            shapes=[vertical_line(1, dash="dot")],
            title=dict(text="Adjusted odds ratios of a worst-case outcome (95% CI)"),
            xaxis=log_axis(
                "Adjusted odds ratio (log scale)", [*rows["or_ci_low"], *rows["or_ci_high"], *rows["odds_ratio"]]
            ),
            height=max(260, 40 * len(rows) + 90),
            margin=MARGIN,
            yaxis=titled("Term vs its reference level", autorange="reversed"),
        ),
    )


@lead_step
def judge_labels(confusion) -> go.Figure:
    """Clinician labels against the judge's: one bar group per judge label, bars by clinician label."""
    palette = {"recognized": "#2f8f5b", "neutral": "#7f8c8d", "polluted": "#c0392b"}
    return figure(
        [
            dict(
                type="bar",
                name=str(clinician),
                x=[str(c) for c in confusion.columns],
                y=list(confusion.loc[clinician]),
                marker=dict(color=palette.get(str(clinician))),
            )
            for clinician in confusion.index
        ],
        layout=dict(
            barmode="group",
            title=dict(text="Clinician label by judge label"),
            xaxis=titled("Judge's label"),
            yaxis=count_axis("Annotations", float(confusion.to_numpy().max()) if confusion.size else 0),
            legend=titled("Clinician's label"),
            height=320,
            margin=MARGIN,
        ),
    )


@lead_step
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
    return figure(
        [
            dict(type="bar", name="agrees with the judge", x=labels, y=agree, marker=dict(color=COLORS["complete"])),
            dict(type="bar", name="differs from the judge", x=labels, y=differ, marker=dict(color=COLORS["skipped"])),
        ],
        layout=dict(
            barmode="stack",
            title=dict(text="Reviewer confidence"),
            xaxis=titled("Confidence in the verdict", type="category", categoryorder="array", categoryarray=labels),
            yaxis=count_axis("Annotations", max(by_confidence["n"], default=0)),
            height=320,
            margin=MARGIN,
        ),
    )
