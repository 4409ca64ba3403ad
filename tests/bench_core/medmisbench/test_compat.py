"""Run directories made before templates as data, protocols and request profiles still work.

``tests/data/medmisbench_old_run`` was written by the code before this change (the sample data, a
scripted model, one failed call); ``expected_report.json`` is what that code reported for it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from bench_core.cli.main import app
from bench_core.medmisbench.prompts import LEGACY_TEMPLATE_ID, get_template, resolve_request
from bench_core.medmisbench.run import EvalSettings

OLD_RUN = Path(__file__).resolve().parents[2] / "data" / "medmisbench_old_run"
OLD_HASH = "206bb2e684db"


def _subset_equal(old, new, path="report"):
    """Every key the old report had is in the new one with the same value (new keys may be added)."""
    if isinstance(old, dict):
        assert isinstance(new, dict), path
        for key, value in old.items():
            assert key in new, f"{path}.{key} missing"
            _subset_equal(value, new[key], f"{path}.{key}")
    else:
        assert old == new, f"{path}: {old!r} != {new!r}"


def test_a_run_made_before_still_reports_the_same_numbers(tmp_path):
    run = tmp_path / "old"
    shutil.copytree(OLD_RUN, run)
    result = CliRunner().invoke(app, ["report", str(run), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    expected = json.loads((OLD_RUN / "expected_report.json").read_text())
    expected.pop("run_dir")
    _subset_equal(expected, report)
    assert report["protocol"] == "strict"  # items saved before protocols were read the medrev way
    assert report["models"]["old-model"]["conditions"]["type2"]["n_failed"] == 1


def test_the_old_template_keeps_its_config_hash():
    request = resolve_request(get_template(LEGACY_TEMPLATE_ID), "openai-compatible", "old-model")
    settings = EvalSettings.of(request, template_id=LEGACY_TEMPLATE_ID, protocol="strict")
    assert settings.config_hash == EvalSettings().config_hash == OLD_HASH
    assert settings.as_dict() == {
        "temperature": 0.0,
        "max_tokens": None,
        "reasoning_effort": None,
        "template": LEGACY_TEMPLATE_ID,
        "seed": 20260101,
    }
    # A new setting joins the hash only when set.
    thinking = resolve_request(get_template(LEGACY_TEMPLATE_ID), "openai-compatible", "m", thinking="off")
    assert EvalSettings.of(thinking, template_id=LEGACY_TEMPLATE_ID).config_hash != OLD_HASH


def test_the_old_command_resumes_an_old_run_without_a_call(tmp_path, sample_dir):
    """The earlier command with the earlier template and protocol finds every key done (the failed one
    is not retried without --retry-failed), so no call is made; with the new defaults it is refused,
    not mixed in. (The old run's endpoint was http://127.0.0.1:8000/v1: a call would have to go there.)"""
    run = tmp_path / "old"
    shutil.copytree(OLD_RUN, run)
    args = ["run", "medmisbench", "--data", str(sample_dir), "--model", "old-model", "--base-url",
            "http://127.0.0.1:8000/v1", "--out", str(run), "--no-progress", "--max-attempts", "1"]  # fmt: skip
    legacy = ["--template", LEGACY_TEMPLATE_ID, "--protocol", "strict"]
    before = (run / "results.jsonl").read_bytes()
    result = CliRunner().invoke(app, [*args, *legacy])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "0 calls succeeded, 0 failed, 20 already done, 1 earlier failures not retried" in text
    assert (run / "results.jsonl").read_bytes() == before
    refused = CliRunner().invoke(app, args)
    assert refused.exit_code == 2 and "Use a new --out directory" in " ".join(refused.output.split())
