"""A run killed with SIGKILL mid-way and resumed loses nothing and repeats only calls in flight."""

from __future__ import annotations

import json
import signal
from collections import Counter

from typer.testing import CliRunner

from bench_core.cli.main import app
from bench_core.medmisbench.data import load_medmisbench
from bench_core.medmisbench.prompts import get_template
from bench_core.medmisbench.run import prepare_items
from tests.bench_core.batch.scenario import medmisbench_policy, write_medmisbench
from tests.bench_core.interrupt import interrupt_cli, run_cli
from tests.bench_core.medmisbench.scenario import prompts, run_args

CONCURRENCY = 4
N_ITEMS = 40
CONDITIONS = ["clean", "type1", "type2"]


def _args(server, data, out):
    return run_args(data, server.url, out, "--concurrency", str(CONCURRENCY), "--no-progress")


def _interrupted(fake_openai, tmp_path, name, *, after_requests, sig):
    """A run of ``N_ITEMS`` items on a slow server, sent ``sig`` once it has made ``after_requests`` requests:
    (server, data, run directory, return code, stderr)."""
    data = write_medmisbench(tmp_path / "MEDMISQA.jsonl", N_ITEMS)
    server = fake_openai(medmisbench_policy, latency=0.03)
    out = tmp_path / name
    returncode, stderr = interrupt_cli(_args(server, data, out), server, after_requests=after_requests, sig=sig)
    return server, data, out, returncode, stderr


def test_sigkill_then_resume_repeats_only_in_flight_calls(fake_openai, tmp_path):
    server, data, out, returncode, stderr = _interrupted(
        fake_openai, tmp_path, "killed", after_requests=40, sig=signal.SIGKILL
    )
    assert returncode == -signal.SIGKILL, stderr
    done_before = {
        (json.loads(line)["key"]["item"], json.loads(line)["key"]["condition"])
        for line in (out / "results.jsonl").read_text().splitlines()
    }
    assert 0 < len(done_before) < N_ITEMS * len(CONDITIONS)  # really killed mid-way

    resumed = run_cli(_args(server, data, out))
    assert resumed.returncode == 0, resumed.stderr.decode()

    prepared = prepare_items(load_medmisbench(data, reading="authors").items)  # the default protocol's reading
    by_prompt = {text: key for key, text in prompts(prepared, CONDITIONS, get_template()).items()}
    counts = Counter(by_prompt[r.last_user_text] for r in server.requests)
    assert len(counts) == N_ITEMS * len(CONDITIONS)  # every (item, condition) was asked at least once
    repeated = {key for key, count in counts.items() if count > 1}
    assert max(counts.values()) <= 2
    assert len(repeated) <= CONCURRENCY  # only calls in flight at the kill were asked again
    assert not {(f"MEDMISQA/{item}", condition) for item, condition in repeated} & done_before

    lines = (out / "results.jsonl").read_text().splitlines()
    keys = [(json.loads(line)["key"]["item"], json.loads(line)["key"]["condition"]) for line in lines]
    assert len(keys) == len(set(keys)) == N_ITEMS * len(CONDITIONS)  # nothing lost, nothing stored twice

    server.reset()
    clean_out = tmp_path / "uninterrupted"
    assert CliRunner().invoke(app, _args(server, data, clean_out)).exit_code == 0
    assert server.request_count == N_ITEMS * len(CONDITIONS)

    def report(directory):
        result = json.loads(CliRunner().invoke(app, ["report", str(directory), "--json"]).stdout)
        del result["run_dir"]
        return result

    assert report(out) == report(clean_out)


def test_ctrl_c_stops_cleanly_and_says_how_to_resume(fake_openai, tmp_path):
    _server, _data, out, returncode, stderr = _interrupted(
        fake_openai, tmp_path, "interrupted", after_requests=20, sig=signal.SIGINT
    )
    assert returncode == 130, stderr
    assert "interrupted" in stderr and "run the same command again to resume" in stderr
    assert "Traceback" not in stderr
    lines = (out / "results.jsonl").read_text().splitlines()
    assert all(json.loads(line)["status"] == "ok" for line in lines)  # every line complete, no failure recorded
    assert 0 < len(lines) < N_ITEMS * len(CONDITIONS)
