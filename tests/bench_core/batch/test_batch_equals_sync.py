"""A ``--batch`` run writes the records a synchronous run writes, for every command that calls models.

Both runs ask the same fake model (one loopback server answers synchronous calls and batch lines through
the same policy); their ``results.jsonl`` must agree record for record apart from the fields that say
when a call was made. The batch run makes no synchronous call at all, and every key is submitted once.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from bench_core.cli.main import app
from bench_core.generation.sources import load_source
from tests.bench_core.batch.scenario import (
    batch_flags,
    generate_args,
    healthcontradict_args,
    healthcontradict_policy,
    medmisbench_args,
    medmisbench_policy,
    records,
    trojan_args,
    trojan_policy,
    write_healthcontradict,
    write_medmisbench,
    write_medqa,
)
from tests.bench_core.generation.fake_generator import FakeGenerator

CASES = [
    ("medmisbench", "openai"),
    ("medmisbench", "anthropic"),
    ("medmisbench", "google"),
    ("healthcontradict", "openai"),
    ("trojan", "openai"),
    ("generate", "openai"),
]


def _setup(command, provider, tmp_path):
    if command == "medmisbench":
        data = write_medmisbench(tmp_path / "MEDMISQA.jsonl")
        return medmisbench_policy, lambda server, out: medmisbench_args(server, data, out, provider)
    if command == "healthcontradict":
        data = write_healthcontradict(tmp_path / "instances.jsonl")
        return healthcontradict_policy, lambda server, out: healthcontradict_args(server, data, out)
    if command == "trojan":
        return trojan_policy, trojan_args
    source = write_medqa(tmp_path / "US_train.jsonl")
    generator = FakeGenerator(load_source(source, "medqa").items, {"US_train-2": "invalid_json_once"})
    return generator, lambda server, out: generate_args(server, source, out)


@pytest.mark.parametrize(("command", "provider"), CASES, ids=[f"{c}-{p}" for c, p in CASES])
def test_batch_run_records_equal_the_synchronous_run(fake_batch, tmp_path, command, provider):
    policy, args = _setup(command, provider, tmp_path)
    server = fake_batch(policy, steps=2)
    synchronous = CliRunner().invoke(app, args(server, tmp_path / "sync"))
    assert synchronous.exit_code == 0, synchronous.output
    calls = server.request_count
    assert calls > 0 and not server.batches

    batched = CliRunner().invoke(app, [*args(server, tmp_path / "batch"), *batch_flags()])
    assert batched.exit_code == 0, batched.output
    assert server.request_count == calls  # not one synchronous call
    assert server.twice() == {}  # every request in exactly one batch
    expected = records(tmp_path / "sync")
    assert sum(server.submitted.values()) == len(expected)
    assert records(tmp_path / "batch") == expected
    if command == "generate":  # the waves (Stage 1, Stage 2, the corrected re-ask) each became a batch
        assert len(server.batches) >= 3
        bundles = [(tmp_path / d / "bundles.jsonl").read_text() for d in ("sync", "batch")]
        assert bundles[0] == bundles[1]
    if command in ("medmisbench", "healthcontradict", "trojan"):
        reports = []
        for directory in ("sync", "batch"):
            report = json.loads(CliRunner().invoke(app, ["report", str(tmp_path / directory), "--json"]).stdout)
            report.pop("run_dir")
            report.get("provenance", {}).pop("ingested_at", None)  # when the dataset was read: a time
            usage = report.pop("usage")
            reports.append(report)
            via = "batch" if directory == "batch" else "sync"
            assert usage[via]["requests"] == len(expected) and usage["total"]["requests"] == len(expected)
        assert reports[0] == reports[1]
