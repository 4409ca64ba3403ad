"""The seeded review database every ``review`` case of this folder runs against, on each backend."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from review_app.db.connect import dispose_engines
from tests.bad_inputs.review_support import seed
from tests.postgres_admin import migrated_template, pg_url, scratch_database


@pytest.fixture(scope="package")
def pg_template() -> Iterator[str]:
    """A migrated PostgreSQL database each case's database is copied from (the migrations run once)."""
    with migrated_template("medrev_badtpl") as name:
        yield name


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The URL of a seeded review database on each backend."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'review.db'}"
        seed(url, tmp_path / "seed")
        yield url
        dispose_engines()
        return
    with scratch_database("medrev_bad", template=request.getfixturevalue("pg_template")) as name:
        url = pg_url(name)
        try:
            seed(url, tmp_path / "seed")
            yield url
        finally:
            dispose_engines()
