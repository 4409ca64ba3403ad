"""Shared fixtures: paths to the sample data shipped beside the project."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# The terminal size the suite was started from (pytest-xdist's workers export COLUMNS=80) must not reach the
# tests: rich consoles made at import keep the COLUMNS they saw then, and a test that needs a width sets it
# for its own command.
for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)


def _shared_data() -> Path:
    for candidate in (ROOT.parent / "shared" / "data", ROOT / "tests" / "data"):
        if (candidate / "medmisbench_sample").is_dir():
            return candidate
    raise RuntimeError("sample data not found")


@pytest.fixture(scope="session")
def sample_dir() -> Path:
    """The MedMisBench sample in the released format (one file per subset)."""
    return _shared_data() / "medmisbench_sample"
