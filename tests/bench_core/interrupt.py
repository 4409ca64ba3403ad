"""Run the bench CLI in a real subprocess and interrupt it mid-way (the kill-and-resume tests)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def default_sigint() -> None:
    """In the child before exec: SIGINT back to its default disposition.

    A shell that starts a background job (``pytest ... &``, CI runners) sets SIGINT to "ignore", children
    inherit it, and Python then installs no KeyboardInterrupt handler: the Ctrl-C tests would send a signal
    the child never sees. With the default restored, Python installs its handler as in a terminal.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_cli(args: list[str]) -> subprocess.Popen:
    """``python -m bench_core ARGS`` started in the background, SIGINT as in a terminal, stderr captured."""
    return subprocess.Popen(
        [sys.executable, "-m", "bench_core", *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        preexec_fn=default_sigint,  # resets one signal disposition; no threads are involved
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def interrupt_cli(args: list[str], server, *, after_requests: int, sig: int = signal.SIGKILL) -> tuple[int, str]:
    """Start ``python -m bench_core ARGS``, send ``sig`` once ``server`` has seen ``after_requests``
    requests (or the process ended, or 60 s passed), and return (return code, stderr)."""
    process = start_cli(args)
    deadline = time.monotonic() + 60
    while server.request_count < after_requests and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    process.send_signal(sig)
    _, stderr = process.communicate(timeout=30)
    return process.returncode, stderr


def run_cli(args: list[str]) -> subprocess.CompletedProcess:
    """``python -m bench_core ARGS`` to completion (the resume after an interruption)."""
    return subprocess.run(
        [sys.executable, "-m", "bench_core", *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
    )
