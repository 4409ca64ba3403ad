"""Import or update reviewer accounts from a roster file (no passwords: they are set with ``user passwd``).

A roster obeys the account rules of ``services.accounts`` row by row: a lead's roster can create and
update reviewers of the lead's studies only, and grants no role above the importer's.
"""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path
from typing import Any, Unpack

from pydantic import ValidationError
from sqlalchemy import Engine
from sqlmodel import Session, select

from bench_core.kernel.errors import RowIssue
from bench_core.kernel.tabular import cell
from review_app.db.models import Reviewer
from review_app.services.accounts import UserProfile, change_account, create_account
from review_app.services.actors import Actor
from review_app.services.errors import Conflict, ServiceError
from review_app.services.importing.common import (
    Body,
    Importer,
    ImportOptions,
    ImportSummary,
    admit,
    importer,
    read_rows,
    refuse_faults,
    run_import,
    write_batch,
)

_ROSTER_LIMIT_FIELDS = {"years_experience": "years"}
ROSTER_COLUMNS = ("username", "display_name", "role", "email", "profession", "country", "years", "languages")
_ROSTER_FIELDS = {  # column -> profile field; a column the file leaves out leaves that field unchanged
    "display_name": "display_name",
    "role": "role",
    "email": "email",
    "profession": "profession",
    "country": "country",
    "years": "years_experience",
    "years_experience": "years_experience",
    "languages": "languages",
}
_REQUIRED = ("display_name", "role")  # present columns whose cells cannot be emptied


def _roster_fields(lowered: dict[str, Any], file: str, line: int) -> dict[str, Any] | RowIssue:
    """The profile fields a roster row sets: only its columns; an empty cell clears an optional field."""
    raw: dict[str, Any] = {}
    for column, field in _ROSTER_FIELDS.items():
        if column not in lowered:
            continue
        value = cell(lowered, column)
        if value is None and field in _REQUIRED:
            return RowIssue(file, line, column, f"missing {column} (it cannot be emptied)")
        raw[field] = value
    if raw.get("years_experience") is not None:
        try:
            raw["years_experience"] = int(float(raw["years_experience"]))
        except ValueError:
            return RowIssue(file, line, "years", f"years must be a whole number, got {raw['years_experience']!r}")
    cleared = {"profession": "", "country": "", "languages": "en"}
    raw = {k: (cleared.get(k) if v is None else v) for k, v in raw.items()}
    placeholders = {"display_name": "-", "role": "reviewer"}
    try:
        profile = UserProfile(username=cell(lowered, "username"), **(placeholders | raw))
    except ValidationError as exc:
        first = exc.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else None
        column = {"years_experience": "years"}.get(field, field)
        return RowIssue(file, line, column, first["msg"].removeprefix("Value error, "))
    return {"username": profile.username} | {k: getattr(profile, k) for k in raw}


def import_roster(engine: Engine, path: str | Path, **options: Unpack[ImportOptions]) -> ImportSummary:
    """Import or update reviewer accounts from a roster (no passwords: set them with ``user passwd``).

    Columns: username (required), display_name and role (required for new accounts), email,
    profession, country, years, languages. A column the file leaves out leaves that field of
    existing accounts unchanged; an empty cell in a present column clears the field (display_name
    and role cannot be cleared). Every row obeys the account rules for the importing user.
    """
    (summary,) = run_import(engine, plan_roster, path, (), **options)
    return summary


def plan_roster(path: Path, actor: Actor, via: str, skip: bool) -> Body:
    rows, issues = prepare_roster(path)
    return lambda session: [_write_roster(session, rows, issues, path, who=importer(session, actor, via), skip=skip)]


def prepare_roster(path: Path) -> tuple[list[tuple[str, int, dict[str, Any]]], list[RowIssue]]:
    """The roster's rows as profile fields (checked against the database's limits) and its bad rows."""
    read = read_rows(path)
    refuse_faults(read)
    issues: list[RowIssue] = list(read.issues)
    rows: list[tuple[str, int, dict[str, Any]]] = []
    seen: dict[str, int] = {}
    for file, line, raw in read.rows:
        lowered = {str(k).strip().lower(): v for k, v in raw.items()}
        if cell(lowered, "username") is None:
            issues.append(RowIssue(file, line, "username", "missing username"))
            continue
        if any(k in lowered for k in ("password", "password_hash")):
            issues.append(RowIssue(file, line, "password", "rosters must not carry passwords"))
            continue
        fields = _roster_fields(lowered, file, line)
        if not admit(fields, Reviewer, file, line, _ROSTER_LIMIT_FIELDS, issues):
            continue
        name = fields["username"]
        if name in seen:
            issues.append(RowIssue(file, line, "username", f"duplicate username (first at line {seen[name]})"))
            continue
        seen[name] = line
        rows.append((file, line, fields))
    return rows, issues


def _write_roster(
    session: Session,
    rows: list[tuple[str, int, dict[str, Any]]],
    issues: list[RowIssue],
    path: Path,
    *,
    who: Importer,
    skip: bool,
) -> ImportSummary:
    """Create or update the roster's accounts through the account rules, in the caller's transaction."""
    issues = list(issues)  # without skip, any issue rolls the whole transaction back at write_batch below
    new = updated = 0
    me = session.get(Reviewer, who.id) if who.id is not None else None
    names = [fields["username"] for _f, _l, fields in rows]
    existing = {u.username: u for u in session.exec(select(Reviewer).where(Reviewer.username.in_(names)))}
    accounts: list[Reviewer] = []
    for file, line, fields in rows:
        user = existing.get(fields["username"])
        try:
            with session.begin_nested() if skip else nullcontext():  # a skipped row leaves nothing behind
                if user is None:
                    if "display_name" not in fields:
                        issues.append(RowIssue(file, line, "display_name", "missing display_name for a new account"))
                        continue
                    user = create_account(session, me, UserProfile(**({"role": "reviewer"} | fields)))
                    new += 1
                elif change_account(session, me, user, {k: v for k, v in fields.items() if k != "username"}):
                    updated += 1
        except ServiceError as exc:
            current = user.role if user is not None else "reviewer"
            field = "role" if fields.get("role", current) != current else "username"
            if isinstance(exc, Conflict):
                field = "email" if "email" in str(exc) else "username"
            issues.append(RowIssue(file, line, field, str(exc)))
            continue
        accounts.append(user)
    skipped = write_batch(session, "roster", path, who=who, issues=issues, skip=skip, kept=len(accounts), new=new)
    return ImportSummary(
        "roster",
        str(path),
        len(accounts),
        new,
        len(accounts) - new - updated,
        updated,
        usernames=tuple(u.username for u in accounts),
        reviewers=tuple(u.username for u in accounts if u.role == "reviewer" and u.active),
        skipped=skipped,
    )


# ---------------------------------------------------------------- helpers
