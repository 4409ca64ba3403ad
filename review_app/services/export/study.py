"""Publication export of a review study: labels, raw annotations, analysis tables, codebook, manifest.

What the export promises (docs/data-formats.md describes every file):

* **One snapshot.** Every table comes from one read transaction (``export.snapshot``), so labels, raw
  annotations and statistics describe the same moment, recorded in the manifest as ``snapshot_utc``.
* **The dashboard's numbers.** The statistics are :func:`review_app.services.study_analysis.analyse` on
  the snapshot's annotations, as on the lead pages.
* **Pseudonyms by default.** Raters appear as R01, R02, ... and adjudicators as L01, L02, ... (the
  study's stable numbering); ``real_names=True`` writes usernames. Display names, emails, password
  hashes and reviewer profiles are never read for an export (docs/security.md).
* **Safe CSV.** Formula-like text is escaped in CSV files (``export.files``).
* **All or nothing.** Files are written to a hidden temporary folder next to the destination,
  then moved into place with one rename; a failed export leaves no folder behind. The destination
  must not exist or be empty, so an export never mixes with an older one.

The tables and their column documentation are built in ``export.tables``, ``export.labels`` and
``export.analysis_tables``, their LaTeX versions in ``export.latex``, written by ``export.files``; this
module runs the export: the snapshot, the statistics alongside it, the codebook, the manifest and the zip.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import zipfile
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypedDict, Unpack

import pandas as pd
from sqlalchemy import Engine, func
from sqlmodel import select

from review_app.analysis.reviewer_quality import ReviewerQuality, reviewer_quality
from review_app.analysis.study_harm_model import StudyHarmModel
from review_app.db.engine import read_session, write_session
from review_app.db.models import Annotation, GoldTask, Reviewer, Study, Task
from review_app.services import audit, compute_workers
from review_app.services.actors import LEAD_ROLES, SYSTEM, Actor, acting_user, as_actor, require_study_lead
from review_app.services.annotations import excluded_tasks, get_study_row
from review_app.services.errors import InvalidInput
from review_app.services.export import codebook as codebooks
from review_app.services.export.analysis_tables import (
    agreement_table,
    harm_model_input_table,
    harm_model_refit,
    harm_model_table,
    rubric_a_tables,
    rubric_b_tables,
)
from review_app.services.export.files import (
    EXPORT_FORMATS,
    ExportedFile,
    Progress,
    ProgressCallback,
    exported_file,
    parse_formats,
    write_table,
    write_tables,
)
from review_app.services.export.latex import latex_tables
from review_app.services.export.snapshot import QualityInputs, read_snapshot
from review_app.services.export.tables import (
    CSV_ESCAPING_RULE,
    Table,
    iso_utc,
    raw_annotations_table,
    reviewer_quality_table,
)
from review_app.services.study_analysis import (
    DEFAULT_N_BOOT,
    AnalysisOptions,
    StudyAnalysis,
    analyse,
    check_pending,
)
from review_app.services.study_cache import CACHE

CODEBOOK_MD = "codebook.md"
CODEBOOK_JSON = "codebook.json"
MANIFEST = "manifest.json"
# Raw annotations formats the export's own process writes, after the labels; the compute worker writes
# the others while the labels are streamed (see ``_statistics_job``).
RAW_FORMATS_HERE: tuple[str, ...] = ("parquet",)


@dataclass(frozen=True)
class ExportResult:
    """What :func:`export_study` wrote: the folder, its files and the notes a lead should read."""

    study: str
    out_dir: Path
    files: tuple[ExportedFile, ...]
    notes: tuple[str, ...]
    pseudonymised: bool
    snapshot_utc: str

    def __str__(self) -> str:
        who = "pseudonymised reviewers" if self.pseudonymised else "REAL reviewer usernames"
        lines = [f"exported study {self.study!r} to {self.out_dir} ({len(self.files) + 1} files, {who})"]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


def _prepare_destination(out_dir: Path) -> Path:
    out_dir = Path(out_dir).expanduser().absolute()
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise InvalidInput(
            f"{out_dir} already exists and is not an empty folder; choose a new folder (exports are never merged "
            "into or written over an existing one)"
        )
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    return out_dir


def export_study(
    engine: Engine,
    study_name: str,
    out_dir: Path | str,
    *,
    formats: Sequence[str] | str = EXPORT_FORMATS,
    real_names: bool = False,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = 0,
    actor: Actor | Reviewer | int = SYSTEM,
    actor_id: int | None = None,
    progress: ProgressCallback | None = None,
    pending: str = "exclude",
) -> ExportResult:
    """Write the publication export of a study into ``out_dir`` (a new or empty folder).

    Files: ``raw_annotations``, ``adjudicated_labels_<rubric>`` per rubric, ``reviewer_quality`` (the
    Reviewers' quality page's table on the export's annotations and gold tasks), ``agreement``,
    ``rubric_a_summary``/``rubric_a_flags``, ``rubric_b_outcomes``/``rubric_b_strata``/
    ``rubric_b_auto_label``, ``harm_model`` and ``harm_model_input`` when the data support them, each
    in every requested format; ``latex/*.tex``; ``codebook.md`` and ``codebook.json`` (with the lme4
    call that refits the harm model); ``manifest.json``. The analysis uses the study's saved analysis
    options (references, tie rule, unrated items, penalty), as the analysis page does.

    Only a lead of the study or an admin may export it (``actor``; the command line is
    ``SYSTEM``; ``actor_id=`` is the older spelling). Tasks still pending (``PENDING_RULE``) are left
    out unless ``pending="include"`` (docs/data-formats.md, "Which tasks"); either way
    the manifest says how many there are and whether they were left out (``pending`` and
    ``counts.pending_tasks``). Tasks a lead excluded on the Flags page are never exported
    (``counts.excluded_tasks``).
    """
    formats = parse_formats(formats)
    check_pending(pending)
    acting = as_actor(actor_id if actor_id is not None else actor)
    lead_id = check_exporter(engine, study_name, acting)
    destination = _prepare_destination(Path(out_dir))
    report = Progress(progress)
    report(0.0, "Reading the study")
    compute_workers.prestart(engine, (__name__,))  # none yet: its start overlaps the snapshot's read
    work = Path(tempfile.mkdtemp(prefix=f".{destination.name}.", suffix=".partial", dir=destination.parent))
    # The statistics run while the labels tables are streamed: same inputs, same numbers. They run in a
    # compute worker process (see ``_statistics_job``), waited on by a thread of this one.
    statistics = ThreadPoolExecutor(max_workers=1, thread_name_prefix="medrev-export-analysis")

    in_worker = tuple(fmt for fmt in formats if fmt not in RAW_FORMATS_HERE)

    def start_analysis(
        frame: pd.DataFrame, study: Study, model: str | None, quality: QualityInputs
    ) -> Future[_Statistics]:
        options = AnalysisOptions.from_settings(study.settings)
        return statistics.submit(
            compute_workers.run,
            engine,
            _statistics_job,
            frame,
            study.rubric_keys,
            study.name,
            n_boot,
            seed,
            options,
            model,
            str(work),
            in_worker,
            quality=quality,
        )

    try:
        snapshot = read_snapshot(
            engine,
            study_name,
            not real_names,
            work,
            formats,
            report.span(0.0, 0.45),
            pending=pending,
            start_analysis=start_analysis,
        )
        study = snapshot.study
        files: list[ExportedFile] = list(snapshot.files)

        def add(path: Path, **info: Any) -> None:
            files.append(exported_file(work, path, **info))

        report(0.45, "Computing the analysis and writing the raw annotations")
        raw, raw_files = _raw_annotations(
            snapshot.frame, study.rubric_keys, work, [f for f in formats if f not in in_worker]
        )
        computed = snapshot.analysis.result()
        analysis = replace(computed.analysis, annotations=snapshot.frame)
        files += sorted([*computed.files, *raw_files], key=lambda file: formats.index(file.format))
        tables = [*reviewer_quality_table(computed.quality), agreement_table(analysis)]
        tables += [*rubric_a_tables(analysis), *rubric_b_tables(analysis)]
        tables += [*harm_model_table(analysis), *harm_model_input_table(analysis)]
        latex = latex_tables(analysis)
        writing = report.span(0.85, 0.95)
        total = max(sum(table.rows for table in tables) * len(formats), 1)
        done = 0
        for table in tables:
            for fmt in formats:
                step = writing.span(done / total, (done + table.rows) / total)
                add(write_table(table, work, fmt, step), table=table.name, format=fmt, rows=table.rows)
                done += table.rows
        tables = [*snapshot.labels, raw, *tables]
        report(0.95, "Writing the codebook and manifest")
        if latex:
            (work / "latex").mkdir()
            for name, source in sorted(latex.items()):
                path = work / "latex" / name
                path.write_text(source, encoding="utf-8")
                add(path, format="latex")
        refit = harm_model_refit(analysis, "harm_model_input.csv" if "csv" in formats else "harm_model_input.<format>")
        codebook = codebooks.build(tables, formats, {f"latex/{n}": s for n, s in latex.items()}, refit)
        (work / CODEBOOK_JSON).write_text(json.dumps(codebook, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        add(work / CODEBOOK_JSON, format="json")
        (work / CODEBOOK_MD).write_text(codebooks.markdown(codebook, study.name), encoding="utf-8")
        add(work / CODEBOOK_MD, format="markdown")
        notes = [*analysis.notes]
        if snapshot.pending["tasks"]:
            notes.insert(0, pending_sentence(snapshot.pending["tasks"], excluded=pending == "exclude"))
        manifest = {
            "medrev_version": codebooks.medrev_version(),
            "snapshot_utc": snapshot.snapshot_utc,
            "study": {
                "name": study.name,
                "description": study.description,
                "rubrics": study.rubric_keys,
                "status": study.status,
                "created_at": iso_utc(study.created_at),
                "settings": study.settings,
            },
            "database": snapshot.database,
            "pseudonymised": not real_names,
            "formats": list(formats),
            "counts": snapshot.counts,
            "pending": snapshot.pending,
            "analysis": analysis.parameters,
            "harm_model": _harm_summary(analysis),
            "csv_escaping": CSV_ESCAPING_RULE,
            "notes": notes,
            "warnings": analysis.warnings(),
            "software": codebooks.software_versions(),
            "files": [file.__dict__ for file in files],
            "checksums": "sha256 of every file listed under files; manifest.json itself is not listed",
        }
        (work / MANIFEST).write_text(json.dumps(manifest, indent=2, ensure_ascii=False, default=str) + "\n")
        os.chmod(work, 0o755)
        if destination.exists():
            destination.rmdir()  # empty, checked above; rename needs the name free on every platform
        os.replace(work, destination)
    except BaseException:
        statistics.shutdown(wait=True, cancel_futures=True)
        shutil.rmtree(work, ignore_errors=True)
        raise
    statistics.shutdown()
    with write_session(engine) as session:
        audit.record(
            session,
            actor_id=lead_id,
            action="study.export",
            entity="study",
            entity_id=study.id,
            study_id=study.id,
            after={
                "formats": list(formats),
                "pseudonymised": not real_names,
                "snapshot_utc": snapshot.snapshot_utc,
                "files": len(files) + 1,
                "pending_tasks": snapshot.pending["tasks"],
                "pending_excluded": pending == "exclude",
            },
        )
    report(1.0, "Export written")
    return ExportResult(
        study=study.name,
        out_dir=destination,
        files=tuple(files),
        notes=tuple(notes),
        pseudonymised=not real_names,
        snapshot_utc=snapshot.snapshot_utc,
    )


def _raw_annotations(
    frame: pd.DataFrame, rubric_keys: list[str], work: Path, formats: list[str]
) -> tuple[Table, list[ExportedFile]]:
    """The raw annotations table written in ``formats`` here, and the table without its rows (its
    columns and types, for the codebook: the full copy is as large as the frame)."""
    table = raw_annotations_table(frame if formats else frame.iloc[:0], rubric_keys)
    files = [
        exported_file(work, write_table(table, work, fmt), table=table.name, format=fmt, rows=table.rows)
        for fmt in formats
    ]
    return replace(table, frame=table.frame.iloc[:0], n_rows=len(frame)), files


@dataclass(frozen=True, eq=False)
class _Statistics:
    """What the export's worker job gives back: the analysis, the raw annotations files it wrote
    (one per format it was given), and the reviewers' quality."""

    analysis: StudyAnalysis
    files: list[ExportedFile]
    quality: ReviewerQuality | None = None


def _statistics_job(
    _engine: Engine,
    frame: pd.DataFrame,
    rubric_keys: list[str],
    study_name: str,
    n_boot: int,
    seed: int,
    options: AnalysisOptions,
    model: str | None,
    work: str,
    formats: tuple[str, ...],
    *,
    quality: QualityInputs | None = None,
) -> _Statistics:
    """The export's statistics on ``frame``, and its raw annotations table written to ``work`` (a worker job).

    Run through ``compute_workers.run`` while the labels are streamed: the statistics and the raw
    annotations as CSV and JSONL hold the GIL, so in the export's own process they would hold up the
    labels streaming (the export's longest part); in a worker (another core) they do not. The worker gets
    the snapshot's frame itself (it must not read the database again: another moment), writes into the
    export's temporary folder (removed whole if the export fails), and sends back the analysis without
    the frame's rows, which the export's process has already. The raw Parquet file (mostly outside the
    GIL) is written by the export's process once the labels are (``RAW_FORMATS_HERE``), so that both
    processes finish about together.

    The reviewers' quality reads severity from the analysis's own harm model (the fit the
    ``harm_model`` file reports), as the Reviewers' quality page reads it from the Analysis page's.
    """
    analysis = analyse(
        frame, rubric_keys, study=study_name, n_boot=n_boot, seed=seed, options=options, first_model=model
    )
    reviewers = None
    if quality is not None:
        harm = StudyHarmModel(options.harm_spec(model), analysis.harm_input, analysis.harm_model)
        reviewers = reviewer_quality(
            frame, harm=harm, gold_annotations=quality.gold, expected=quality.expected, thresholds=quality.thresholds
        )
    folder = Path(work)
    files: list[ExportedFile] = []
    if formats:
        table = raw_annotations_table(frame, rubric_keys)
        for fmt, path in zip(formats, write_tables(table, folder, formats), strict=True):
            files.append(exported_file(folder, path, table=table.name, format=fmt, rows=table.rows))
    return _Statistics(analysis=replace(analysis, annotations=frame.iloc[:0]), files=files, quality=reviewers)


def check_exporter(engine: Engine, study_name: str, actor: Actor) -> int | None:
    """The exporting account's id (None for the system) if it leads the study or is an admin, else PermissionDenied."""
    with read_session(engine) as session:
        me = acting_user(session, actor, roles=LEAD_ROLES)
        require_study_lead(session, me, get_study_row(session, study_name))
    return me.id if me is not None else None


def pending_sentence(n: int, *, excluded: bool) -> str:
    """One sentence on the tasks still pending, for the Export page and the manifest's notes."""
    tasks = "task is" if n == 1 else "tasks are"
    what = "left out of this export" if excluded else "included with the ratings they have so far"
    return f"{n} {tasks} still pending (fewer ratings than planned); they are {what}."


def pending_tasks(engine: Engine, study_name: str, *, actor: Actor | Reviewer | int) -> int:
    """How many of the study's exportable tasks are still pending (``PENDING_RULE``), for the Export page."""
    check_exporter(engine, study_name, as_actor(actor))
    # One pass over the study's tasks and annotations, so once per data version: the Export page
    # shows it on every rerun.
    return CACHE.get(
        engine, study_name, ("pending_tasks",), lambda _v: _count_pending(engine, study_name), reads_database=True
    )


def _count_pending(engine: Engine, study_name: str) -> int:
    with read_session(engine) as session:
        study = get_study_row(session, study_name)
        rated = (
            select(Annotation.task_id, func.count(func.distinct(Annotation.assignment_id)).label("n"))
            .join(Task, Task.id == Annotation.task_id)
            .where(Task.study_id == study.id)
            .group_by(Annotation.task_id)
            .subquery()
        )
        count = session.exec(
            select(func.count())
            .select_from(Task)
            .outerjoin(rated, rated.c.task_id == Task.id)
            .where(
                Task.study_id == study.id,
                Task.rubric.in_(study.rubric_keys),
                Task.id.not_in(select(GoldTask.task_id).where(GoldTask.study_id == study.id)),
                Task.id.not_in(excluded_tasks(study.id)),
                func.coalesce(rated.c.n, 0) < Task.target_raters,
            )
        ).one()
    return int(count)


def _harm_summary(analysis: StudyAnalysis) -> dict[str, Any]:
    result = analysis.harm_model
    if result is None:
        reason = next((n for n in analysis.notes if n.startswith("harm model")), "harm model not applicable")
        return {"fitted": False, "reason": reason}
    data = result.to_dict()
    data.pop("terms")
    return {"fitted": True, **data}


@dataclass(frozen=True)
class ExportArchive:
    """An export as one zip in memory, for the Export page's download button."""

    filename: str
    data: bytes
    result: ExportResult


def export_name(study_name: str) -> str:
    """``medrev-export-<study>-<UTC time>``: the folder or zip name of an export made now."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", study_name).strip("-") or "study"
    return f"medrev-export-{slug}-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}"


class ExportOptions(TypedDict, total=False):
    """What an export holds and who makes it: the keywords of :func:`export_study` (defaults there)."""

    formats: Sequence[str] | str
    real_names: bool
    n_boot: int
    seed: int
    actor: Actor | Reviewer | int
    actor_id: int | None
    pending: str


def export_archive(
    engine: Engine, study_name: str, *, progress: ProgressCallback | None = None, **options: Unpack[ExportOptions]
) -> ExportArchive:
    """The export as one zip, for a download button (same content as :func:`export_study`).

    The files are written to a temporary folder and compressed into a temporary zip file a block at a
    time; only the finished (compressed) zip is read into memory, because the download button needs it.
    """
    name = export_name(study_name)
    report = Progress(progress)
    with tempfile.TemporaryDirectory() as tmp:
        result = export_study(engine, study_name, Path(tmp) / name, progress=report.span(0.0, 0.9), **options)
        zipped = Path(tmp) / f"{name}.zip"
        paths = [path for path in sorted(result.out_dir.rglob("*")) if path.is_file()]
        total = max(sum(path.stat().st_size for path in paths), 1)
        done = 0
        with zipfile.ZipFile(zipped, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for path in paths:
                archive.write(path, f"{name}/{path.relative_to(result.out_dir).as_posix()}")
                done += path.stat().st_size
                report.span(0.9, 1.0)(done / total, "Compressing the zip")
        data = zipped.read_bytes()
    return ExportArchive(filename=f"{name}.zip", data=data, result=result)
