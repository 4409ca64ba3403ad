"""The runner against the loopback server: retries, Retry-After, caps, timeouts, cancellation, resume."""

from __future__ import annotations

import asyncio
import random
import time

import pytest

from bench_core.kernel.providers.base import ChatRequest
from bench_core.kernel.providers.openai_compat import OpenAICompatModel
from bench_core.kernel.runner import Job, RetryPolicy, Runner
from bench_core.kernel.store import FAILED, OK, ResultKey, ResultStore
from tests.fakes.openai_server import Reply

FAST = RetryPolicy(max_attempts=4, base_delay=0.01, max_delay=0.05, max_total=10)


def _jobs(model, n, prefix="q"):
    return [
        Job(
            key=ResultKey("test", f"{prefix}{i}", "clean", model.name, model.endpoint, "cfg"),
            model=model,
            build=lambda i=i: ChatRequest(messages=({"role": "user", "content": f"{prefix}{i}"},)),
            parse=lambda response: {"echo": response.text},
            meta={"i": i},
        )
        for i in range(n)
    ]


async def _run(server, store, n=1, *, retry=FAST, concurrency=4, timeout=5.0, retry_failed=False):
    model = OpenAICompatModel("m", server.url, api_key="k")
    try:
        runner = Runner(store, concurrency=concurrency, retry=retry, timeout=timeout, progress=False, seed=1)
        return await runner.run(_jobs(model, n), retry_failed=retry_failed)
    finally:
        await model.aclose()


def test_retry_after_is_honoured_and_the_retry_succeeds(fake_openai, tmp_path):
    script = {1: Reply(status=429, headers={"Retry-After": "0.3"}), 2: Reply(content="fine")}
    server = fake_openai(lambda r: script[r.attempt])
    store = ResultStore(tmp_path)
    summary = asyncio.run(_run(server, store))
    assert (summary.succeeded, summary.failed) == (1, 0)
    first, second = server.requests
    assert second.time - first.time >= 0.3  # waited at least what the server asked, not the 10 ms back-off
    (record,) = store.latest().values()
    assert record["attempts"] == 2 and record["errors"][0]["status"] == 429 and record["response"]["text"] == "fine"


@pytest.mark.parametrize(
    ("fault", "kind"),
    [(Reply(status=500), "http_500"), (Reply(malformed=True), "malformed"), (Reply(hang=True), "timeout")],
)
def test_retryable_faults_are_retried_up_to_the_attempt_cap(fake_openai, tmp_path, fault, kind):
    server = fake_openai(lambda r: fault, hang_seconds=1.0)
    store = ResultStore(tmp_path)
    summary = asyncio.run(_run(server, store, timeout=0.2))
    assert summary.failed == 1
    if kind == "timeout":
        # A timed-out attempt may be abandoned before its request is fully sent (a loaded machine is
        # slow to open the new connection), so the server can log fewer; never more than the cap.
        deadline = time.monotonic() + 5
        while server.request_count < FAST.max_attempts and time.monotonic() < deadline:
            time.sleep(0.02)
        assert 1 <= server.request_count <= FAST.max_attempts
    else:
        assert server.request_count == FAST.max_attempts
    (record,) = store.latest().values()
    assert record["status"] == FAILED and record["attempts"] == 4
    assert {e["kind"] for e in record["errors"]} == {kind}


def test_client_errors_are_not_retried(fake_openai, tmp_path):
    server = fake_openai(lambda r: Reply(status=400, error="bad model name"))
    store = ResultStore(tmp_path)
    asyncio.run(_run(server, store))
    assert server.request_count == 1
    (record,) = store.latest().values()
    assert "bad model name" in record["error"]["message"] and record["attempts"] == 1


def test_total_time_cap_stops_retrying(fake_openai, tmp_path):
    server = fake_openai(lambda r: Reply(status=429, headers={"Retry-After": "5"}))
    store = ResultStore(tmp_path)
    asyncio.run(_run(server, store, retry=RetryPolicy(max_attempts=10, max_total=2.0)))
    assert server.request_count == 1  # waiting 5 s would pass the 2 s total cap


def test_concurrency_cap_per_endpoint(fake_openai, tmp_path):
    server = fake_openai(lambda r: Reply(content="ok"), latency=0.05)
    summary = asyncio.run(_run(server, ResultStore(tmp_path), n=30, concurrency=3))
    assert summary.succeeded == 30
    assert server.max_in_flight == 3


def test_failures_are_skipped_on_rerun_unless_asked(fake_openai, tmp_path):
    server = fake_openai(lambda r: Reply(status=503) if r.last_user_text == "q1" else Reply(content="ok"))
    store = ResultStore(tmp_path)
    first = asyncio.run(_run(server, store, n=3, retry=RetryPolicy(max_attempts=1)))
    assert (first.succeeded, first.failed) == (2, 1)
    again = asyncio.run(_run(server, ResultStore(tmp_path), n=3))
    assert (again.already_done, again.skipped_failed, again.attempted) == (2, 1, 0)
    server.policy = lambda r: Reply(content="ok")
    retried = asyncio.run(_run(server, ResultStore(tmp_path), n=3, retry_failed=True))
    assert (retried.succeeded, retried.already_done) == (1, 2)
    assert all(r["status"] == OK for r in ResultStore(tmp_path).latest().values())


def test_cancellation_keeps_finished_records_and_resume_repeats_only_in_flight(fake_openai, tmp_path):
    server = fake_openai(lambda r: Reply(content="ok"), latency=0.02)

    async def cancel_midway():
        task = asyncio.create_task(_run(server, ResultStore(tmp_path), n=60, concurrency=4))
        while server.request_count < 20:
            await asyncio.sleep(0.005)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel_midway())
    done = len(ResultStore(tmp_path).latest())
    assert 16 <= done < 60
    sent_before = server.request_count
    summary = asyncio.run(_run(server, ResultStore(tmp_path), n=60, concurrency=4))
    assert summary.already_done == done and summary.succeeded == 60 - done
    texts = [r.last_user_text for r in server.requests]
    assert len(set(texts)) == 60
    assert len(texts) - 60 == sent_before - done <= 4  # only calls in flight at the cancel were sent again


def test_backoff_grows_exponentially_with_jitter_and_respects_retry_after():
    policy = RetryPolicy(base_delay=1.0, max_delay=8.0, jitter=0.5)
    rng = random.Random(0)
    for attempt, full in ((1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (6, 8.0)):
        delay = policy.delay(attempt, None, rng)
        assert full * 0.5 <= delay <= full
    assert policy.delay(1, 30.0, rng) == 30.0
