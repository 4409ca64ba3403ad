"""SQLModel tables of a review study (docs/architecture.md, "The database layer").

Two rules shape this schema:
- Nothing a reviewer submits is ever overwritten. Annotations are append-only revisions (the one
  in force is the highest revision of an assignment), adjudications are versioned, and the audit
  log is append-only; database triggers refuse UPDATE and DELETE on those tables.
- The database enforces what must never be wrong even if a caller skips validation (SQLModel
  ``table=True`` models do not validate): check constraints on roles, statuses and taxonomy ids,
  and scores that must exist in ``rubric_level`` (a composite foreign key), so an out-of-range
  score cannot be stored on SQLite or PostgreSQL.

The tables stay in one module past the usual 500 lines: the schema is read as a whole (foreign keys,
check constraints and indexes refer across tables), Alembic compares the migrations with this one
metadata, and every layer imports its rows from here.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    CheckConstraint,
    Column,
    ForeignKeyConstraint,
    Index,
    Text,
    UniqueConstraint,
    text,
)
from sqlmodel import Field, SQLModel

from bench_core.medmisbench import CONTENT_TYPE_IDS, PROVENANCE_IDS

ROLES = ("reviewer", "lead", "admin")
ASSIGNMENT_STATUSES = ("assigned", "in_progress", "submitted", "skipped", "withdrawn")
OPEN_STATUSES = ("assigned", "in_progress", "skipped")
ADJUDICATION_STATUSES = ("unanimous", "adjudicated", "unresolved")
AUTO_LABELS = ("FAIL", "SUCCESS")
ITEM_KINDS = ("mcq", "retracted")
GOLD_SOURCES = ("adjudication", "consensus")
FLAG_KINDS = ("item", "response", "rubric", "other")
FLAG_STATUSES = ("open", "resolved", "excluded", "withdrawn")


def utcnow() -> datetime:
    """Aware UTC now (SQLModel stores aware datetimes and returns them in UTC on both databases)."""
    return datetime.now(UTC)


def _in(column: str, values: tuple[str, ...], *, nullable: bool = False) -> str:
    listed = ", ".join(f"'{v}'" for v in values)
    check = f"{column} IN ({listed})"
    return f"{column} IS NULL OR {check}" if nullable else check


class Study(SQLModel, table=True):
    __tablename__ = "study"
    __table_args__ = (CheckConstraint("status IN ('active', 'closed')", name="ck_study_status"),)

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(max_length=200, unique=True)
    description: str = Field(default="", sa_type=Text)
    rubrics: str = Field(default="A,B", max_length=100)  # comma-separated rubric keys
    status: str = Field(default="active", max_length=20)
    settings: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    created_at: datetime = Field(default_factory=utcnow)

    @property
    def rubric_keys(self) -> list[str]:
        return [key for key in self.rubrics.split(",") if key]


class Reviewer(SQLModel, table=True):
    __tablename__ = "reviewer"
    __table_args__ = (
        CheckConstraint(_in("role", ROLES), name="ck_reviewer_role"),
        CheckConstraint("years_experience IS NULL OR years_experience >= 0", name="ck_reviewer_years"),
        CheckConstraint("failed_logins >= 0", name="ck_reviewer_failed_logins"),
    )

    id: int | None = Field(default=None, primary_key=True)
    username: str = Field(max_length=64, unique=True)
    display_name: str = Field(max_length=200)
    email: str | None = Field(default=None, max_length=320, unique=True)
    role: str = Field(default="reviewer", max_length=20)
    profession: str = Field(default="", max_length=200)
    country: str = Field(default="", max_length=100)
    years_experience: int | None = None
    languages: str = Field(default="en", max_length=100)  # comma-separated ISO codes
    active: bool = True
    password_hash: str | None = Field(default=None, max_length=255)
    # Superseded by ``signin_throttle`` (which also throttles unknown usernames and client addresses);
    # kept because dropping them would rebuild this table, which every other table references.
    failed_logins: int = 0
    locked_until: datetime | None = None
    last_login_at: datetime | None = None
    # Raised by every change that must end open sessions (password, role, deactivation); a session
    # records the version it was opened under and stops working when they differ.
    session_version: int = Field(default=1, sa_column_kwargs={"server_default": "1"})
    created_by_id: int | None = Field(default=None, foreign_key="reviewer.id")
    created_at: datetime = Field(default_factory=utcnow)

    @property
    def language_set(self) -> set[str]:
        return {code for code in self.languages.split(",") if code}


class Enrollment(SQLModel, table=True):
    __tablename__ = "enrollment"
    __table_args__ = (UniqueConstraint("study_id", "reviewer_id", name="uq_enrollment"),)

    id: int | None = Field(default=None, primary_key=True)
    study_id: int = Field(foreign_key="study.id", index=True)
    reviewer_id: int = Field(foreign_key="reviewer.id", index=True)
    active: bool = True
    enrolled_at: datetime = Field(default_factory=utcnow)


class StudyLead(SQLModel, table=True):
    """A lead (or admin) who runs a study: manages its pool, assignment, enrolment and reviewers."""

    __tablename__ = "study_lead"

    study_id: int = Field(foreign_key="study.id", primary_key=True)
    reviewer_id: int = Field(foreign_key="reviewer.id", primary_key=True, index=True)
    added_at: datetime = Field(default_factory=utcnow)


class ReviewerPreference(SQLModel, table=True):
    """What one account chose last in the app, so a new browser session opens where it left off.

    ``last_study_id`` is the study the lead pages open on (migration 0010). A row of its own, not
    columns on ``reviewer``: adding a foreign-key column would rebuild ``reviewer`` on SQLite, which
    every other table references, and a study switch writes a row that no session check reads.
    Deleting a study clears the choice instead of being refused.
    """

    __tablename__ = "reviewer_preference"

    reviewer_id: int = Field(foreign_key="reviewer.id", primary_key=True)
    last_study_id: int | None = Field(default=None, foreign_key="study.id", ondelete="SET NULL")
    updated_at: datetime = Field(default_factory=utcnow)


class AuthSession(SQLModel, table=True):
    """A signed-in browser session, revocable server-side.

    The browser holds a signed token naming a random session id; only the id's SHA-256 is stored,
    so a copy of the database cannot be turned into a working cookie. A one-time nonce (also only
    its hash) lets the sign-in page hand the session to the HTTP route that sets the cookie.
    """

    __tablename__ = "auth_session"

    id: int | None = Field(default=None, primary_key=True)
    token_hash: str | None = Field(default=None, max_length=64, unique=True)
    nonce_hash: str | None = Field(default=None, max_length=64, unique=True)
    nonce_expires_at: datetime | None = None
    reviewer_id: int = Field(foreign_key="reviewer.id", index=True)
    session_version: int
    via: str = Field(default="password", max_length=20)
    client: str = Field(default="", max_length=100)
    created_at: datetime = Field(default_factory=utcnow)
    expires_at: datetime
    revoked_at: datetime | None = None


class SigninThrottle(SQLModel, table=True):
    """Failed sign-ins per username (known or not) and per client address, shared by all replicas."""

    __tablename__ = "signin_throttle"

    key: str = Field(primary_key=True, max_length=200)  # "user:<name>" or "addr:<address>"
    failures: int = 0
    window_started_at: datetime = Field(default_factory=utcnow)
    locked_until: datetime | None = None


class AppSecret(SQLModel, table=True):
    """Secrets generated once and shared by every replica (e.g. the session-signing key when none is set)."""

    __tablename__ = "app_secret"

    name: str = Field(primary_key=True, max_length=60)
    value: str = Field(max_length=200)
    created_at: datetime = Field(default_factory=utcnow)


class ImportBatch(SQLModel, table=True):
    """One imported file: what it was, its checksum, and what it changed."""

    __tablename__ = "import_batch"

    id: int | None = Field(default=None, primary_key=True)
    kind: str = Field(max_length=20)
    filename: str = Field(max_length=500)
    sha256: str = Field(max_length=64, index=True)
    n_rows: int = 0
    n_new: int = 0
    n_unchanged: int = 0
    actor: str = Field(default="", max_length=64)
    created_at: datetime = Field(default_factory=utcnow)


class Item(SQLModel, table=True):
    """A benchmark item as reviewers see it (a MedMisBench question, or a retracted-paper record)."""

    __tablename__ = "item"
    __table_args__ = (
        UniqueConstraint("subset", "external_id", name="uq_item_subset_external"),
        CheckConstraint(_in("kind", ITEM_KINDS), name="ck_item_kind"),
        CheckConstraint(_in("content_type", CONTENT_TYPE_IDS, nullable=True), name="ck_item_content_type"),
        CheckConstraint(_in("provenance", PROVENANCE_IDS, nullable=True), name="ck_item_provenance"),
    )

    id: int | None = Field(default=None, primary_key=True)
    subset: str = Field(max_length=100, index=True)
    external_id: str = Field(max_length=200)
    kind: str = Field(default="mcq", max_length=20)
    language: str = Field(default="en", max_length=10)
    question: str = Field(sa_type=Text)
    options: list[list[str]] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    gold_label: str | None = Field(default=None, max_length=8)
    content_type: str | None = Field(default=None, max_length=40)
    provenance: str | None = Field(default=None, max_length=20)
    injections: dict[str, str] | None = Field(default=None, sa_column=Column(JSON))
    target_label: str | None = Field(default=None, max_length=8)
    payload: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    content_hash: str = Field(max_length=64)
    import_batch_id: int | None = Field(default=None, foreign_key="import_batch.id")
    created_at: datetime = Field(default_factory=utcnow)

    @property
    def option_map(self) -> dict[str, str]:
        return {label: text for label, text in self.options}


class ModelResponse(SQLModel, table=True):
    __tablename__ = "model_response"
    __table_args__ = (
        UniqueConstraint("item_id", "model", "condition", name="uq_response_item_model_condition"),
        CheckConstraint(_in("auto_label", AUTO_LABELS, nullable=True), name="ck_response_auto_label"),
    )

    id: int | None = Field(default=None, primary_key=True)
    item_id: int = Field(foreign_key="item.id", index=True)
    model: str = Field(max_length=200, index=True)
    condition: str = Field(max_length=40)
    response_text: str = Field(sa_type=Text)
    reasoning: str = Field(default="", sa_type=Text)
    chosen_label: str | None = Field(default=None, max_length=8)
    auto_label: str | None = Field(default=None, max_length=10)
    target_label: str | None = Field(default=None, max_length=8)
    payload: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    content_hash: str = Field(max_length=64)
    import_batch_id: int | None = Field(default=None, foreign_key="import_batch.id")
    created_at: datetime = Field(default_factory=utcnow)


class Task(SQLModel, table=True):
    """One unit of review: an item (Rubric A) or a response (Rubric B, judge audit) in a study."""

    __tablename__ = "task"
    __table_args__ = (
        UniqueConstraint("study_id", "unit_key", name="uq_task_unit"),
        CheckConstraint("target_raters >= 1", name="ck_task_target_raters"),
        Index("ix_task_study_rubric", "study_id", "rubric"),
        Index("ix_task_pool_order", "study_id", "pool_rank", "id"),
        # The few locked tasks, read by the adjudication queue on every rerun.
        Index("ix_task_locked", "study_id", "rubric", sqlite_where=text("locked = 1"), postgresql_where=text("locked")),
    )

    id: int | None = Field(default=None, primary_key=True)
    study_id: int = Field(foreign_key="study.id")
    rubric: str = Field(max_length=40)
    item_id: int = Field(foreign_key="item.id", index=True)
    response_id: int | None = Field(default=None, foreign_key="model_response.id", index=True)
    unit_key: str = Field(max_length=100)
    pool_rank: int = 0
    target_raters: int = 1
    locked: bool = False
    locked_at: datetime | None = None
    created_at: datetime = Field(default_factory=utcnow)
    # Assignments of the task in status 'submitted', kept by a database trigger (migration 0007)
    # whatever writes them; the Progress page reads counters instead of scanning every assignment.
    submitted_count: int = Field(default=0, sa_column_kwargs={"server_default": "0"})


class Assignment(SQLModel, table=True):
    __tablename__ = "assignment"
    __table_args__ = (
        UniqueConstraint("task_id", "reviewer_id", name="uq_assignment_task_reviewer"),
        CheckConstraint(_in("status", ASSIGNMENT_STATUSES), name="ck_assignment_status"),
        CheckConstraint("slot >= 1", name="ck_assignment_slot"),
        Index(
            "uq_assignment_live_slot",
            "task_id",
            "slot",
            unique=True,
            sqlite_where=text("status <> 'withdrawn'"),
            postgresql_where=text("status <> 'withdrawn'"),
        ),
        # The reviewer's queue in the order next_assignment serves it (and, by its prefix, their counts).
        Index("ix_assignment_next", "reviewer_id", "status", "study_id", "pool_rank", "rubric", "id"),
        # Covers the progress page's aggregates (by status, task and reviewer) without table reads.
        Index("ix_assignment_progress", "study_id", "status", "task_id", "reviewer_id", "flagged"),
        # Each reviewer's first assignment in a study (the order of their pseudonyms) in one probe (0008).
        Index("ix_assignment_first", "study_id", "reviewer_id", "id"),
    )

    id: int | None = Field(default=None, primary_key=True)
    task_id: int = Field(foreign_key="task.id", index=True)
    reviewer_id: int = Field(foreign_key="reviewer.id")
    study_id: int = Field(foreign_key="study.id", index=True)
    # Copies of the task's pool rank and rubric, so the queue order is one index (ix_assignment_next).
    # A database trigger sets them from the task on every insert (whatever is passed here), and a
    # task's rank and rubric never change, so they cannot disagree with the task.
    pool_rank: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    rubric: str = Field(default="", max_length=40, sa_column_kwargs={"server_default": ""})
    slot: int = 1
    status: str = Field(default="assigned", max_length=20)
    flagged: bool = False
    note: str = Field(default="", max_length=2000)
    assigned_at: datetime = Field(default_factory=utcnow)
    started_at: datetime | None = None
    submitted_at: datetime | None = None
    withdrawn_at: datetime | None = None


class RubricLevel(SQLModel, table=True):
    """Allowed (rubric, dimension, value) triples, seeded from ``review_app.rubrics``."""

    __tablename__ = "rubric_level"

    rubric: str = Field(primary_key=True, max_length=40)
    dimension: str = Field(primary_key=True, max_length=60)
    value: int = Field(primary_key=True)
    label: str = Field(default="", max_length=100)


class Annotation(SQLModel, table=True):
    """One submitted revision of an assignment's scores (append-only)."""

    __tablename__ = "annotation"
    __table_args__ = (
        UniqueConstraint("assignment_id", "revision", name="uq_annotation_revision"),
        UniqueConstraint("assignment_id", "client_token", name="uq_annotation_token"),
        CheckConstraint("revision >= 1", name="ck_annotation_revision"),
        CheckConstraint("seconds_on_task >= 0", name="ck_annotation_seconds"),
        Index("ix_annotation_task", "task_id", "assignment_id", "revision"),
    )

    id: int | None = Field(default=None, primary_key=True)
    assignment_id: int = Field(foreign_key="assignment.id")
    task_id: int = Field(foreign_key="task.id")
    reviewer_id: int = Field(foreign_key="reviewer.id", index=True)
    rubric: str = Field(max_length=40)
    revision: int = 1
    flags: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    comment: str = Field(default="", sa_type=Text)
    seconds_on_task: float = 0.0
    client_token: str = Field(max_length=64)
    created_at: datetime = Field(default_factory=utcnow)


