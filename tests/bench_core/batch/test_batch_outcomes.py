"""What a batch does not return: errored and expired requests go to the next batch (or to synchronous calls),
requests refused for themselves fail at once, and batches are split by the provider's limits.

Each provider's results arrive in its own shape (OpenAI output and error files, Anthropic result types,
Gemini inline responses with a job state), so each case runs on all three through their real SDKs.
"""

from __future__ import annotations

import json

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
from tests.fakes.openai_server import Reply

PROVIDERS = ("openai", "anthropic", "google")
FLAKY, BAD, LATE = "number 1?", "number 2?", "number 3?"  # the question of syn-001 (500 once), -002 (400), -003


def _faulty(received):
    """syn-001: HTTP 500 on its first attempt; syn-002: HTTP 400 always (clean condition only)."""
    text = received.last_user_text
    clean = "Additional Clinical Context" not in text
    if clean and FLAKY in text and received.attempt == 1:
        return Reply(status=500, error="server fault")
    if clean and BAD in text:
        return Reply(status=400, error="this request is invalid")
    return medmisbench_policy(received)


def _expires(received):
    """syn-003 (clean) is not reached before its batch's window closes, the first time."""
    text = received.last_user_text
    return "Additional Clinical Context" not in text and LATE in text and received.attempt == 1


def _by_item(run_dir):
    return {(r["key"]["item"].split("/")[1], r["key"]["condition"]): r for r in records(run_dir)}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_errored_and_expired_requests_go_to_the_next_batch(fake_batch, tmp_path, provider):
    data = write_medmisbench(tmp_path / "MEDMISQA.jsonl")
    server = fake_batch(_faulty, expire=_expires, steps=1)
    out = tmp_path / "run"
    result = CliRunner().invoke(app, medmisbench_batch_args(server, data, out, provider=provider))
    assert result.exit_code == 1, result.output  # one call failed for good (HTTP 400)
    assert server.request_count == 0  # no synchronous call
    assert server.batch_sizes() == [N_CALLS, 2]  # the second batch: the 500 and the expired one
    by_item = _by_item(out)
    assert len(by_item) == N_CALLS
    flaky, bad, late = by_item["syn-001", "clean"], by_item["syn-002", "clean"], by_item["syn-003", "clean"]
    assert (flaky["status"], flaky["attempts"]) == ("ok", 2)
    assert [(e["attempt"], e["status"]) for e in flaky["errors"]] == [(1, 500)]
    assert (late["status"], late["attempts"]) == ("ok", 2)
    assert [(e["attempt"], e["kind"]) for e in late["errors"]] == [(1, "batch_expired")]
    assert (bad["status"], bad["attempts"], bad["error"]["status"]) == ("failed", 1, 400)  # not sent again
    assert "this request is invalid" in bad["error"]["message"]
    faulty = {("syn-001", "clean"), ("syn-002", "clean"), ("syn-003", "clean")}
    others = [r for k, r in by_item.items() if k not in faulty]
    assert all(r["status"] == "ok" and r["attempts"] == 1 and r["errors"] == [] for r in others)
    state = BatchJournal(out).state()
    assert all(not entry.open for entry in state.entries.values())


@pytest.mark.parametrize("provider", PROVIDERS)
def test_sync_fallback_calls_what_the_batch_did_not_return(fake_batch, tmp_path, provider):
    data = write_medmisbench(tmp_path / "MEDMISQA.jsonl")
    server = fake_batch(_faulty, expire=_expires, steps=1)
    out = tmp_path / "run"
    args = medmisbench_batch_args(server, data, out, "--batch-fallback", "sync", provider=provider)
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1, result.output
    assert server.batch_sizes() == [N_CALLS]  # one batch, then synchronous calls
    assert server.request_count == 2  # syn-001 and syn-003, clean: the 400 is not called again
    by_item = _by_item(out)
    assert by_item["syn-001", "clean"]["status"] == by_item["syn-003", "clean"]["status"] == "ok"
    assert by_item["syn-002", "clean"]["status"] == "failed"
    report = json.loads(CliRunner().invoke(app, ["report", str(out), "--json"]).stdout)
    usage = report["usage"]
    assert (usage["batch"]["requests"], usage["sync"]["requests"]) == (N_CALLS - 3, 2)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_batches_are_split_by_batch_size(fake_batch, tmp_path, provider):
    data = write_medmisbench(tmp_path / "MEDMISQA.jsonl")
    server = fake_batch(medmisbench_policy, steps=1, limits={provider: (5, 10_000_000)})
    out = tmp_path / "run"
    args = medmisbench_batch_args(server, data, out, "--batch-size", "5", provider=provider)
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert sorted(server.batch_sizes(), reverse=True) == [5, 5, 5, 3]
    assert server.refused == [] and server.twice() == {}
    assert len(records(out)) == N_CALLS


