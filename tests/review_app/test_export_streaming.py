"""The export streams its large tables in chunks and writes exactly what the in-memory export wrote.

The reference below is the export held in memory: every task read into one list, each labels table
built as one frame and each file written from a whole frame. The streamed export runs
with chunks of a few rows, so every table spans many chunks (and the labels many database batches).
"""

import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from review_app.analysis.layout import DEFAULT_COLUMNS as C
from review_app.analysis.layout import is_text_dtype
from review_app.rubrics import get_rubric
from review_app.services import compute_workers, export
from review_app.services.adjudication_decisions import latest_adjudications
from review_app.services.annotations import adjudicator_labels, get_study_row, load_annotations
from review_app.services.export import files as export_files
from review_app.services.export import snapshot as export_snapshot
from review_app.services.export.labels import labels_table
from review_app.services.export.tables import escape_csv_cell, iso_utc, json_value, raw_annotations_table

from .test_export import build_study


def _reference_write(frame: pd.DataFrame, path: Path, fmt: str) -> None:
    """The in-memory writer the export used before it streamed (kept here as the reference).

    Parquet: the whole frame in one piece, with the export's column types (text as ``string``; a column
    with no value at all is text, as in a streamed file whose first chunk has none).
    """
    if fmt == "parquet":
        schema = export_files.parquet_schema(frame, null_as_text=True)
        pq.write_table(pa.Table.from_pandas(frame, schema=schema, preserve_index=False), path)
        return
    text = frame.copy()
    for column in text.columns:
        if pd.api.types.is_datetime64_any_dtype(text[column]):
            text[column] = text[column].map(lambda v: None if pd.isna(v) else iso_utc(v))
    if fmt == "csv":
        for column in text.columns:
            if is_text_dtype(text[column].dtype):
                text[column] = text[column].map(escape_csv_cell)
        text.to_csv(path, index=False, lineterminator="\n")
        return
    with path.open("w", encoding="utf-8") as handle:
        for record in text.to_dict("records"):
            handle.write(json.dumps({k: json_value(v) for k, v in record.items()}, ensure_ascii=False) + "\n")


def _reference_tables(engine, study_name: str, folder: Path) -> list[str]:
    """Labels and raw annotations as the in-memory export built them, written to ``folder``."""
    with export_snapshot.snapshot_session(engine) as session:
        study = get_study_row(session, study_name)
        frame = load_annotations(session, study, pseudonymise=True)
        decisions = latest_adjudications(session, study.id)
        adjudicators = adjudicator_labels(session, study.id, pseudonymise=True)
        tables = []
        for key in study.rubric_keys:
            rubric = get_rubric(key)
            keys = (*export_snapshot.TASK_KEYS, "target_raters")
            if rubric.needs_response:
                keys = (*keys, C.model, "condition", C.auto_label)
            rows = session.execute(export_snapshot.tasks_query(study.id, rubric))
            tasks = [dict(zip(keys, row, strict=True)) for row in rows]
            tables.append(labels_table(key, tasks, frame.loc[frame[C.rubric] == key], decisions, adjudicators))
        tables.append(raw_annotations_table(frame, study.rubric_keys))
    names = []
    for table in tables:
        assert len(table.frame) > 3, table.name  # spans several chunks of the streamed export
        for fmt in export.EXPORT_FORMATS:
            _reference_write(table.frame, folder / f"{table.name}.{fmt}", fmt)
            names.append(f"{table.name}.{fmt}")
    return names


def _assert_same_file(streamed: Path, reference: Path) -> None:
    if streamed.suffix == ".parquet":  # one row group per chunk: the same values and types, other bytes
        pd.testing.assert_frame_equal(pd.read_parquet(streamed), pd.read_parquet(reference))
    else:
        assert streamed.read_bytes() == reference.read_bytes(), streamed.name