class AnnotationScore(SQLModel, table=True):
    __tablename__ = "annotation_score"
    __table_args__ = (
        ForeignKeyConstraint(
            ["rubric", "dimension", "value"],
            ["rubric_level.rubric", "rubric_level.dimension", "rubric_level.value"],
            name="fk_score_rubric_level",
        ),
        CheckConstraint("value BETWEEN -1 AND 2", name="ck_score_value"),
    )

    annotation_id: int = Field(foreign_key="annotation.id", primary_key=True)
    dimension: str = Field(primary_key=True, max_length=60)
    rubric: str = Field(max_length=40)
    value: int


class Draft(SQLModel, table=True):
    """Unsubmitted work on an assignment, autosaved so a reload or dropped connection loses nothing."""

    __tablename__ = "draft"

    assignment_id: int = Field(foreign_key="assignment.id", primary_key=True)
    payload: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    seconds_on_task: float = 0.0
    updated_at: datetime = Field(default_factory=utcnow)


class Adjudication(SQLModel, table=True):
    """A lead's final decision on a task; every change is a new version (optimistic locking)."""

    __tablename__ = "adjudication"
    __table_args__ = (
        UniqueConstraint("task_id", "version", name="uq_adjudication_version"),
        CheckConstraint(_in("status", ADJUDICATION_STATUSES), name="ck_adjudication_status"),
        CheckConstraint("version >= 1", name="ck_adjudication_version"),
    )

    id: int | None = Field(default=None, primary_key=True)
    task_id: int = Field(foreign_key="task.id", index=True)
    version: int = 1
    status: str = Field(max_length=20)
    final_scores: dict[str, int] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    rationale: str = Field(default="", sa_type=Text)
    adjudicator_id: int = Field(foreign_key="reviewer.id")
    created_at: datetime = Field(default_factory=utcnow)