def test_a_batch_over_the_providers_limit_is_refused_and_nothing_is_paid(fake_batch, tmp_path):
    """The server's limit is lower than medrev's (no --batch-size): the create is refused (HTTP 400), the keys
    are planned again up to --max-attempts, then recorded as failed naming the refusal; no batch exists."""
    data = write_medmisbench(tmp_path / "MEDMISQA.jsonl", n=2)
    server = fake_batch(medmisbench_policy, steps=1, limits={"openai": (5, 10_000_000)})
    out = tmp_path / "run"
    args = medmisbench_batch_args(server, data, out, "--max-attempts", "2")
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1, result.output
    assert len(server.refused) == 2 and server.batches == {} and not server.submitted
    failed = records(out)
    assert len(failed) == 6 and all(r["status"] == "failed" and r["attempts"] == 2 for r in failed)
    assert all("at most 5 requests" in r["error"]["message"] for r in failed)
    assert [e["kind"] for e in failed[0]["errors"]] == ["batch_refused", "batch_refused"]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_create_whose_answer_was_lost_is_looked_up_before_it_is_sent_again(fake_batch, tmp_path, provider):
    """The server creates the batch and answers HTTP 500: the retry finds the batch instead of paying twice."""
    data = write_medmisbench(tmp_path / "MEDMISQA.jsonl")
    server = fake_batch(medmisbench_policy, steps=1)
    server.fail_after_create = {provider}
    out = tmp_path / "run"
    result = CliRunner().invoke(app, medmisbench_batch_args(server, data, out, provider=provider))
    assert result.exit_code == 0, result.output
    assert not server.fail_after_create  # the fault happened
    assert server.batch_sizes() == [N_CALLS] and server.twice() == {}
    assert "found batch" in result.output
    assert [r["status"] for r in records(out)] == ["ok"] * N_CALLS


def test_batches_are_split_by_the_byte_limit(fake_batch, tmp_path):
    """The request file of each batch stays under the byte limit (OpenAI: 200 MB a file; here 1,500 bytes)."""
    import asyncio

    from bench_core.kernel.batch_runner import BatchRunner
    from bench_core.kernel.providers import make_chat_model
    from bench_core.kernel.providers.base import ChatRequest
    from bench_core.kernel.runner import Job, Runner
    from bench_core.kernel.store import ResultKey, ResultStore

    server = fake_batch(medmisbench_policy, steps=1, limits={"openai": (50_000, 1_500)})
    model = make_chat_model("openai", "m", base_url=server.url)
    store = ResultStore(tmp_path)
    jobs = [
        Job(
            ResultKey("b", f"item-{i}", "clean", model.name, model.endpoint, "cfg"),
            model,
            lambda i=i: ChatRequest(messages=({"role": "user", "content": f"question {i}: " + "x" * 200},)),
        )
        for i in range(12)
    ]
    runner = BatchRunner(store, sync=Runner(store, progress=False), poll_interval=0.01, max_bytes=1_500)

    async def run():
        try:
            return await runner.run(jobs)
        finally:
            await model.aclose()

    summary = asyncio.run(run())
    assert summary.succeeded == 12 and server.refused == []
    sizes = [len(f["data"]) for f in server.files.values() if f["purpose"] == "batch"]
    assert len(sizes) == len(server.batches) > 1 and max(sizes) <= 1_500
    assert sum(server.batch_sizes()) == 12 and server.twice() == {}
