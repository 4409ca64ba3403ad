"""The demo study's exports, normalised, as a fixture that pins every number and byte medrev writes.

``python -m tests.review_app.demo_export_snapshot --write`` seeds the demo into a new SQLite file, runs
``medrev review export`` on both demo studies (pending tasks left out, and included) and writes the
normalised files to ``tests/data/demo_export/``; ``test_demo_export_snapshot.py`` does the same and
compares. Normalising removes only what legitimately changes between two runs of the same code on
another machine or stack: timestamps (submission times, the snapshot time), the versions of the
software and the Parquet files' bytes (their footer names the writing library).
A Parquet file is kept as its schema and rows, so a changed type or value still shows.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
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


def _parquet_text(path: Path) -> str:
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    schema = [f"{field.name}: {field.type}" for field in table.schema]
    rows = _TIMESTAMP.sub("<time>", json.dumps(table.to_pylist(), sort_keys=True, default=str, ensure_ascii=False))
    return json.dumps({"schema": schema, "rows_sha256": hashlib.sha256(rows.encode()).hexdigest()}, indent=1) + "\n"


def _manifest_text(path: Path) -> str:
    manifest = json.loads(path.read_text(encoding="utf-8"))
    manifest.pop("snapshot_utc", None)
    manifest.pop("software", None)
    manifest.pop("checksums", None)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"(re)write the fixture in {FIXTURE}")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        files = demo_exports(Path(work))
    if not args.write:
        print(f"{len(files)} files; pass --write to store them in {FIXTURE}")
        return
    for old in sorted(FIXTURE.rglob("*"), reverse=True) if FIXTURE.exists() else []:
        old.unlink() if old.is_file() else old.rmdir()
    for key, text in files.items():
        target = FIXTURE / key
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    print(f"wrote {len(files)} files to {FIXTURE}")


if __name__ == "__main__":
    main()
