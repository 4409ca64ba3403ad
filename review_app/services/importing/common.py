"""What every import shares: reading a file's rows, refusing or skipping bad rows, one transaction, the batch.

Every import is one transaction: a file with a bad row is refused whole, and the error lists
every bad row with file, line and field, so the lead fixes the file once. Re-importing the same
file changes nothing (rows are matched by their natural key and compared by content hash); a
row whose key exists with *different* content is refused rather than silently overwriting what
reviewers may already have scored.

Imports are changes like any other: they take the acting user (leads and admins import data). Each
importer ends with :func:`write_batch`: settle the bad rows (refuse, or skip them), record the import
batch, insert the new rows and write the audit entry, so the batch and audit records of every kind of
import are written one way.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Required, TypedDict, TypeGuard

from sqlalchemy import Engine, tuple_
from sqlmodel import Session, select

from bench_core.kernel.errors import DatasetError, InputError, RowIssue
from bench_core.kernel.tabular import iter_rows, tabular_files
from review_app.db.engine import write_session
from review_app.db.limits import row_problems
from review_app.db.models import ImportBatch, utcnow
from review_app.db.statistics import refresh_statistics
from review_app.services import audit
from review_app.services.actors import LEAD_ROLES, Actor, acting_user
from review_app.services.errors import InvalidInput
from review_app.services.import_files import byte_problems, nested_cells, source_files


@dataclass(frozen=True)
class Importer:
    """Who imports: the label kept on the import batch and the account id for the audit log."""

    label: str
    id: int | None


def importer(session: Session, actor: Actor, via: str) -> Importer:
    """The importing account (leads and admins only), or ``via`` (cli, app) when no account acts."""
    me = acting_user(session, actor, roles=LEAD_ROLES)
    return Importer(me.username, me.id) if me is not None else Importer(via, None)


class ImportRefused(InvalidInput):
    """A file refused whole; ``issues`` holds every problem with file, line and field."""

    def __init__(self, issues: list[RowIssue], *, limit: int = 20, hint: str = "") -> None:
        self.issues = issues
        self.hint = hint
        shown = "\n".join(f"  - {issue}" for issue in issues[:limit])
        more = f"\n  ... and {len(issues) - limit} more" if len(issues) > limit else ""
        tail = f"\n{hint}" if hint else ""
        super().__init__(f"import refused, nothing was written ({len(issues)} problem(s)):\n{shown}{more}{tail}")


SKIP_HINT = "Fix these rows, or pass --skip-bad-rows to import the other rows and skip these."


def sorted_issues(issues: Iterable[RowIssue]) -> list[RowIssue]:
    return sorted(issues, key=lambda i: (i.file, i.line or 0))


def settle(issues: list[RowIssue], *, skip: bool, kept: int) -> tuple[RowIssue, ...]:
    """Refuse the file over ``issues`` (the default), or, with ``skip``, return them as the skipped rows.

    Skipping leaves at least one good row to import; a file whose every row is bad is refused.
    """
    if not issues:
        return ()
    if not skip:
        raise ImportRefused(sorted_issues(issues), hint=SKIP_HINT if kept else "")
    if kept == 0:
        raise ImportRefused(sorted_issues(issues), hint="No row of the file can be imported.")
    return tuple(sorted_issues(issues))


@dataclass(frozen=True)
class ImportSummary:
    """What an import did."""

    kind: str
    path: str
    rows: int
    new: int
    unchanged: int
    updated: int = 0
    usernames: tuple[str, ...] = ()  # roster imports: every account in the file
    reviewers: tuple[str, ...] = ()  # roster imports: the active accounts with the reviewer role (to enrol)
    skipped: tuple[RowIssue, ...] = ()  # --skip-bad-rows: the rows left out, with why

    def __str__(self) -> str:
        extra = f", {self.updated} updated" if self.updated else ""
        skipped = f", {len(self.skipped)} bad row(s) skipped" if self.skipped else ""
        counts = f"{self.new} new, {self.unchanged} unchanged{extra}{skipped}"
        return f"{self.kind}: {self.rows} rows from {self.path}: {counts}"


@dataclass(frozen=True)
class Rows:
    """The rows of an import file as read: good rows, bad rows (skippable) and file faults (never skipped)."""

    rows: list[tuple[str, int, dict[str, Any]]]
    issues: list[RowIssue]
    fatal: list[RowIssue]


def read_rows(path: Path, *, columns: Iterable[str] | None = None) -> Rows:
    """Every row of the file (or folder of files) at ``path``, after the checks of ``import_files``.

    Rows with a list or object in one of ``columns`` (every column if None) are bad rows; a
    file that is not a readable UTF-8 text file, or holds no rows at all, is a file fault.
    """
    files, fatal = source_files(path)
    rows: list[tuple[str, int, dict[str, Any]]] = []
    issues: list[RowIssue] = []
    for file in files:
        problems = byte_problems(file)
        if problems:
            fatal += problems
            continue
        try:
            for line, row in iter_rows(file):
                if isinstance(row, RowIssue):
                    issues.append(row)
                    continue
                nested = nested_cells(row, columns)
                if nested:
                    issues += nested
                    continue
                rows.append((str(file), line, row))
        except DatasetError as exc:
            fatal += exc.issues
        except InputError as exc:
            fatal.append(exc.as_issue())
        except (OSError, UnicodeError) as exc:  # a file changed or vanished while being read
            fatal.append(RowIssue(str(file), None, None, f"cannot be read ({exc})"))
    if not fatal and not rows and not issues:
        fatal.append(RowIssue(str(path), None, None, "the file has no rows to import"))
    return Rows(rows, issues, fatal)


def refuse_faults(read: Rows) -> None:
    """File faults refuse the import whatever ``--skip-bad-rows`` says (the row problems are listed too)."""
    if read.fatal:
        raise ImportRefused(sorted_issues(read.fatal) + sorted_issues(read.issues))


def limit_issues(model, row: dict[str, Any], file: str, line: int | None, fields: dict[str, str]) -> list[RowIssue]:
    """The row's values the database cannot store (too long, NUL, out of range), named by the file's column."""
    return [
        RowIssue(file, line, fields.get(column, column), f"the value {problem}")
        for column, problem in row_problems(model, row)
    ]


def admit(
    row: dict[str, Any] | RowIssue, model, file: str, line: int | None, fields: dict[str, str], issues: list[RowIssue]
) -> TypeGuard[dict[str, Any]]:
    """Whether a prepared row can be stored; when not, why goes to ``issues``.

    ``row`` is a row of ``model`` or the problem found preparing it; a row is refused for the values the
    database cannot store too (:func:`limit_issues`), so every importer checks its rows one way.
    """
    if isinstance(row, RowIssue):
        issues.append(row)
        return False
    problems = limit_issues(model, row, file, line, fields)
    issues += problems
    return not problems


def content_hash(value: Any) -> str:
    """SHA-256 of a canonical JSON rendering: equal content, equal hash, whatever the key order."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    for file in tabular_files(path):
        digest.update(file.name.encode())
        digest.update(file.read_bytes())
    return digest.hexdigest()


