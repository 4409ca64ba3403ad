"""``--batch`` from the command line: Ctrl-C once (stop waiting) and twice (cancel at the provider),
``bench batch status`` and ``bench batch cancel``, and the refusals checked before anything is written."""

from __future__ import annotations

import json
import signal
import time

import pytest
from typer.testing import CliRunner

from bench_core.cli.main import app
from bench_core.kernel.batch_journal import BatchJournal
from tests.bench_core.batch.scenario import (
    N_CALLS,
    batch_flags,
    healthcontradict_args,
    medmisbench_args,
    medmisbench_batch_args,
    medmisbench_policy,
    records,
    write_healthcontradict,
    write_medmisbench,
)
from tests.bench_core.interrupt import run_cli, start_cli

FOREVER = 10**9  # polls before a batch ends: the run waits until the test acts


def _wait_for_batches(server, process, count: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and process.poll() is None:
        if len(server.batches) == count and all(b.polls >= 1 for b in server.batches.values()):
            return
        time.sleep(0.01)
    raise AssertionError(f"the run did not submit {count} batches: {process.communicate()[1]}")


@pytest.fixture
def waiting_run(fake_batch, tmp_path):
    """A ``--batch`` run in a subprocess, its three batches submitted and polled, waiting for them to end."""
    data = write_medmisbench(tmp_path / "MEDMISQA.jsonl")
    server = fake_batch(medmisbench_policy, steps=FOREVER)
    out = tmp_path / "run"
    args = medmisbench_batch_args(server, data, out, "--batch-size", "8")
    process = start_cli(args)
    _wait_for_batches(server, process, 3)
    yield server, process, out, args
    if process.poll() is None:
        process.kill()
        process.communicate()


def test_ctrl_c_stops_waiting_and_the_rerun_collects_the_same_batches(waiting_run):
    server, process, out, args = waiting_run
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 130, stderr
    assert "3 batch(es) keep running at the provider" in stderr and f"bench batch cancel {out}" in stderr
    assert "Traceback" not in stderr and server.cancelled == []

    status = CliRunner().invoke(app, ["batch", "status", str(out), "--json"])
    assert status.exit_code == 0, status.output
    rows = json.loads(status.stdout)["batches"]
    assert [(r["phase"], r["state"], r["requests"]) for r in rows] == [("submitted", "in_progress", 8),
                                                                         ("submitted", "in_progress", 8),
                                                                         ("submitted", "in_progress", 2)]  # fmt: skip
    assert sorted(r["batch_id"] for r in rows) == sorted(server.batches)

    server.steps = 1
    resumed = run_cli(args)
    assert resumed.returncode == 0, resumed.stderr.decode()
    assert len(server.batches) == 3 and server.twice() == {}  # collected, not sent again
    assert len(records(out)) == N_CALLS
    after = json.loads(CliRunner().invoke(app, ["batch", "status", str(out), "--json", "--offline"]).stdout)
    assert {r["phase"] for r in after["batches"]} == {"collected"}
    assert after["usage"]["batch"]["requests"] == N_CALLS


def test_ctrl_c_twice_cancels_the_batches_at_the_provider(waiting_run):
    server, process, out, args = waiting_run
    process.send_signal(signal.SIGINT)
    time.sleep(0.5)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 130, stderr
    assert "were cancelled at the provider" in stderr and "Traceback" not in stderr
    assert sorted(server.cancelled) == sorted(server.batches)
    assert all(entry.cancel_requested for entry in BatchJournal(out).state().entries.values())

    server.steps = 1  # the rerun collects the cancelled batches (nothing came back) and sends their requests again
    resumed = run_cli(args)
    assert resumed.returncode == 0, resumed.stderr.decode()
    assert len(server.batches) == 6 and set(server.submitted.values()) == {2}
    assert [r["status"] for r in records(out)] == ["ok"] * N_CALLS


def test_bench_batch_cancel_stops_a_waiting_run(waiting_run):
    server, process, out, _args = waiting_run
    cancelled = CliRunner().invoke(app, ["batch", "cancel", str(out)])
    assert cancelled.exit_code == 0, cancelled.output
    assert "cancel requested" in cancelled.output
    assert sorted(server.cancelled) == sorted(server.batches)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 130, stderr
    assert "were cancelled at the provider" in stderr
    assert not (out / "results.jsonl").exists() or records(out) == []  # nothing answered, nothing recorded


def test_refusals_come_before_anything_is_written(fake_batch, tmp_path):
    server = fake_batch(medmisbench_policy)
    data = write_medmisbench(tmp_path / "MEDMISQA.jsonl")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("a document")
    bad_prices = tmp_path / "prices.toml"
    bad_prices.write_text('[models."m-openai"]\ninput = 1.0\n')
    cases = [
        ([*batch_flags("--tools", f"local:{docs}")], "--batch cannot be used with --tools"),
        ([*batch_flags("--batch-fallback", "later")], "--batch-fallback: expected one of batch, sync"),
        ([*batch_flags("--price-file", str(bad_prices))], "field 'models.m-openai.output': missing"),
        ([*batch_flags("--price-file", str(tmp_path / "none.toml"))], "no such price file"),
    ]
    for extra, message in cases:
        out = tmp_path / "out"
        result = CliRunner().invoke(app, [*medmisbench_args(server, data, out), *extra])
        assert result.exit_code == 2, result.output
        assert message in result.output
        assert not out.exists()
    hc = write_healthcontradict(tmp_path / "instances.jsonl")
    args = [*healthcontradict_args(server, hc, tmp_path / "hc"), "--batch"]
    args[args.index("--base-url") : args.index("--base-url") + 2] = ["--hf", str(docs)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and "--batch cannot be used with --hf" in result.output
    assert not server.batches and server.request_count == 0


def test_status_and_cancel_of_a_directory_without_batches(tmp_path):
    result = CliRunner().invoke(app, ["batch", "status", str(tmp_path)])
    assert result.exit_code == 2 and "no batches here" in result.output
    result = CliRunner().invoke(app, ["batch", "cancel", str(tmp_path / "missing")])
    assert result.exit_code == 2 and "no such run directory" in result.output


def test_the_plan_the_progress_and_the_cost_are_shown(fake_batch, tmp_path):
    data = write_medmisbench(tmp_path / "MEDMISQA.jsonl")
    server = fake_batch(medmisbench_policy, steps=3)
    prices = tmp_path / "prices.toml"
    prices.write_text('as_of = "2025-08"\n[models."m-openai"]\ninput = 2.0\noutput = 8.0\n')
    args = medmisbench_batch_args(server, data, tmp_path / "run", "--batch-size", "8")
    args.remove("--no-progress")
    result = CliRunner().invoke(app, [*args, "--price-file", str(prices)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    text = result.output
    assert "18 request(s) in 3 batch(es), about" in text and "input tokens (estimated" in text
    assert "synchronous" in text and "batch" in text and "(as of 2025-08)" in text
    assert "18/18 requests; batches: 3 submitted, 0 in progress, 3 completed; waited" in text
    assert "Usage the providers returned, and cost (USD)" in text