@pytest.mark.parametrize("chunk", [3, 10_000])
def test_streamed_export_is_identical_to_the_in_memory_export(engine, tmp_path, monkeypatch, chunk):
    build_study(engine, tmp_path, units=12)
    reference = tmp_path / "reference"
    reference.mkdir()
    names = _reference_tables(engine, "pub", reference)
    monkeypatch.setattr(export_files, "CHUNK_ROWS", chunk)
    seen: list[tuple[float, str]] = []
    result = export.export_study(engine, "pub", tmp_path / "out", n_boot=20, progress=lambda f, t: seen.append((f, t)))
    for name in names:
        _assert_same_file(result.out_dir / name, reference / name)
    manifest = json.loads((result.out_dir / "manifest.json").read_text())
    rows = {f["path"]: f["rows"] for f in manifest["files"]}
    for name in names:
        assert rows[name] == len(pd.read_parquet(reference / (name.rsplit(".", 1)[0] + ".parquet")))
    fractions = [f for f, _t in seen]
    assert fractions == sorted(fractions) and fractions[0] == 0.0 and fractions[-1] == 1.0
    assert any("labels" in t.lower() for _f, t in seen)


def test_streamed_and_single_chunk_exports_match_file_for_file(engine, tmp_path, monkeypatch):
    """Everything but the manifest's snapshot time (and Parquet's row groups) is the same for any chunk size."""
    build_study(engine, tmp_path, units=12)
    outputs = {}
    for chunk in (4, 1_000_000):
        monkeypatch.setattr(export_files, "CHUNK_ROWS", chunk)
        archive = export.export_archive(engine, "pub", n_boot=20)
        folder = tmp_path / f"chunk{chunk}"
        with zipfile.ZipFile(io.BytesIO(archive.data)) as handle:
            handle.extractall(folder)
        (outputs[chunk],) = list(folder.iterdir())
    small, whole = outputs[4], outputs[1_000_000]
    files = sorted(p.relative_to(small).as_posix() for p in small.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(whole).as_posix() for p in whole.rglob("*") if p.is_file())
    for name in files:
        if name == "manifest.json":
            continue
        _assert_same_file(small / name, whole / name)
    manifests = [json.loads((folder / "manifest.json").read_text()) for folder in (small, whole)]
    for manifest in manifests:
        manifest.pop("snapshot_utc")
        manifest["files"] = [f | {"sha256": "", "bytes": 0} for f in manifest["files"] if f["format"] == "parquet"] + [
            f for f in manifest["files"] if f["format"] != "parquet"
        ]
    assert manifests[0] == manifests[1]


def test_table_file_writes_what_the_in_memory_writer_wrote_for_awkward_values(tmp_path):
    """Cells formatted a column at a time (each distinct value once) are the bytes of ``to_csv`` and of
    ``json.dumps`` per row: formula-like text, quotes, commas, line breaks, non-ASCII text, missing
    values of every kind, non-finite floats, mixed Python objects, datetimes, and a lone column."""
    stamp = pd.Timestamp("2026-01-02 03:04:05.678901", tz="UTC")
    frame = pd.DataFrame(
        {
            "text": ["=SUM(A1)", "-1", 'say "hi", then\nleave', "µg/dl – ok", None, "+2.5", "@x", "\tcell", "plain"],
            "score": pd.array([0, 1, None, 2, -1, None, 2, 0, 1], dtype="Int64"),
            "ratio": [0.1, float("nan"), 1e-7, 2.0, float("inf"), 1 / 3, -0.0, 12345678.9, 1e16],
            "flag": [True, False, True, True, False, False, True, False, True],
            "mixed": [1, "a", None, 2.5, True, float("nan"), "=b", [1, 2], "x"],
            "at": [stamp, pd.NaT, stamp, stamp, pd.NaT, stamp, stamp, stamp, stamp],
            "empty": [None] * 9,
            "rank": np.arange(9, dtype=np.int64) * 1_000_000_007,
            "id": pd.array([10**9, None, 3 * 10**9, 4, 5, None, 7 * 10**9, 8, 9], dtype="Int64"),
        }
    )
    frame["at"] = pd.to_datetime(frame["at"], utc=True)
    for name, table in {"wide": frame, "lone": frame[["text"]]}.items():
        references = {}
        for fmt in ("csv", "jsonl"):
            reference = references[fmt] = tmp_path / f"reference-{name}.{fmt}"
            _reference_write(table, reference, fmt)
            for chunk in (1, 4, len(table)):
                folder = tmp_path / f"{name}-{fmt}-{chunk}"
                folder.mkdir()
                out = export_files.TableFile(folder, "table", fmt)
                for start in range(0, len(table), chunk):
                    out.write(table.iloc[start : start + chunk])
                path = out.close(empty=table.iloc[:0])
                assert path.read_bytes() == reference.read_bytes(), (name, fmt, chunk)
        for chunk in (1, 4, len(table)):  # both formats from each chunk at once: the same bytes
            folder = tmp_path / f"{name}-both-{chunk}"
            folder.mkdir()
            outputs = [export_files.TableFile(folder, "table", fmt) for fmt in ("csv", "jsonl")]
            for start in range(0, len(table), chunk):
                export_files.write_chunk(outputs, table.iloc[start : start + chunk])
            for out in outputs:
                path = out.close(empty=table.iloc[:0])
                assert path.read_bytes() == references[out.fmt].read_bytes(), (name, out.fmt, chunk)


