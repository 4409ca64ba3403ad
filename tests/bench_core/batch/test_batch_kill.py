"""A ``--batch`` run killed with SIGKILL at every stage resumes by collecting its batches, never by sending
the same keys again.

The fake server stops answering at one stage (``FakeBatchServer.hold``): before the upload is stored,
after it is stored, before and after the batch is created, while it is polled, while its results are
downloaded. The test kills the real subprocess there, lets the server answer again, and runs the same
command: every request must have been put in exactly one created batch (counted on the server), and
the results must be those of an uninterrupted run.

After an upload or a create the server performed but the client never heard of, the resume finds them at
the provider: OpenAI's file by its name and the batch by its input file or ``metadata``, Gemini's job by
its display name, and Anthropic's batch (which has no metadata) by listing, confirmed by the custom_id
prefix of its results.
"""

from __future__ import annotations

import signal
import time

import pytest
from typer.testing import CliRunner

from bench_core.cli.main import app
from bench_core.kernel.batch_journal import BatchJournal
from tests.bench_core.batch.scenario import (
    N_CALLS,
    medmisbench_batch_args,
    medmisbench_policy,
    records,
    write_medmisbench,
)
from tests.bench_core.interrupt import run_cli, start_cli

STAGES = [
    ("openai", "openai.upload"),
    ("openai", "openai.upload.after"),
    ("openai", "openai.create"),
    ("openai", "openai.create.after"),
    ("openai", "openai.poll"),
    ("openai", "openai.download"),
    ("anthropic", "anthropic.create"),
    ("anthropic", "anthropic.create.after"),
    ("anthropic", "anthropic.poll"),
    ("anthropic", "anthropic.download"),
    ("google", "google.create"),
    ("google", "google.create.after"),
    ("google", "google.poll"),
]


def kill_when_held(args: list[str], server, *, timeout: float = 60) -> tuple[int, str]:
    """Run ``python -m bench_core ARGS``; SIGKILL it once the server holds a request; (return code, stderr)."""
    process = start_cli(args)
    deadline = time.monotonic() + timeout
    while not server.held.is_set() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    _, stderr = process.communicate(timeout=30)
    return process.returncode, stderr


@pytest.mark.parametrize(("provider", "stage"), STAGES, ids=[stage for _p, stage in STAGES])
def test_sigkill_at_each_stage_then_resume_submits_nothing_twice(fake_batch, tmp_path, provider, stage):
    data = write_medmisbench(tmp_path / "MEDMISQA.jsonl")
    server = fake_batch(medmisbench_policy, steps=2)
    args = medmisbench_batch_args(server, data, tmp_path / "killed", "--batch-size", "8", provider=provider)
    server.hold = stage
    returncode, stderr = kill_when_held(args, server)
    assert server.held.is_set(), f"never reached {stage}: {stderr}"
    assert returncode == -signal.SIGKILL, stderr
    journal = BatchJournal(tmp_path / "killed").state()
    assert journal.entries  # every batch was journaled before the provider saw it
    before = dict(server.submitted)

    server.hold = None
    resumed = run_cli(args)
    assert resumed.returncode == 0, resumed.stderr.decode()
    assert server.twice() == {}, f"submitted twice after a kill at {stage}"
    assert len(server.submitted) == N_CALLS
    assert all(server.submitted[key] == 1 for key in before)
    assert sorted(server.batch_sizes()) == [2, 8, 8]

    clean = tmp_path / "uninterrupted"
    server.submitted.clear()
    done = CliRunner().invoke(app, medmisbench_batch_args(server, data, clean, "--batch-size", "8", provider=provider))
    assert done.exit_code == 0, done.output
    assert records(tmp_path / "killed") == records(clean)
    assert server.request_count == 0  # no synchronous call in any of the runs