Body = Callable[[Session], list[ImportSummary]]
# What an import does once its file is read and checked: path, actor, via, skip_bad_rows -> its transaction's body.
Plan = Callable[[Path, Actor, str, bool], Body]


class ImportOptions(TypedDict, total=False):
    """The keywords of every ``import_*`` function: who imports and how (defaults in :func:`run_import`).

    ``actor``: the importing account (leads and admins). ``via``: the label the import batch keeps when no
    account acts (``cli``; the Import page's uploads ``app``). ``dry_run``: everything is validated and
    counted in a transaction that is rolled back. ``skip_bad_rows``: the good rows are imported and the
    bad ones reported in the summary, instead of refusing the file.
    """

    actor: Required[Actor]
    via: str
    dry_run: bool
    skip_bad_rows: bool


def run_import(
    engine: Engine,
    plan: Plan,
    path: str | Path,
    analyze: tuple[str, ...],
    *,
    actor: Actor,
    via: str = "cli",
    dry_run: bool = False,
    skip_bad_rows: bool = False,
) -> list[ImportSummary]:
    """Read and check ``path`` (``plan``), then import it in one transaction (:func:`in_transaction`).

    The one place the :class:`ImportOptions` take their defaults, so every kind of import reads them alike.
    """
    return in_transaction(engine, dry_run, plan(Path(path), actor, via, skip_bad_rows), analyze)