class AuditEvent(SQLModel, table=True):
    """Append-only log: who did what, when, with the state before and after."""

    __tablename__ = "audit_event"
    __table_args__ = (Index("ix_audit_entity", "entity", "entity_id"),)

    id: int | None = Field(default=None, primary_key=True)
    at: datetime = Field(default_factory=utcnow, index=True)
    actor_id: int | None = Field(default=None, foreign_key="reviewer.id")
    action: str = Field(max_length=60)
    entity: str = Field(max_length=40)
    entity_id: str = Field(default="", max_length=100)
    study_id: int | None = Field(default=None, foreign_key="study.id")
    before: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    after: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))


class GoldTask(SQLModel, table=True):
    """A task whose expected scores are known (from a consensus or an earlier adjudication).

    It is served like any other task (nothing on the review path reads this table), and its
    annotations feed only the lead's reviewer-quality page: the study's agreement, analyses and
    exports leave them out.
    """

    __tablename__ = "gold_task"
    __table_args__ = (CheckConstraint(_in("source", GOLD_SOURCES), name="ck_gold_source"),)

    task_id: int = Field(foreign_key="task.id", primary_key=True)
    study_id: int = Field(foreign_key="study.id", index=True)
    expected_scores: dict[str, int] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    source: str = Field(max_length=20)
    source_task_id: int | None = Field(default=None, foreign_key="task.id")
    created_by: int = Field(foreign_key="reviewer.id")
    created_at: datetime = Field(default_factory=utcnow)


