"""A reusable runner for corpora of bad input: each case is refused cleanly, or the test says how it was not.

A ``Case`` builds its files in a fresh folder and returns the ``medrev`` arguments; ``check(case, tmp_path)``
runs them in-process (the real ``medrev`` group, so the one error path of ``MedrevGroup`` is what is tested)
and asserts, per case:

- the exit code (2 for bad input, 1 for a fault of the machine);
- no traceback, no "unexpected ..." message (that is the catch-all for bugs), no exception escaping;
- the message names what it must (``mentions``: the file name, ``name:LINE``, a field), formatted with
  ``{work}`` = the case folder;
- the case folder is unchanged: every file's bytes and every directory the same before and after
  (a refused command writes nothing and leaves no directory behind); ``state`` adds another comparison,
  e.g. a database's row counts.

Usage (see tests/bad_inputs/test_bench_medmisbench.py)::

    from tests.bad_inputs.corpus import Case, check, parametrize, write

    CASES = [
        Case("latin1-row", lambda w: ["bench", "run", "medmisbench", "--data", write(w / "a.jsonl", b"..."), ...],
             mentions=("a.jsonl:2", "UTF-8")),
    ]

    @parametrize(CASES)
    def test_refused(case, tmp_path):
        check(case, tmp_path)
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

INPUT = 2
MACHINE = 1


@dataclass(frozen=True)
class Case:
    """One bad input: ``make(work)`` writes files under ``work`` and returns the ``medrev`` argv."""

    name: str
    make: Callable[[Path], list[str]]
    mentions: tuple[str, ...] = ()
    code: int = INPUT
    env: dict[str, str] = field(default_factory=dict)
    state: Callable[[Path], Any] | None = None  # extra "unchanged" check (e.g. database row counts)
    stdin: str | None = None
    needs: tuple[str, ...] = ()  # optional modules the command needs before it reads the input (extras)


@dataclass
class Outcome:
    exit_code: int
    stdout: str
    stderr: str
    exception: BaseException | None

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def parametrize(cases: list[Case]) -> pytest.MarkDecorator:
    """A test over ``cases`` (its argument ``case``), each run named by its case."""
    return pytest.mark.parametrize("case", cases, ids=[case.name for case in cases])


def write(path: Path, content: bytes | str | Iterable[dict[str, Any]]) -> str:
    """Write ``content`` (bytes, text, or rows written as JSON Lines) to ``path``; the path as a string."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    else:
        path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in content), encoding="utf-8")
    return str(path)


def snapshot(folder: Path) -> dict[str, str]:
    """Every entry under ``folder``: files by content hash, directories, FIFOs and links by kind."""
    found: dict[str, str] = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs:
            found[os.path.relpath(os.path.join(root, name), folder)] = "dir"
        for name in files:
            path = Path(root, name)
            rel = os.path.relpath(path, folder)
            if path.is_symlink() or not path.is_file():
                found[rel] = "special"
                continue
            try:
                found[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
            except OSError:
                found[rel] = "unreadable"
    return found


def run(argv: list[str], *, env: dict[str, str] | None = None, stdin: str | None = None) -> Outcome:
    """Run ``medrev argv`` in-process with the real root group; stdout and stderr apart."""
    from review_app.cli import app

    result = CliRunner().invoke(app, argv, env={"COLUMNS": "80", "TERM": "dumb", **(env or {})}, input=stdin)
    exception = result.exception if not isinstance(result.exception, SystemExit) else None
    return Outcome(result.exit_code, result.stdout, result.stderr, exception)


def check(case: Case, tmp_path: Path) -> Outcome:
    """Build the case, run it, and assert a clean refusal (see the module docstring); the outcome.

    A case whose command needs an optional module that is not installed is skipped: without the extra the
    command stops at that, before it reads the input under test.
    """
    for module in case.needs:
        pytest.importorskip(module, reason=f"{case.name} needs {module} (an optional extra) to reach the input")
    work = tmp_path / "work"
    work.mkdir()
    home = tmp_path / "home"
    argv = case.make(work)
    env = {
        "MEDREV_HOME": str(home),
        "MEDREV_LOG_DIR": str(tmp_path / "logs"),
        "MEDREV_DATABASE_URL": f"sqlite:///{tmp_path / 'medrev.db'}",
        **case.env,
    }
    before = snapshot(work)
    state_before = case.state(work) if case.state else None
    outcome = run(argv, env=env, stdin=case.stdin)
    text = outcome.output
    shown = f"\nargv: {argv}\n--- output ---\n{text}"
    assert outcome.exception is None, f"{case.name}: exception escaped: {outcome.exception!r}{shown}"
    assert "Traceback" not in text, f"{case.name}: traceback{shown}"
    assert "unexpected " not in text, f"{case.name}: reached the catch-all for bugs{shown}"
    assert outcome.exit_code == case.code, f"{case.name}: exit {outcome.exit_code}, expected {case.code}{shown}"
    for mention in case.mentions:
        wanted = mention.format(work=work)
        assert wanted in text, f"{case.name}: the message does not name {wanted!r}{shown}"
    assert snapshot(work) == before, f"{case.name}: the folder changed{shown}"
    if case.state is not None:
        assert case.state(work) == state_before, f"{case.name}: the state changed{shown}"
    return outcome