def in_transaction(engine: Engine, dry_run: bool, body: Body, analyze: tuple[str, ...] = ()) -> list[ImportSummary]:
    """Run ``body`` in one write transaction: committed, or (on refusal, error or ``dry_run``) rolled back whole.

    ``analyze`` names the tables whose planner statistics are refreshed once rows were added.
    """
    with _maybe_dry(dry_run) as dry, write_session(engine) as session:
        dry.done(body(session))
    _analyze(engine, dry, *analyze)
    return dry.result


class _Rollback(Exception):
    """Raised at the end of a dry run so the write transaction rolls back."""


class _DryRun:
    def __init__(self, dry_run: bool) -> None:
        self.dry_run = dry_run
        self.result = None

    def done(self, summary) -> None:
        """Record the summary; on a dry run, abort the enclosing write transaction."""
        self.result = summary
        if self.dry_run:
            raise _Rollback


@contextmanager
def _maybe_dry(dry_run: bool) -> Iterator[_DryRun]:
    """Outside the write transaction: swallows the dry run's deliberate rollback."""
    holder = _DryRun(dry_run)
    with suppress(_Rollback):
        yield holder


def existing_hashes(session: Session, model, columns: tuple, keys: list[tuple]) -> dict[tuple, str]:
    """Content hashes of rows whose natural key is among ``keys``, looked up in chunks."""
    found: dict[tuple, str] = {}
    unique = sorted(set(keys))
    for start in range(0, len(unique), 400):
        chunk = unique[start : start + 400]
        query = select(*columns, model.content_hash).where(tuple_(*columns).in_(chunk))
        for row in session.exec(query):
            found[tuple(row[:-1])] = row[-1]
    return found


def _batch(session: Session, kind: str, path: Path, rows: int, new: int, actor: str) -> ImportBatch:
    batch = ImportBatch(
        kind=kind,
        filename=_clip_left(str(path), ImportBatch.__table__.c.filename.type.length),
        sha256=file_sha256(path),
        n_rows=rows,
        n_new=new,
        n_unchanged=rows - new,
        actor=actor,
    )
    session.add(batch)
    session.flush()
    return batch


def _clip_left(text: str, length: int) -> str:
    """A long path kept by its end (the file name), so it fits its column on every database."""
    return text if len(text) <= length else "..." + text[-(length - 3) :]


def _analyze(engine: Engine, dry: _DryRun, *tables: str) -> None:
    """Refresh PostgreSQL's statistics on ``tables`` after an import that added rows (not after a dry run)."""
    result = dry.result
    summaries = result if isinstance(result, list) else [result] if result is not None else []
    if not dry.dry_run and any(s.new for s in summaries):
        refresh_statistics(engine, tables)


def _bulk_insert(session: Session, model, rows: Iterable[dict[str, Any]], batch_id: int | None) -> None:
    now = utcnow()
    payload = [row | {"import_batch_id": batch_id, "created_at": now} for row in rows]
    for start in range(0, len(payload), 1000):
        session.execute(model.__table__.insert(), payload[start : start + 1000])


def write_batch(
    session: Session,
    kind: str,
    path: Path,
    *,
    who: Importer,
    issues: list[RowIssue],
    skip: bool,
    kept: int,
    new: int,
    model: Any = None,
    new_rows: Iterable[dict[str, Any]] = (),
) -> tuple[RowIssue, ...]:
    """The end of every import: settle ``issues``, record the batch, insert ``new_rows`` into ``model`` and audit.

    ``kept`` rows of the file are in the database afterwards, ``new`` of them added by this import.
    Without ``model`` (a roster, whose accounts are written and audited one by one through the account
    rules) only the batch is recorded. Returns the skipped rows (see :func:`settle`).
    """
    skipped = settle(issues, skip=skip, kept=kept)
    batch = _batch(session, kind, path, kept, new, who.label)
    if model is not None:
        _bulk_insert(session, model, new_rows, batch.id)
        audit.record(
            session,
            actor_id=who.id,
            action=f"import.{kind}",
            entity="import_batch",
            entity_id=batch.id,
            after={"file": str(path), "rows": kept, "new": new, "skipped": len(skipped)},
        )
    return skipped
