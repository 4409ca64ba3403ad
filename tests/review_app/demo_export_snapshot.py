"""The demo study's exports, normalised, as a fixture that pins every number and byte medrev writes.

``python -m tests.review_app.demo_export_snapshot`` seeds the demo into a new SQLite file, runs
``medrev review export`` on both demo studies (pending tasks left out, and included), and compares
the normalised files with ``tests/data/demo_export/`` (``--write`` rewrites that fixture instead);
``test_demo_export_snapshot.py`` runs the comparison in the test suite.

Normalising removes only what legitimately changes between two runs of the same code on another
machine or stack: timestamps (submission times, the snapshot time), the versions of the software and of
the database schema, and the Parquet files' bytes (their footer names the writing library). A Parquet
file is kept as its schema, its row count and whether its rows hold the same values as the JSONL file
of the same table.

The comparison (:func:`differences`) asks every byte that is not part of a number to be the same,
whole numbers to be the same, and other numbers to agree to 1e-9 (relative): fitted models and
confidence limits move in their last digits with the numerical libraries (a BLAS, an optimiser's
floating-point path, scipy's Student-t quantile, which scipy 1.12 computed with errors up to 8e-9
relative), never by more.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
from datetime import UTC
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "data" / "demo_export"

# (folder name, study, extra export options)
EXPORTS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("review", "Demo: MedMisBench clinician review", ()),
    ("review_with_pending", "Demo: MedMisBench clinician review", ("--include-pending",)),
    ("judge", "Demo: retracted-paper judge audit", ()),
)

_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?")


def _run(args: list[str], env: dict[str, str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "review_app", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900
    )
    if done.returncode != 0:
        raise RuntimeError(f"medrev {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")


def _plain(value: object) -> object:
    """A cell as JSON holds it: missing as None, times as ISO 8601 UTC text."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if hasattr(value, "isoformat"):
        text = value.astimezone(UTC).isoformat() if getattr(value, "tzinfo", None) else value.isoformat()
        return text.replace("+00:00", "Z")
    return value


def _parquet_text(path: Path) -> str:
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    schema = [f"{field.name}: {field.type}" for field in table.schema]
    rows = [{k: _plain(v) for k, v in row.items()} for row in table.to_pylist()]
    jsonl = path.with_suffix(".jsonl")
    if jsonl.exists():
        lines = jsonl.read_text(encoding="utf-8").splitlines()
        written = [{k: _plain(v) for k, v in json.loads(line).items()} for line in lines]
        same = "the same values as " + jsonl.name if rows == written else "values that differ from " + jsonl.name
    else:
        same = "no JSONL file to compare with"
    return json.dumps({"schema": schema, "rows": len(rows), "rows_hold": same}, indent=1) + "\n"


def _manifest_text(path: Path) -> str:
    manifest = json.loads(path.read_text(encoding="utf-8"))
    manifest.pop("snapshot_utc", None)
    manifest.pop("software", None)
    manifest.pop("checksums", None)
    manifest.get("database", {}).pop("schema_revision", None)  # the database schema's version
    for entry in manifest.get("files", []):
        for key in ("sha256", "bytes", "size", "size_bytes"):
            entry.pop(key, None)
    return _TIMESTAMP.sub("<time>", json.dumps(manifest, indent=1, sort_keys=True, ensure_ascii=False)) + "\n"


def normalised(folder: Path) -> dict[str, str]:
    """Every file of an export folder as normalised text, keyed by its relative path."""
    out: dict[str, str] = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        name = path.relative_to(folder).as_posix()
        if path.suffix == ".parquet":
            out[name + ".txt"] = _parquet_text(path)
        elif name == "manifest.json":
            out[name] = _manifest_text(path)
        else:
            out[name] = _TIMESTAMP.sub("<time>", path.read_text(encoding="utf-8"))
    return out


def demo_exports(work: Path) -> dict[str, str]:
    """Seed the demo in ``work`` and export it; normalised files keyed ``<export>/<file>``."""
    database = work / "demo.db"
    env = os.environ | {"MEDREV_DATABASE_URL": f"sqlite:///{database}", "MEDREV_EXPORT_DIR": str(work / "exports")}
    env.pop("MEDREV_ACTOR", None)
    _run(["demo", "--db", str(database), "--no-app"], env)
    files: dict[str, str] = {}
    for name, study, options in EXPORTS:
        out = work / name
        _run(["review", "export", "--study", study, "--out", str(out), *options], env)
        files.update({f"{name}/{key}": text for key, text in normalised(out).items()})
    return files


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


def differences(expected: str, produced: str) -> tuple[str | None, float]:
    """Compare two normalised files: the first difference that matters (or None), and the largest
    relative difference between numbers that agree to 1e-9 (see the module notes)."""
    if expected == produced:
        return None, 0.0
    if _NUMBER.sub("#", expected) != _NUMBER.sub("#", produced):
        return "the text differs beyond numbers", 0.0
    largest = 0.0
    for old, new in zip(_NUMBER.findall(expected), _NUMBER.findall(produced), strict=True):
        if old == new:
            continue
        if not any(mark in old + new for mark in ".eE"):
            return f"whole number {old} is now {new}", largest
        a, b = float(old), float(new)
        relative = abs(a - b) / max(abs(a), abs(b))
        if not math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-15):
            return f"number {old} is now {new} (relative difference {relative:.1e})", largest
        largest = max(largest, relative)
    return None, largest


def compare(files: dict[str, str]) -> tuple[list[str], float, int]:
    """Problems found against the fixture, the largest relative difference of numbers, and how many
    files are not byte-identical to it (normalised)."""
    expected = {
        p.relative_to(FIXTURE).as_posix(): p.read_text(encoding="utf-8") for p in FIXTURE.rglob("*") if p.is_file()
    }
    problems = [f"{name}: missing from the exports" for name in sorted(set(expected) - set(files))]
    problems += [f"{name}: not in the snapshot" for name in sorted(set(files) - set(expected))]
    largest, not_identical = 0.0, 0
    for name in sorted(set(expected) & set(files)):
        problem, relative = differences(expected[name], files[name])
        not_identical += expected[name] != files[name]
        largest = max(largest, relative)
        if problem:
            problems.append(f"{name}: {problem}")
    return problems, largest, not_identical


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"rewrite the fixture in {FIXTURE} instead of comparing")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        files = demo_exports(Path(work))
    if not args.write:
        problems, largest, not_identical = compare(files)
        print(
            f"{len(files)} files against {FIXTURE}: {len(problems)} problem(s); {not_identical} file(s) not "
            f"byte-identical, in numbers within 1e-9 only (largest relative difference {largest:.1e})"
        )
        print("\n".join(problems))
        raise SystemExit(1 if problems else 0)
    for old in sorted(FIXTURE.rglob("*"), reverse=True) if FIXTURE.exists() else []:
        old.unlink() if old.is_file() else old.rmdir()
    for key, text in files.items():
        target = FIXTURE / key
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    print(f"wrote {len(files)} files to {FIXTURE}")


if __name__ == "__main__":
    main()
