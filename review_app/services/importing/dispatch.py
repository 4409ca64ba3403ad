"""One entry to every import: tell what a path holds, import it (into a study if asked), or import an upload.

``import_into_study`` is what ``medrev review import`` calls: it picks the importer by the path's kind,
and with a study name creates the study and enrols a roster's reviewers in the same transaction as the
import, so a refused study name or enrolment leaves no account or batch behind. The Import page uploads
one file (``import_upload``): the same checks and messages, naming the file as it was uploaded.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Unpack

from sqlalchemy import Engine
from sqlmodel import Session

from bench_core.kernel.errors import DatasetError, InputError, RowIssue
from bench_core.kernel.tabular import iter_rows
from review_app.services.actors import Actor
from review_app.services.errors import InvalidInput
from review_app.services.import_files import byte_problems, file_problem, source_files
from review_app.services.importing.common import ImportOptions, ImportRefused, ImportSummary, Plan, in_transaction
from review_app.services.importing.items import plan_items
from review_app.services.importing.responses import RESPONSE_ALIASES, plan_responses
from review_app.services.importing.roster import plan_roster
from review_app.services.importing.runs import plan_judge, plan_run

KINDS = ("items", "responses", "roster", "run", "judge")


def detect_kind(path: str | Path) -> str:
    """Guess what a file holds from its columns (or, for a folder, whether it is a bench run)."""
    path = Path(path)
    if path.is_dir():
        from bench_core import trojan as trojan_run
        from bench_core.medmisbench import is_run_dir

        if is_run_dir(path):
            return "run"
        if trojan_run.is_run_dir(path) or (
            (path / trojan_run.RECORDS_FILE).is_file() and (path / trojan_run.TRACES_FILE).is_file()
        ):
            return "judge"
        return "items"
    files, faults = source_files(path)
    if faults:
        raise ImportRefused(faults)
    problems = byte_problems(files[0])
    if problems:
        raise ImportRefused(problems)
    try:
        rows = iter_rows(files[0])
        for _line, row in rows:
            if isinstance(row, RowIssue):
                raise ImportRefused([row])
            keys = {str(k).strip().lower() for k in row}
            if {"username", "role"} <= keys:
                return "roster"
            if "model" in keys and keys & set(RESPONSE_ALIASES["response"]):
                return "responses"
            if {"question", "answer"} <= keys:
                return "items"
            raise ImportRefused(
                [
                    RowIssue(
                        str(files[0]),
                        _line,
                        None,
                        "cannot tell what this file holds: items need question and answer columns, responses need "
                        "model and response, a roster needs username and role (or pass --kind)",
                    )
                ]
            )
    except DatasetError as exc:
        raise ImportRefused(exc.issues) from exc
    raise ImportRefused([RowIssue(str(files[0]), None, None, "the file has no rows to import")])


@dataclass(frozen=True)
class StudyImport:
    """What ``import_into_study`` did: the imports, and whether it created the study and whom it enrolled."""

    summaries: list[ImportSummary]
    study: str | None = None
    created: bool = False  # the study was new and created by this import
    enrolled: tuple[str, ...] = ()
    note: str = ""  # what the new study reviews, for the message (e.g. "Rubric B, response review")


def import_path(
    engine: Engine, path: str | Path, *, kind: str | None = None, **options: Unpack[ImportOptions]
) -> list[ImportSummary]:
    """Import a file, a folder of subset files or a bench run directory (``kind`` detected if None)."""
    return import_into_study(engine, path, kind=kind, **options).summaries


def import_into_study(
    engine: Engine,
    path: str | Path,
    *,
    kind: str | None = None,
    study: str | None = None,
    actor: Actor,
    via: str = "cli",
    dry_run: bool = False,
    skip_bad_rows: bool = False,
) -> StudyImport:
    """``import_path``, then (with ``study``) create the study if it is new and enrol a roster's reviewers,
    all in one transaction: a refused study name or enrolment leaves no account or batch behind.
    """
    from review_app.services import assignment, studies

    path = Path(path)
    if not path.exists() and not path.is_symlink():
        raise InvalidInput(f"{path}: no such file or folder")
    kind = kind or detect_kind(path)
    if kind not in KINDS:
        raise InvalidInput(f"unknown import kind {kind!r}; expected one of {', '.join(KINDS)}")
    rubrics = {"run": ["B"], "judge": ["judge"]}.get(kind)
    if study is not None:
        study, rubrics = studies.check_new_study(study, rubrics)
    if kind in ("run", "judge") and not path.is_dir():
        raise InvalidInput(f"{path}: a {kind} import needs a run directory, not a file")
    plans: dict[str, Plan] = {
        "run": plan_run,
        "judge": lambda run_dir, by, via, _skip: plan_judge(run_dir, by, via),  # a judge audit skips no row
        "items": plan_items,
        "responses": plan_responses,
        "roster": plan_roster,
    }
    plan = plans[kind](path, actor, via, skip_bad_rows)
    outcome: dict[str, Any] = {}

    def body(session: Session) -> list[ImportSummary]:
        summaries = plan(session)
        if study is None:
            return summaries
        if studies.find_study_in(session, study) is None:
            studies.create_study_in(session, study, rubrics=rubrics, actor=actor)
            outcome["created"] = True
        names = [name for s in summaries for name in s.reviewers]  # leads and admins are never enrolled
        if names:
            outcome["enrolled"] = tuple(assignment.enrol_in(session, study, names, actor=actor))
        return summaries

    summaries = in_transaction(engine, dry_run, body)
    note = {"run": "Rubric B, response review", "judge": "judge audit"}.get(kind, "")
    return StudyImport(summaries, study, outcome.get("created", False), outcome.get("enrolled", ()), note)


# ---------------------------------------------------------------- files uploaded through the app

UPLOAD_KINDS = ("items", "responses", "roster")  # a run directory cannot be uploaded as one file


@contextmanager
def _uploaded(filename: str, data: bytes) -> Iterator[Path]:
    """The upload as a file in a private temporary folder (the readers take paths), removed afterwards
    whatever happens: uploads hold study data and must not pile up in the temp folder."""
    name = Path(filename.replace("\\", "/")).name.strip() or "upload"
    folder = Path(tempfile.mkdtemp(prefix="medrev-upload-"))
    try:
        path = folder / name
        path.write_bytes(data)
        yield path
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _as_uploaded(text: str, path: Path) -> str:
    """A message or file name with the temporary folder taken out, so it names the file as the user uploaded it."""
    return text.replace(f"{path.parent}{os.sep}", "")


def _renamed(issue: RowIssue, path: Path) -> RowIssue:
    return RowIssue(_as_uploaded(issue.file, path), issue.line, issue.field, _as_uploaded(issue.message, path))


def preview_upload(filename: str, data: bytes, *, limit: int = 20) -> list[dict[str, Any]]:
    """The first ``limit`` readable rows of an uploaded file (those before any problem; the import check names it)."""
    rows: list[dict[str, Any]] = []
    with _uploaded(filename, data) as path:
        if file_problem(path) is not None or byte_problems(path):
            return rows
        try:
            for _line, row in iter_rows(path):
                if isinstance(row, dict):
                    rows.append(dict(row))
                if len(rows) >= limit:
                    break
        except (DatasetError, InputError, OSError, UnicodeError):
            pass
    return rows


def import_upload(
    engine: Engine, filename: str, data: bytes, *, kind: str | None = None, **options: Unpack[ImportOptions]
) -> list[ImportSummary]:
    """``import_path`` for a file uploaded through the app: the same checks and messages as
    ``medrev review import``, naming the file as uploaded (``via`` is ``app`` unless said); the temporary
    copy is always removed.
    """
    options.setdefault("via", "app")
    if kind is not None and kind not in UPLOAD_KINDS:
        raise InvalidInput(f"a {kind} import needs a run directory; use `medrev review import DIRECTORY` for it")
    with _uploaded(filename, data) as path:
        try:
            summaries = import_path(engine, path, kind=kind, **options)
        except ImportRefused as exc:
            raise ImportRefused([_renamed(i, path) for i in exc.issues], hint=exc.hint) from None
        except (InvalidInput, DatasetError, InputError) as exc:
            raise InvalidInput(_as_uploaded(str(exc), path)) from None
        return [
            dataclasses.replace(s, path=path.name, skipped=tuple(_renamed(i, path) for i in s.skipped))
            for s in summaries
        ]
