"""Reviewer quality for study leads: alert thresholds, the quality report and its alerts.

* **The quality report** (:func:`quality_report`) measures every reviewer on the study's annotations
  in force (:mod:`review_app.analysis.reviewer_quality`: severity, agreement with co-raters, drift,
  time on task and accuracy on the gold tasks of :mod:`review_app.services.gold_tasks`). Pages use
  the cached report (:func:`cached_quality_report`), computed in a compute worker once per data
  version, and the alerts alone (:func:`cached_quality_alerts`), which skip the harm model's fit.
* **Thresholds** (drift false-alarm rate, minimum gold accuracy) are study settings a lead sets;
  crossing them raises alerts on the Progress page.

Every function takes the acting user (any object with an ``id``, e.g. the signed-in user) and
refuses anyone who is not an active lead or admin (:func:`require_lead`), reading files included:
reviewers never see any of this. A function given a study also refuses a lead who does not lead it.
"""

from __future__ import annotations

import csv
import io
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd
from sqlalchemy import Engine
from sqlmodel import Session, select

from review_app.analysis.layout import DEFAULT_COLUMNS as C
from review_app.analysis.reviewer_quality import Alert, QualityThresholds, ReviewerQuality, reviewer_quality
from review_app.analysis.study_harm_model import HarmModelSpec
from review_app.db.engine import read_session, write_session
from review_app.db.models import GoldTask, Reviewer, Study
from review_app.services import audit, compute_workers
from review_app.services.actors import LEAD_ROLES, SYSTEM, Actor, acting_user, require_study_lead
from review_app.services.analysis_options import harm_spec
from review_app.services.annotations import get_study_row, load_annotations, rater_labels
from review_app.services.errors import NotFound, PermissionDenied, SessionEnded
from review_app.services.export.tables import escape_csv_cell
from review_app.services.studies import lead_of
from review_app.services.study_analysis import harm_model
from review_app.services.study_cache import CACHE
from review_app.services.study_frames import relabelled, study_frame, study_rater_labels, warm_frame

WAIT_POLL_SECONDS = 0.05  # how often quality_report_now looks for the full report while it waits
SETTINGS_KEY = "quality"


def require_lead(session: Session, actor: Actor | None, what: str = "see reviewer quality") -> Reviewer | None:
    """The acting user re-read in this transaction (None for the system actor), if an active lead or admin.

    The same check as every other service (``actors.acting_user``): a deactivated account or a
    session opened before a password or role change is refused too.
    """
    if actor is None:
        raise PermissionDenied(f"only an active study lead or admin can {what}")
    try:
        return acting_user(session, actor, roles=LEAD_ROLES)
    except SessionEnded as exc:
        raise SessionEnded(f"only an active study lead or admin can {what}: {exc}") from None
    except PermissionDenied:
        raise PermissionDenied(f"only study leads and admins can {what}") from None


def account_id(user: Reviewer | None) -> int | None:
    """The id an audit row names for ``user``: the account's, or None for the system actor."""
    return user.id if user is not None else None  # None: the system actor (command line)


def check_lead(engine: Engine, actor: Actor | None) -> None:
    """Raise PermissionDenied unless ``actor`` is an active lead or admin now (before serving a cached report)."""
    with read_session(engine) as session:
        require_lead(session, actor)


def study_row(session: Session, name: str, *, lock: bool = False) -> Study:
    """The study named ``name``, its row locked with ``lock`` (a settings or gold-task change)."""
    query = select(Study).where(Study.name == name)
    if lock:
        query = query.with_for_update()
    study = session.exec(query).first()
    if study is None:
        raise NotFound(f"no study named {name!r}")
    return study


# --- thresholds ---------------------------------------------------------------------------------


def thresholds(engine: Engine, study_name: str, *, actor: Actor = SYSTEM) -> QualityThresholds:
    """The study's alert thresholds (defaults until a lead sets them), for a lead of the study or an admin."""
    with read_session(engine) as session:
        study = study_row(session, study_name)
        lead_of(session, actor, study)
        return QualityThresholds.from_dict(study.settings.get(SETTINGS_KEY))


def set_thresholds(engine: Engine, actor: Actor, study_name: str, values: QualityThresholds) -> QualityThresholds:
    """Store the alert thresholds with the study (audited)."""
    with write_session(engine) as session:
        lead = require_lead(session, actor, "set quality alert thresholds")
        study = study_row(session, study_name, lock=True)
        require_study_lead(session, lead, study)
        settings = dict(study.settings)
        before = settings.get(SETTINGS_KEY)
        settings[SETTINGS_KEY] = values.to_dict()
        study.settings = settings
        session.add(study)
        audit.record(
            session, actor_id=account_id(lead), action="study.quality_thresholds", entity="study", entity_id=study.id,
            study_id=study.id, before=before, after=values.to_dict(),
        )  # fmt: skip
    return values


