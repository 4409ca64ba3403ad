"""The one error path of the command line: exit codes, one message, a log file for bugs, --debug."""

from __future__ import annotations

import errno
import shutil

import pytest
import typer
from typer.testing import CliRunner

from bench_core.cli.errors import DEBUG_ENV, MedrevGroup
from bench_core.kernel.errors import DatasetError, InputError, MachineFault, RowIssue, describe, exit_code
from review_app.cli import app as medrev
from tests.conftest import ROOT

# A command group of its own, built like medrev's: each command fails the way a real command can.
demo = typer.Typer(cls=MedrevGroup)


@demo.command("bad-cell")
def bad_cell() -> None:
    raise InputError("items.jsonl", 7, "opa", expected="text", found='a list ["a", "b"]')


@demo.command("bad-rows")
def bad_rows() -> None:
    issues = [RowIssue("a.csv", line, "answer", "gold answer 'Z' is not among the options") for line in (3, 9)]
    raise DatasetError(issues)


@demo.command("denied")
def denied() -> None:
    open("/proc/1/mem", "rb").read(1)  # noqa: SIM115 - a real permission fault (or another OSError) from the OS


@demo.command("read-only")
def read_only() -> None:
    raise OSError(errno.EROFS, "Read-only file system", "/mnt/results")


@demo.command("bug")
def bug() -> None:
    {}["missing"]


@demo.command("ctrl-c")
def ctrl_c() -> None:
    raise KeyboardInterrupt


def invoke(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(demo, list(args), env=env)


def lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def test_bad_input_is_one_message_naming_file_line_field_expected_and_found():
    result = invoke("bad-cell")
    assert result.exit_code == 2
    assert lines(result.stderr) == ['error: items.jsonl:7: field \'opa\': expected text, found a list ["a", "b"]']


def test_a_refused_file_names_every_bad_row():
    result = invoke("bad-rows")
    assert result.exit_code == 2
    assert "a.csv:3" in result.stderr and "a.csv:9" in result.stderr and "Traceback" not in result.output


def test_a_fault_of_the_machine_is_one_sentence_and_exit_1():
    result = invoke("read-only")
    assert result.exit_code == 1
    assert lines(result.stderr) == ["error: cannot use /mnt/results: the file system is read-only."]
    assert invoke("denied").exit_code == 1


def test_a_bug_is_one_line_with_a_log_file_holding_the_traceback(tmp_path):
    result = invoke("bug", env={"MEDREV_LOG_DIR": str(tmp_path)})
    assert result.exit_code == 1
    (line,) = lines(result.stderr)
    assert line.startswith("error: unexpected KeyError: 'missing'; the traceback is in ") and "--debug" in line
    assert "Traceback" not in result.output
    (log,) = tmp_path.glob("medrev-error-*.log")
    assert str(log) in line
    text = log.read_text(encoding="utf-8")
    assert "Traceback (most recent call last)" in text and "KeyError: 'missing'" in text


def test_medrev_debug_shows_the_traceback(tmp_path):
    result = invoke("bug", env={DEBUG_ENV: "1", "MEDREV_LOG_DIR": str(tmp_path)})
    assert result.exit_code == 1
    assert "Traceback (most recent call last)" in result.stderr


def test_ctrl_c_exits_130_without_a_traceback():
    result = invoke("ctrl-c")
    assert result.exit_code == 130 and "Traceback" not in result.output


def test_exit_codes_of_os_errors():
    assert exit_code(FileNotFoundError(errno.ENOENT, "No such file", "x.csv")) == 2
    assert exit_code(IsADirectoryError(errno.EISDIR, "Is a directory", "x.csv")) == 2
    assert exit_code(PermissionError(errno.EACCES, "Permission denied", "x.csv")) == 1
    assert exit_code(OSError(errno.ENOSPC, "No space left on device", "x.csv")) == 1
    assert exit_code(MachineFault("database unreachable")) == 1
    assert exit_code(RuntimeError("bug")) is None
    assert describe(OSError(errno.ENOSPC, "No space left on device", "/data/x.csv")) == (
        "cannot use /data/x.csv: the disk is full."
    )


@pytest.fixture
def damaged_run(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(ROOT / "tests" / "data" / "medmisbench_old_run", run)
    results = run / "results.jsonl"
    rows = results.read_bytes().split(b"\n")
    rows[3] = rows[3][:40]
    results.write_bytes(b"\n".join(rows))
    return run


def test_medrev_refuses_a_damaged_results_line_and_debug_adds_the_traceback(damaged_run):
    plain = CliRunner().invoke(medrev, ["bench", "report", str(damaged_run), "--json"])
    assert plain.exit_code == 2
    assert lines(plain.stderr) == [lines(plain.stderr)[0]] and "results.jsonl:4: damaged line" in plain.stderr
    debug = CliRunner().invoke(medrev, ["--debug", "bench", "report", str(damaged_run), "--json"], env={DEBUG_ENV: ""})
    assert debug.exit_code == 2
    assert "Traceback (most recent call last)" in debug.stderr and "results.jsonl:4" in debug.stderr
