"""The demo study's exports are the same, file for file and byte for byte, on every supported stack.

The fixture in ``tests/data/demo_export/`` was written by ``demo_export_snapshot.py`` (see its
docstring); apart from timestamps, software versions and Parquet footers, any difference is a changed
number, label, type or layout in what a study lead publishes.
"""

from __future__ import annotations

import difflib

import pytest

from tests.review_app.demo_export_snapshot import FIXTURE, demo_exports

pytestmark = pytest.mark.slow


def test_the_demo_exports_match_the_committed_snapshot(tmp_path) -> None:
    produced = demo_exports(tmp_path)
    expected = {
        p.relative_to(FIXTURE).as_posix(): p.read_text(encoding="utf-8") for p in FIXTURE.rglob("*") if p.is_file()
    }
    assert sorted(produced) == sorted(expected), "the exports write other files than the snapshot"
    changed = [name for name in sorted(expected) if produced[name] != expected[name]]
    report = []
    for name in changed[:5]:
        diff = difflib.unified_diff(
            expected[name].splitlines(),
            produced[name].splitlines(),
            f"snapshot/{name}",
            f"now/{name}",
            lineterm="",
            n=1,
        )
        report.append("\n".join(list(diff)[:40]))
    assert not changed, f"{len(changed)} file(s) differ from the snapshot:\n" + "\n".join(report)