# --- the report ---------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class QualityReport:
    """The analysis result plus who is who (username and study pseudonym)."""

    study: str
    quality: ReviewerQuality
    pseudonyms: dict[str, str]  # username -> R01, ...
    n_gold_tasks: int

    def table(self, *, real_names: bool = True) -> pd.DataFrame:
        frame = self.quality.table.copy()
        frame.insert(1, "pseudonym", frame[C.rater].map(self.pseudonyms))
        if not real_names:
            frame[C.rater] = frame["pseudonym"]
            frame = frame.drop(columns="pseudonym")
        return frame


def _report(
    study_name: str,
    regular: pd.DataFrame,
    gold_frame: pd.DataFrame,
    expected: dict[int, dict[str, Any]],
    settings: QualityThresholds,
    spec: HarmModelSpec,
    usernames: Mapping[int, str],
    pseudonyms: Mapping[int, str],
    *,
    severity: bool,
) -> QualityReport:
    """The report from its inputs (frames under usernames): one place for the cached and uncached paths."""
    result = reviewer_quality(
        regular,
        harm=harm_model(regular, spec) if severity else None,
        gold_annotations=gold_frame,
        expected=expected,
        thresholds=settings,
        severity=severity,
    )
    return QualityReport(
        study=study_name,
        quality=result,
        pseudonyms={usernames[k]: pseudonyms[k] for k in usernames},
        n_gold_tasks=len(expected),
    )


def _expected_scores(session: Session, study: Study) -> dict[int, dict[str, Any]]:
    return {
        int(g.task_id): dict(g.expected_scores)
        for g in session.exec(select(GoldTask).where(GoldTask.study_id == study.id))
    }


def quality_report(engine: Engine, actor: Actor, study_name: str) -> QualityReport:
    """Every reviewer's quality measures on the study's annotations in force (see reviewer_quality).

    Severity is read from the study's harm model as its Analysis page fits it
    (``study_analysis.harm_model`` under the study's saved analysis options and first model).
    Everything is read in one transaction, uncached (:func:`cached_quality_report` is what pages use).
    """
    with read_session(engine) as session:
        lead = require_lead(session, actor)
        study = get_study_row(session, study_name)
        require_study_lead(session, lead, study)
        usernames = rater_labels(session, study.id, pseudonymise=False)
        pseudonyms = rater_labels(session, study.id, pseudonymise=True)
        regular = load_annotations(session, study, pseudonymise=False, labels=usernames)
        gold_frame = load_annotations(session, study, pseudonymise=False, gold="only", labels=usernames)
        expected = _expected_scores(session, study)
        settings = QualityThresholds.from_dict(study.settings.get(SETTINGS_KEY))
        spec = harm_spec(session, study)
    return _report(study_name, regular, gold_frame, expected, settings, spec, usernames, pseudonyms, severity=True)


def _quality_inputs(engine: Engine, actor: Actor, study_name: str):
    """The role and study-lead check and the small reads every cached quality value runs on each call."""
    with read_session(engine) as session:
        lead = require_lead(session, actor)
        study = get_study_row(session, study_name)
        require_study_lead(session, lead, study)
        expected = _expected_scores(session, study)
        settings = QualityThresholds.from_dict(study.settings.get(SETTINGS_KEY))
        spec = harm_spec(session, study)
    key = (
        repr(sorted(settings.to_dict().items())),
        repr(sorted((k, sorted(v.items())) for k, v in expected.items())),
    )
    return expected, settings, spec, key


def _cache_key(inputs, *, severity: bool) -> tuple:
    """Where a report is cached: the full one also depends on the harm-model spec, the alerts-only one not."""
    _expected, _settings, spec, key = inputs
    return ("quality", *key, repr(spec)) if severity else ("quality_alerts", *key)


def _cached_quality(engine: Engine, study_name: str, inputs, *, severity: bool) -> QualityReport:
    expected, settings, spec, _key = inputs

    def compute(version: tuple[int, ...]) -> QualityReport:
        return compute_workers.run(engine, _quality_job, study_name, version, expected, settings, spec, severity)

    return CACHE.get(engine, study_name, _cache_key(inputs, severity=severity), compute)


def _quality_job(
    engine: Engine,
    study_name: str,
    version: tuple[int, ...],
    expected: dict[int, dict[str, Any]],
    settings: QualityThresholds,
    spec: HarmModelSpec,
    severity: bool,
) -> QualityReport:
    """The quality report on the frames of ``version`` (a compute-worker job: the frames stay there).

    The annotations are the study's shared frame (the one Agreement and Analysis read), renamed to
    usernames, and the gold tasks' annotations are read by task id: no second read of the study.
    """
    usernames = study_rater_labels(engine, study_name, pseudonymise=False, version=version)
    pseudonyms = study_rater_labels(engine, study_name, pseudonymise=True, version=version)
    shared = study_frame(engine, study_name, version=version)
    regular = relabelled(shared, pseudonyms, usernames)
    gold_frame = study_frame(engine, study_name, pseudonymise=False, gold="only", version=version)
    return _report(study_name, regular, gold_frame, expected, settings, spec, usernames, pseudonyms, severity=severity)