class ProgressCell(SQLModel, table=True):
    """A study's task counts by rubric and item subset, kept by database triggers (migration 0007).

    Written only by the triggers on ``task`` (and, through ``task.submitted_count``, on
    ``assignment``): never insert or update these rows from Python.
    """

    __tablename__ = "progress_cell"

    study_id: int = Field(foreign_key="study.id", primary_key=True)
    rubric: str = Field(primary_key=True, max_length=40)
    subset: str = Field(primary_key=True, max_length=100)
    tasks: int
    complete: int
    planned_pairs: int
    complete_pairs: int
    unstarted_pairs: int


class AssignmentTally(SQLModel, table=True):
    """A reviewer's assignments in a study by status (and how many are flagged), kept by triggers.

    Written only by the triggers on ``assignment`` (migration 0007).
    """

    __tablename__ = "assignment_tally"

    study_id: int = Field(foreign_key="study.id", primary_key=True)
    reviewer_id: int = Field(foreign_key="reviewer.id", primary_key=True)
    status: str = Field(primary_key=True, max_length=20)
    n: int
    flagged: int


class FirstSubmission(SQLModel, table=True):
    """Each assignment's first submitted annotation, for throughput and median time on task.

    Written only by a trigger on ``annotation`` (migration 0007); annotations are append-only, so
    it only grows. Its indexes answer the Progress page's per-reviewer figures without the join of
    every annotation to its assignment.
    """

    __tablename__ = "first_submission"
    __table_args__ = (
        Index("ix_first_submission_seconds", "study_id", "reviewer_id", "seconds_on_task"),
        Index("ix_first_submission_time", "study_id", "reviewer_id", "created_at"),
    )

    annotation_id: int = Field(foreign_key="annotation.id", primary_key=True)
    study_id: int = Field(foreign_key="study.id")
    reviewer_id: int = Field(foreign_key="reviewer.id")
    seconds_on_task: float
    created_at: datetime


