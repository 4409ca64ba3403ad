"""A generation run killed with SIGKILL and resumed repeats no finished call and ends as an uninterrupted run."""

from __future__ import annotations

import json
import signal
from collections import Counter

from typer.testing import CliRunner

from bench_core.cli.main import app
from bench_core.generation.sources import load_source
from tests.bench_core.batch.scenario import write_medqa
from tests.bench_core.generation.fake_generator import FakeGenerator
from tests.bench_core.interrupt import interrupt_cli, run_cli
from tests.fakes.openai_server import request_key

CONCURRENCY = 4
N_ITEMS = 30


def _args(server, source, out):
    return ["generate", "--source", str(source), "--format", "medqa", "--model", "gen", "--base-url", server.url,
            "--out", str(out), "--concurrency", str(CONCURRENCY), "--no-progress"]  # fmt: skip


def test_sigkill_then_resume_repeats_only_in_flight_calls(fake_openai, tmp_path):
    source = tmp_path / "US_train.jsonl"
    write_medqa(source, N_ITEMS)
    items = load_source(source, "medqa").items
    server = fake_openai(FakeGenerator(items, {"US_train-7": "invalid_json_once"}), latency=0.03)
    out = tmp_path / "killed"
    returncode, stderr = interrupt_cli(
        _args(server, source, out), server, after_requests=N_ITEMS + 12, sig=signal.SIGKILL
    )
    assert returncode == -signal.SIGKILL, stderr
    stored = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines() if line.strip()]
    done_before = {request_key({"model": r["key"]["model"], "messages": r["messages"]}) for r in stored}
    stages_before = Counter(r["key"]["condition"].split("#")[0] for r in stored)
    # Killed in Stage 2: every Stage 1 call is in (one item needed a corrected second attempt).
    assert stages_before["applicability"] == N_ITEMS + 1 and 0 < stages_before["generation"] < N_ITEMS
    assert not (out / "bundles.jsonl").exists()  # outputs are written only by a completed run

    resumed = run_cli(_args(server, source, out))
    assert resumed.returncode == 0, resumed.stderr.decode()

    counts = Counter(r.key for r in server.requests)
    repeated = {key for key, n in counts.items() if n > 1}
    assert max(counts.values()) <= 2
    assert len(repeated) <= CONCURRENCY  # only the calls in flight at the kill were made again
    assert not repeated & done_before  # no finished call was made twice
    lines = (out / "results.jsonl").read_text().splitlines()
    keys = [(json.loads(line)["key"]["item"], json.loads(line)["key"]["condition"]) for line in lines if line.strip()]
    assert len(keys) == len(set(keys)) == 2 * N_ITEMS + 2  # nothing lost, nothing stored twice (+2: one retry)

    server.reset()
    clean = tmp_path / "uninterrupted"
    assert CliRunner().invoke(app, _args(server, source, clean)).exit_code == 0
    assert server.request_count == len(counts)  # the resumed run asked exactly the same distinct requests
    for name in ("MEDMISQA.jsonl",):
        assert (out / "benchmark" / name).read_text() == (clean / "benchmark" / name).read_text()
    resumed_bundles = [json.loads(line)["item"] for line in (out / "bundles.jsonl").read_text().splitlines()]
    clean_bundles = [json.loads(line)["item"] for line in (clean / "bundles.jsonl").read_text().splitlines()]
    assert resumed_bundles == clean_bundles and len(clean_bundles) == N_ITEMS
    frames = Counter(b["injection"]["provenance"] for b in clean_bundles)
    assert frames == {"neutral": 10, "patient": 10, "authority": 10}  # balanced within the one stratum


def test_ctrl_c_stops_cleanly_and_says_how_to_resume(fake_openai, tmp_path):
    source = tmp_path / "US_train.jsonl"
    write_medqa(source, N_ITEMS)
    server = fake_openai(FakeGenerator(load_source(source, "medqa").items), latency=0.03)
    out = tmp_path / "interrupted"
    returncode, stderr = interrupt_cli(_args(server, source, out), server, after_requests=12, sig=signal.SIGINT)
    assert returncode == 130, stderr
    assert "interrupted" in stderr and "run the same command again to resume" in stderr and "Traceback" not in stderr
    lines = (out / "results.jsonl").read_text().splitlines()
    assert 0 < len(lines) < N_ITEMS and all(json.loads(line)["status"] == "ok" for line in lines)
    assert not (out / "bundles.jsonl").exists() and not (out / "benchmark").exists()