def cached_quality_report(engine: Engine, actor: Actor, study_name: str) -> QualityReport:
    """:func:`quality_report`, computed once per data version, thresholds, gold answers and harm-model spec.

    The role and study-lead check and the small settings read run on every call (the cache must not
    outlive a lead's role or their place among the study's leads); the frames come from the study's
    shared cache, and the report is shared by every lead of the study and session of the process.
    """
    return _cached_quality(engine, study_name, _quality_inputs(engine, actor, study_name), severity=True)


def _peek_alerts(engine: Engine, study_name: str, inputs) -> tuple[Alert, ...] | None:
    """The alerts of the full report, else of the alerts-only one, if either is cached for the current data."""
    for severity in (True, False):
        found = CACHE.peek(engine, study_name, _cache_key(inputs, severity=severity))
        if found is not None:
            return found.quality.alerts
    return None


def cached_quality_alerts(engine: Engine, actor: Actor, study_name: str) -> tuple[Alert, ...]:
    """The alerts of :func:`cached_quality_report` (drift and gold accuracy) without fitting the harm model.

    Alerts depend on drift and gold accuracy only, so the Progress page does not pay for severity
    (the harm model and its refit by third, seconds at panel scale): it reads the full report's
    alerts when a lead has computed it for this data version, else an alerts-only report, cached
    the same way (same data version, thresholds and gold answers).
    """
    inputs = _quality_inputs(engine, actor, study_name)
    found = _peek_alerts(engine, study_name, inputs)
    if found is not None:
        return found
    return _cached_quality(engine, study_name, inputs, severity=False).quality.alerts


@dataclass(frozen=True)
class AlertsNow:
    """The quality alerts a page can show now: of the current data, or the last ones computed."""

    alerts: tuple[Alert, ...]
    current: bool  # False: computed on an earlier state of the study; the current ones are on their way


_last_alerts: dict[tuple[str, str], tuple[Alert, ...]] = {}


def _fill_starts(tag: str) -> None:
    """Called first in a background fill's thread (``tag``: ``quality_alerts``, ``quality_report``).

    A seam: a test replaces it to hold a fill back until it has seen what a page shows meanwhile,
    which otherwise depends on whether the machine finished the fill first.
    """


def quality_alerts_if_ready(engine: Engine, actor: Actor, study_name: str) -> AlertsNow | None:
    """:func:`cached_quality_alerts` if computed for the current data version, else the last ones.

    When the current ones are not cached, their computation starts in the background (once; in the
    compute worker when there is one) and the caller shows the rest of its page now, with the last
    alerts computed for the study (``current=False``) or, the first time, none (None): at 500,000
    items the alerts take tens of seconds, and the Progress page's counts should not wait for them,
    nor should reviewers submitting every second keep the alerts from ever showing.
    """
    inputs = _quality_inputs(engine, actor, study_name)
    name = CACHE.study_key(engine, study_name)
    found = _peek_alerts(engine, study_name, inputs)
    if found is not None:
        _last_alerts[name] = found
        return AlertsNow(found, current=True)

    def fill() -> None:  # remembered even when reviewers have written meanwhile (then it is not cached)
        _fill_starts("quality_alerts")
        # the frame first, as a job of its own: a page opened meanwhile runs next, on that frame
        compute_workers.run(engine, warm_frame, study_name)
        _last_alerts[name] = _cached_quality(engine, study_name, inputs, severity=False).quality.alerts

    CACHE.in_background(engine, study_name, "quality_alerts", fill)
    last = _last_alerts.get(name)
    return None if last is None else AlertsNow(last, current=False)


@dataclass(frozen=True, eq=False)
class ReportNow:
    """The quality report a page can show now: complete, or without severity while that is computed."""

    report: QualityReport
    complete: bool  # False: the alerts-only report (no severity columns); the full one is on its way