class StudyTally(SQLModel, table=True):
    """A study's annotations and highest annotation id, kept by a trigger on ``annotation`` (0007).

    Annotations are append-only (an edit is a new row), so the pair changes with every submit and
    every edit: part of the lead pages' cache key, read in one row instead of a join per rerun.
    """

    __tablename__ = "study_tally"

    study_id: int = Field(foreign_key="study.id", primary_key=True)
    annotations: int
    last_annotation_id: int


class TaskFlag(SQLModel, table=True):
    """A reviewer's flag on a task for the study lead: what is wrong (kind), their comment, and the lead's answer.

    ``status`` is ``open`` until a lead resolves it (``resolved``) or excludes the task from the
    study (``excluded``: the task leaves every analysis and export, and is locked so nobody rates
    it further), or the reviewer takes it back (``withdrawn``). The lead's reply is shown to the
    reviewer; every change is also in the audit log.
    """

    __tablename__ = "task_flag"
    __table_args__ = (
        CheckConstraint(_in("kind", FLAG_KINDS), name="ck_task_flag_kind"),
        CheckConstraint(_in("status", FLAG_STATUSES), name="ck_task_flag_status"),
        Index("ix_task_flag_study_status", "study_id", "status"),
    )

    id: int | None = Field(default=None, primary_key=True)
    study_id: int = Field(foreign_key="study.id")
    task_id: int = Field(foreign_key="task.id", index=True)
    assignment_id: int = Field(foreign_key="assignment.id", index=True)
    reviewer_id: int = Field(foreign_key="reviewer.id")
    kind: str = Field(max_length=20)
    comment: str = Field(default="", sa_type=Text)
    status: str = Field(default="open", max_length=20)
    reply: str = Field(default="", sa_type=Text)
    resolved_by_id: int | None = Field(default=None, foreign_key="reviewer.id")
    resolved_at: datetime | None = None
    created_at: datetime = Field(default_factory=utcnow)


APPEND_ONLY_TABLES = ("annotation", "annotation_score", "audit_event", "adjudication")