def test_table_file_writes_one_header_when_the_first_chunk_is_empty(tmp_path):
    frame = pd.DataFrame({"a": pd.array([1, 2], dtype="Int64"), "b": ["x", "y"]})
    out = export_files.TableFile(tmp_path, "table", "csv")
    out.write(frame.iloc[:0])
    out.write(frame)
    assert out.close(empty=frame.iloc[:0]).read_text() == "a,b\n1,x\n2,y\n"


def test_table_file_rows_sharing_most_cells_are_the_in_memory_writer_s_bytes(tmp_path):
    """Rows that share most of their cells (a labels table's unrated tasks): their bytes are those of the
    in-memory writer, with '%' in shared and varying text, formula-like and quoted ids among ids that
    need neither, wide and narrow whole numbers, and rows that are identical in every column."""
    n = 40
    rated = np.arange(n) % 5 == 0
    frame = pd.DataFrame(
        {
            "task_id": np.arange(n, dtype=np.int64) * 1_000_003,
            "unit_key": [f"B:r{i}" if i % 13 else f"=r{i}%s" for i in range(n)],
            "note": ["100% sure, really" if i % 7 else 'say "%d"' for i in range(n)],
            "n_ratings": pd.array(np.where(rated, 2, 0), dtype="Int64"),
            "score_1": pd.array([1 if r else None for r in rated], dtype="Int64"),
            "rater_1": ["R01" if r else None for r in rated],
            "status": ["agreed" if r else "unrated" for r in rated],
            "stale": np.zeros(n, dtype=bool),
            "ratio": [0.5 if r else float("nan") for r in rated],
        }
    )
    same = frame.iloc[[3] * 12].reset_index(drop=True)  # every column shared
    for name, table in {"mostly-shared": frame, "identical": same}.items():
        for fmt in ("csv", "jsonl"):
            reference = tmp_path / f"reference-{name}.{fmt}"
            _reference_write(table, reference, fmt)
            for chunk in (3, len(table)):
                folder = tmp_path / f"{name}-{fmt}-{chunk}"
                folder.mkdir()
                out = export_files.TableFile(folder, "table", fmt)
                for start in range(0, len(table), chunk):
                    out.write(table.iloc[start : start + chunk])
                assert out.close(empty=table.iloc[:0]).read_bytes() == reference.read_bytes(), (name, fmt, chunk)


def test_the_export_command_and_its_forked_worker_write_what_an_export_in_one_process_writes(
    engine, tmp_path, monkeypatch
):
    """``medrev review export`` as a command forks its statistics' worker from itself (it imports nothing
    again); the files are those of the export computed entirely in this process."""
    build_study(engine, tmp_path, units=12)
    url = engine.url.render_as_string(hide_password=False)
    command = tmp_path / "command"
    done = subprocess.run(
        [sys.executable, "-m", "review_app", "review", "export", "--study", "pub", "--out", str(command)],
        cwd=Path(__file__).resolve().parents[2],
        env=os.environ | {"MEDREV_DATABASE_URL": url, compute_workers.WORKERS_SETTING: "1"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    monkeypatch.setenv(compute_workers.WORKERS_SETTING, "0")
    here = export.export_study(engine, "pub", tmp_path / "here").out_dir
    files = sorted(p.relative_to(here).as_posix() for p in here.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(command).as_posix() for p in command.rglob("*") if p.is_file())
    for name in files:
        if name != "manifest.json":
            _assert_same_file(command / name, here / name)
    manifests = [json.loads((folder / "manifest.json").read_text()) for folder in (command, here)]
    for manifest in manifests:
        manifest.pop("snapshot_utc")
        manifest["files"] = [f for f in manifest["files"] if f["format"] != "parquet"]
    assert manifests[0] == manifests[1]
