"""A study plan in the study's units, as the Plan and Study set-up pages both show it.

Both pages render a plan through :func:`plan_metrics`, so the same plan reads the same on both: units,
multi-rated units, tasks over all rubrics and reviewer-hours at the time per task the lead sets
(:func:`time_per_task`, one value per study carried between the two pages). The counts and the
sentence converting a plan's tasks into units come from :mod:`review_app.services.planning`.
"""

from __future__ import annotations

from collections.abc import Sequence

import streamlit as st

from review_app.analysis.sample_size import Plan
from review_app.services import planning
from review_app.services.actors import Actor
from review_app.services.planning import PlanInUnits
from review_app.ui.components.quality import METRIC_NAMES
from review_app.ui.components.text import plain

TIME_KEY = "time_per_task:{study}"  # the lead's time per task, once typed, for both pages


def _typed(study: str, widget_key: str) -> None:
    st.session_state[TIME_KEY.format(study=study)] = st.session_state[widget_key]


def time_per_task(db, user: Actor, study: str, *, page: str, plans: Sequence[Plan] = ()) -> float | None:
    """The time per task (seconds per rating) reviewer-hours use, as a number input.

    It starts at the study's measured median time on task when the study has submissions (else a
    pilot's median that a plan carries, else empty); once the lead types a time, that time holds on
    both pages for the study. The widget is keyed and seeded before it is made (an unkeyed input whose
    value comes from session state snaps back).
    """
    typed_key = TIME_KEY.format(study=study)
    widget_key = f"time_per_task_input:{page}:{study}"
    measured = planning.measured_time_per_task(db, study, actor=user)
    default = planning.default_time_per_task(db, study, plans, actor=user)
    value = st.session_state.get(typed_key, default)
    if widget_key not in st.session_state or st.session_state[widget_key] != value:
        st.session_state[widget_key] = value  # None shows an empty input
    if measured.seconds is not None:
        source = (
            f"Default: the median time on task of this study's {measured.submissions:,} first submissions "
            f"({measured.seconds:.0f} s)."
        )
    elif default is not None:
        source = f"Default: the pilot's median time on task ({default:.0f} s); this study has no submission yet."
    else:
        source = "This study has no submission yet: give a time per task to get reviewer-hours."
    seconds = st.number_input(
        "Time per task (seconds)",
        value=None,  # the state seeded above holds the value; None here keeps an empty input empty
        min_value=1.0,
        max_value=36_000.0,
        step=5.0,
        key=widget_key,
        on_change=_typed,
        args=(study, widget_key),
        help="Seconds a reviewer spends on one rating of one task. " + source,
    )
    st.caption(source)
    return None if seconds is None else float(seconds)


def plan_metrics(units: PlanInUnits, seconds: float | None, plan: Plan | None = None, *, per_row: int = 5) -> None:
    """A plan's numbers in units: units, multi-rated units, tasks over all rubrics, reviewer-hours, and
    (for one plan) the simulated precision or power; the conversion from the plan's tasks under them.

    ``per_row``: metrics per row (the Study set-up page shows them in its narrow plan column).
    """
    hours = units.reviewer_hours(seconds)
    shown = [
        ("Units", f"{units.units:,}", "Pool units to draw; each holds one task of each of the study's rubrics."),
        (
            "Multi-rated units",
            f"{units.multi_rated:,}",
            f"Rated by {units.raters} reviewers each; dual share {units.dual_share:.2f}.",
        ),
        ("Tasks (all rubrics)", f"{units.tasks:,}", f"{units.tasks_per_unit} task(s) per unit"),
        (
            "Reviewer-hours",
            "—" if hours is None else f"{hours:,.1f}",
            f"{units.ratings:,} ratings × the time per task" if hours is not None else "Give a time per task.",
        ),
    ]
    if plan is not None and plan.metric == "harm-or":
        shown.append(("Simulated power", f"{plan.achieved:.3f}", f"target {plan.target:.2f}"))
    elif plan is not None:
        shown.append(("Simulated CI width", f"{plan.achieved:.3f}", f"target {plan.target:.3f}"))
    for start in range(0, len(shown), per_row):
        for column, (label, value, help_text) in zip(st.columns(per_row), shown[start : start + per_row], strict=False):
            column.metric(label, value, help=help_text)
    st.caption(plain(units.conversion()))


def plan_panel(box, db, user: Actor, study: str, seconds: float | None, *, per_row: int = 5) -> None:
    """The study's kept plans in units next to its pool: what is needed, what is drawn, what falls short."""
    check = planning.plan_check(db, study, actor=user)
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
        units = PlanInUnits.of(check.plans, planning.study_rubrics(db, study, actor=user))
        plan_metrics(units, seconds, check.plans[0] if len(check.plans) == 1 else None, per_row=per_row)
        st.markdown(
            f"Needs **{check.needed_tasks}** units, **{check.needed_dual}** multi-rated "
            f"(dual share ≥ {check.needed_share:.2f}). Pool now: {check.units} units "
            f"({check.units * units.tasks_per_unit:,} tasks)"
            + (f", {check.dual_units} multi-rated." if check.assigned_units else ", not yet assigned.")
        )
        for warning in check.warnings:
            st.warning(warning)
        if not check.warnings:
            st.success("The pool meets the plan." if check.assigned_units else "The pool size meets the plan.")
