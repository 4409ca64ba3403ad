"""Run directories are safe: one process at a time (an OS lock that dies with its process; a refused run
names the holder's PID, host and start time), a last line cut short by a kill repaired on resume, a damaged
middle line refused with its line.

The first run is a real ``python -m bench_core`` process against a loopback model server.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from bench_core.cli.main import app
from bench_core.kernel.rundir import LOCK_FILE
from tests.bench_core.batch.scenario import medmisbench_policy, write_medmisbench
from tests.bench_core.interrupt import ROOT, start_cli
from tests.bench_core.medmisbench.test_kill_and_resume import N_ITEMS, _args


def _scenario(fake_openai, tmp_path: Path, **server: Any) -> tuple[Path, Any, Path]:
    """The kill-and-resume items, a fake server answering them, and the run directory: (data, server, out)."""
    data = tmp_path / "MEDMISQA.jsonl"
    write_medmisbench(data, N_ITEMS)
    return data, fake_openai(medmisbench_policy, **server), tmp_path / "run"


def _wait_for(predicate, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_a_second_run_is_refused_naming_the_live_holder(fake_openai, tmp_path):
    data, server, out = _scenario(fake_openai, tmp_path, latency=0.2)
    first = start_cli(_args(server, data, out))
    try:
        _wait_for(lambda: server.request_count > 0 or first.poll() is not None)
        assert first.poll() is None, first.communicate()[1]
        pid, host, started = (out / LOCK_FILE).read_text().split()
        assert (pid, host) == (str(first.pid), socket.gethostname())
        assert dt.datetime.fromisoformat(started).tzinfo is not None
        before = (out / "runs.jsonl").read_bytes()
        second = CliRunner().invoke(app, _args(server, data, out))
        assert second.exit_code == 2
        message = " ".join(second.stderr.split())
        assert f"another run (pid {first.pid} on {host}, started {started}) holds this folder" in message
        assert "Traceback" not in second.output
        assert (out / "runs.jsonl").read_bytes() == before  # the refused run wrote nothing
        assert (out / LOCK_FILE).read_text().split()[0] == str(first.pid)  # nor touched the holder's lock
    finally:
        first.send_signal(signal.SIGKILL)
        first.communicate(timeout=30)
    assert (out / LOCK_FILE).read_text().split()[0] == str(first.pid)  # the file stays, its lock died with it
    resumed = CliRunner().invoke(app, _args(server, data, out))
    assert resumed.exit_code == 0, resumed.output
    assert not (out / LOCK_FILE).exists()  # released at the end


def test_a_run_killed_with_sigkill_is_resumed_at_once_before_it_is_reaped(fake_openai, tmp_path):
    """The lock dies with its process: a resume started within 100 ms of ``kill -9``, while the killed
    process is not yet reaped (a zombie keeps its PID, which fooled a PID-file lock), takes it and finishes."""
    data, server, out = _scenario(fake_openai, tmp_path, latency=0.05)
    first = start_cli(_args(server, data, out))
    try:
        _wait_for(lambda: server.request_count >= 8 or first.poll() is not None)
        assert first.poll() is None, first.communicate()[1]
        os.kill(first.pid, signal.SIGKILL)  # not Popen.kill/wait: nothing reaps the process yet
        killed_at = time.monotonic()
        resume = subprocess.Popen(
            [sys.executable, "-m", "bench_core", *_args(server, data, out)],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert time.monotonic() - killed_at < 0.1
        _, stderr = resume.communicate(timeout=120)
        assert _state(first.pid) in ("Z", "X", None)  # the killed run was still unreaped (or gone) meanwhile
    finally:
        if first.poll() is None:
            first.kill()
        first.communicate(timeout=30)
    assert resume.returncode == 0, stderr
    assert "holds this folder" not in stderr
    keys = {
        (json.loads(line)["key"]["item"], json.loads(line)["key"]["condition"])
        for line in (out / "results.jsonl").read_text().splitlines()
        if json.loads(line)["status"] == "ok"
    }
    assert len(keys) == N_ITEMS * 3  # every call of the run, finished by the resume
    assert not (out / LOCK_FILE).exists()


def _state(pid: int) -> str | None:
    """The kernel's state letter of ``pid`` (``Z``: a zombie), or None when no such process exists."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0].decode()
    except OSError:
        return None


def test_a_truncated_last_line_is_repaired_on_resume(fake_openai, tmp_path):
    data, server, out = _scenario(fake_openai, tmp_path)
    assert CliRunner().invoke(app, _args(server, data, out)).exit_code == 0
    calls = server.request_count
    results = out / "results.jsonl"
    lines = results.read_bytes().splitlines(keepends=True)
    cut = lines[-1][: len(lines[-1]) // 2]  # what a kill during the last write leaves
    results.write_bytes(b"".join(lines[:-1]) + cut)
    report = CliRunner().invoke(app, ["report", str(out), "--json"])
    assert report.exit_code == 0
    assert json.loads(report.stdout)["corrupt_result_lines"] == 1  # read, counted, not a broken report
    resumed = CliRunner().invoke(app, _args(server, data, out))
    assert resumed.exit_code == 0, resumed.output
    assert "cut away an incomplete last line" in resumed.stderr
    assert server.request_count == calls + 1  # only the lost call is made again
    repaired = results.read_bytes()
    assert repaired.endswith(b"\n") and len(repaired.splitlines()) == len(lines)  # the cut line replaced
    assert all(json.loads(line) for line in repaired.splitlines())
    after = json.loads(CliRunner().invoke(app, ["report", str(out), "--json"]).stdout)
    assert after["corrupt_result_lines"] == 0


def test_a_damaged_middle_line_is_refused_naming_the_line(fake_openai, tmp_path):
    data, server, out = _scenario(fake_openai, tmp_path)
    assert CliRunner().invoke(app, _args(server, data, out)).exit_code == 0
    results = out / "results.jsonl"
    lines = results.read_bytes().splitlines(keepends=True)
    lines[9] = lines[9][:30] + b"\n"
    results.write_bytes(b"".join(lines))
    damaged = results.read_bytes()
    for args in (["report", str(out), "--json"], _args(server, data, out)):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2
        assert f"{results}:10: damaged line" in result.stderr and "Traceback" not in result.output
    assert results.read_bytes() == damaged  # never silently dropped, never "repaired" by guessing
