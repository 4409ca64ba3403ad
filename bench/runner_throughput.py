"""Runner throughput against the loopback fake server, and the same workload through inspect_ai.

Why: evaluating tens of thousands of prompts is bounded by the serving engine, not by us; the
runner should keep the server's slots full. The fake server (own process, 200 ms latency, 64
slots) gives a hard ceiling of ``min(concurrency, slots) / 0.2`` requests/s; this script prints
what the runner achieves at concurrency 1, 8, 32 and 128 as a fraction of that ceiling
(targets: >= 0.9 at 8 and 32, >= 0.85 at 128), then runs one 1,000-request workload at 64
connections through medrev and through inspect_ai (if installed) side by side.

    python bench/runner_throughput.py [--latency 0.2] [--slots 64] [--rounds 20]

inspect_ai is not a project dependency; install it for this comparison only:
    pip install inspect-ai==0.3.285
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_core.kernel.providers.base import ChatRequest, ChatResponse  # noqa: E402
from bench_core.kernel.providers.openai_compat import OpenAICompatModel  # noqa: E402
from bench_core.kernel.runner import Job, RetryPolicy, Runner  # noqa: E402
from bench_core.kernel.store import ResultKey, ResultStore  # noqa: E402
from bench_core.medmisbench.answers import extract_answer  # noqa: E402

INSPECT_PIN = "inspect-ai==0.3.285"
OPTIONS = {"A": "first", "B": "second", "C": "third", "D": "fourth"}


def start_server(latency: float, slots: int) -> tuple[subprocess.Popen[str], str]:
    """The fake server in its own process, so it does not compete with the client for the GIL."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.openai_server", "--latency", str(latency), "--slots", str(slots)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    line = process.stdout.readline() if process.stdout else ""
    if not line.startswith("PORT"):
        process.kill()
        raise SystemExit(f"fake server did not start: {line!r}")
    return process, f"http://127.0.0.1:{line.split()[1]}/v1"


def _prompt(index: int) -> str:
    options = "\n".join(f"{k}: {v}" for k, v in OPTIONS.items())
    return f"Question {index}: which option is right?\n\nOptions:\n{options}\n\nAnswer as JSON."


def _parse(response: ChatResponse) -> dict:
    answer = extract_answer(response.text, OPTIONS)
    return {"label": answer.label, "method": answer.method}


TRANSPORT = "auto"


async def medrev_run(url: str, n: int, concurrency: int, tag: str) -> float:
    """Requests/s of the medrev runner for ``n`` distinct requests (full path: SDK, parsing, store)."""
    model = OpenAICompatModel("fake-model", url, api_key="bench", connections=concurrency, transport=TRANSPORT)
    with tempfile.TemporaryDirectory() as tmp:
        store = ResultStore(Path(tmp))
        runner = Runner(store, concurrency=concurrency, retry=RetryPolicy(max_attempts=1), progress=False, timeout=60)
        jobs = [
            Job(
                key=ResultKey("throughput", f"{tag}-{i}", "clean", model.name, model.endpoint, "bench"),
                model=model,
                build=lambda i=i: ChatRequest(messages=({"role": "user", "content": _prompt(i)},), temperature=0),
                parse=_parse,
            )
            for i in range(n)
        ]
        started = time.perf_counter()
        summary = await runner.run(jobs)
        elapsed = time.perf_counter() - started
        store.close()
    await model.aclose()
    if summary.succeeded != n:
        raise SystemExit(f"medrev: only {summary.succeeded} of {n} requests succeeded")
    return n / elapsed


def inspect_run(url: str, n: int, connections: int) -> float | str:
    """Requests/s of inspect_ai on the same workload, or a message saying why it was skipped."""
    try:
        from inspect_ai import Task, eval
        from inspect_ai.dataset import Sample
        from inspect_ai.solver import generate
    except ImportError:
        return f"skipped: inspect_ai is not installed (pip install {INSPECT_PIN})"
    os.environ["FAKE_API_KEY"] = "bench"
    task = Task(dataset=[Sample(input=_prompt(i), target="A") for i in range(n)], solver=generate())
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        logs = eval(
            task,
            model="openai-api/fake/fake-model",
            model_base_url=url,
            max_connections=connections,
            max_samples=connections,
            temperature=0,
            display="none",
            log_dir=tmp,
            log_level="error",
        )
        elapsed = time.perf_counter() - started
    if logs[0].status != "success":
        return f"inspect_ai run ended with status {logs[0].status}"
    return n / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--slots", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=20, help="Requests per run = rounds x min(concurrency, slots).")
    parser.add_argument("--compare-requests", type=int, default=1000)
    parser.add_argument("--compare-connections", type=int, default=64)
    parser.add_argument("--json", action="store_true", help="Also print the figures as one JSON object.")
    parser.add_argument(
        "--transport",
        choices=("auto", "aiohttp", "httpx"),
        default="auto",
        help="HTTP transport of the openai SDK (auto: aiohttp when installed).",
    )
    args = parser.parse_args()
    global TRANSPORT
    TRANSPORT = args.transport

    process, url = start_server(args.latency, args.slots)
    figures: dict[str, object] = {"latency_s": args.latency, "slots": args.slots, "runner": {}}
    try:
        asyncio.run(medrev_run(url, 64, 16, "warmup"))
        print(f"fake server: {url}, latency {args.latency * 1000:.0f} ms, {args.slots} slots; transport {TRANSPORT}")
        print(f"{'concurrency':>11} {'requests':>8} {'req/s':>8} {'ceiling':>8} {'ratio':>6} {'target':>6}")
        for concurrency in (1, 8, 32, 128):
            busy = min(concurrency, args.slots)
            n = args.rounds * busy
            ceiling = busy / args.latency
            rate = asyncio.run(medrev_run(url, n, concurrency, f"c{concurrency}"))
            target = {1: None, 8: 0.9, 32: 0.9, 128: 0.85}[concurrency]
            ratio = rate / ceiling
            mark = "" if target is None else ("ok" if ratio >= target else "BELOW")
            print(
                f"{concurrency:>11} {n:>8} {rate:>8.1f} {ceiling:>8.1f} {ratio:>6.3f} "
                f"{'' if target is None else f'{target:.2f}':>6} {mark}"
            )
            figures["runner"][str(concurrency)] = {"requests": n, "rps": rate, "ceiling": ceiling, "ratio": ratio}

        n, connections = args.compare_requests, args.compare_connections
        ceiling = min(connections, args.slots) / args.latency
        print(f"\nsame workload: {n} requests at {connections} connections (ceiling {ceiling:.0f} req/s)")
        medrev_rate = asyncio.run(medrev_run(url, n, connections, "compare"))
        inspect_rate = inspect_run(url, n, connections)
        print(
            f"{'medrev':>12}: {medrev_rate:8.1f} req/s  ({n / medrev_rate:5.2f} s, ratio {medrev_rate / ceiling:.3f})"
        )
        if isinstance(inspect_rate, float):
            print(
                f"{'inspect_ai':>12}: {inspect_rate:8.1f} req/s  ({n / inspect_rate:5.2f} s, "
                f"ratio {inspect_rate / ceiling:.3f}); medrev is {medrev_rate / inspect_rate:.2f}x"
            )
        else:
            print(f"{'inspect_ai':>12}: {inspect_rate}")
        figures["compare"] = {
            "requests": n,
            "connections": connections,
            "medrev_rps": medrev_rate,
            "inspect_rps": inspect_rate,
        }
        if args.json:
            print(json.dumps(figures))
    finally:
        process.kill()
        process.wait()


if __name__ == "__main__":
    main()