def quality_report_now(engine: Engine, actor: Actor, study_name: str, *, wait_seconds: float = 0.0) -> ReportNow:
    """:func:`cached_quality_report` when it is ready, else the report without severity and the full one started.

    Severity takes the harm model and its refit by third of each reviewer's work: seconds at panel
    scale (two fits on 100,000 Rubric B annotations), against about a second for everything else.
    The page shows the rest at once (the alerts-only report, shared with the Progress page) and
    severity when its computation, started here in the background (once; in the compute worker when
    there is one), is done. ``wait_seconds``: how long to wait for the full report after starting it,
    so that a small study shows everything at once; only when this call started it and the report
    without severity took less than that (a large study's severity takes far longer: no waiting).
    """
    inputs = _quality_inputs(engine, actor, study_name)
    full_key = _cache_key(inputs, severity=True)
    full = CACHE.peek(engine, study_name, full_key)
    if full is not None:
        return ReportNow(full, complete=True)
    start = time.monotonic()
    partial = _cached_quality(engine, study_name, inputs, severity=False)

    def fill() -> None:
        _fill_starts("quality_report")
        _cached_quality(engine, study_name, inputs, severity=True)

    started = CACHE.in_background(engine, study_name, "quality_report", fill)
    if not started or time.monotonic() - start > wait_seconds:
        return ReportNow(partial, complete=False)  # a large study (or a rerun meanwhile): no waiting
    deadline = time.monotonic() + wait_seconds
    while time.monotonic() < deadline:
        time.sleep(min(WAIT_POLL_SECONDS, max(deadline - time.monotonic(), 0)))
        full = CACHE.peek(engine, study_name, full_key)
        if full is not None:
            return ReportNow(full, complete=True)
    return ReportNow(partial, complete=False)


QUALITY_COLUMNS: dict[str, str] = {
    C.rater: "Reviewer (username, or pseudonym R01, R02, ... without real names).",
    "pseudonym": "The reviewer's pseudonym in this study's exports.",
    "n_annotations": "Annotations in force on ordinary (non-gold) tasks.",
    "severity": "Reviewer random intercept of the harm model (log-odds of a worst-case classification vs. the "
    "average reviewer): conditional mode at the ML estimates.",
    "severity_ci_low": "Lower end of severity +- 1.96 conditional SD (Laplace).",
    "severity_ci_high": "Upper end of severity +- 1.96 conditional SD (Laplace).",
    "severity_first": "Severity in the first third of the reviewer's work (harm model with one intercept per "
    "reviewer and third).",
    "severity_last": "Severity in the last third of the reviewer's work.",
    "severity_change": "severity_last - severity_first.",
    "severity_change_se": "Approximate SE of severity_change (conditional SDs combined).",
    "agreement": "Mean pairwise ordinal-weighted agreement with co-raters over shared tasks and dimensions.",
    "shared_tasks": "Tasks the reviewer shares with at least one co-rater.",
    "agreement_first": "Agreement with co-raters on shared tasks in the first third of their work.",
    "agreement_last": "Agreement with co-raters on shared tasks in the last third of their work.",
    "drift_statistic": "CUSUM statistic max|S|/(s sqrt(n)) of signed disagreement with co-raters.",
    "drift_p_value": "Probability of a statistic this large without drift (Kolmogorov distribution).",
    "drift_direction": "When drift is flagged: harsher or more lenient than co-raters after the change.",
    "drift_alert": "Drift test below the study's false-alarm threshold.",
    "median_seconds": "Median seconds on task (all annotations, gold included).",
    "q1_seconds": "First quartile of seconds on task.",
    "q3_seconds": "Third quartile of seconds on task.",
    "n_too_fast": "Annotations below the panel's lower Tukey fence of log seconds.",
    "n_too_slow": "Annotations above the panel's upper Tukey fence of log seconds.",
    "gold_tasks": "Gold tasks the reviewer rated.",
    "gold_scores": "Dimension scores compared with the expected gold scores.",
    "gold_accuracy": "Share of gold dimension scores equal to the expected score.",
    "gold_ci_low": "Wilson 95% CI lower end of gold_accuracy (scores treated as independent).",
    "gold_ci_high": "Wilson 95% CI upper end of gold_accuracy.",
    "gold_within_one": "Share of gold dimension scores within one point of the expected score.",
    "gold_alert": "Gold accuracy below the study's threshold with at least the minimum number of gold tasks.",
}


def quality_csv(report: QualityReport, *, real_names: bool = False) -> bytes:
    """The per-reviewer table as CSV (pseudonyms unless ``real_names``), formula-like text escaped."""
    frame = report.table(real_names=real_names)
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(frame.columns)
    for row in frame.itertuples(index=False):
        writer.writerow(["" if pd.isna(v) else escape_csv_cell(v) for v in row])
    return buffer.getvalue().encode("utf-8")


def quality_alerts(engine: Engine, actor: Actor, study_name: str) -> list[dict[str, Any]]:
    """Alerts for the Progress page: reviewer, kind (drift or gold) and a sentence (shared cache)."""
    return [
        {"reviewer": a.rater, "kind": a.kind, "message": a.message}
        for a in cached_quality_alerts(engine, actor, study_name)
    ]
