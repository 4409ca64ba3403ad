"""SPEC section 3 is a contract outside scripts rely on: every command name and flag must exist."""

import re

import pytest
from typer.testing import CliRunner

from review_app.cli import app

CONTRACT = {
    "demo": [],
    "app": ["--host", "--port"],
    "db upgrade": [],
    "bench run medmisbench": [
        "--data", "--model", "--base-url", "--out", "--conditions", "--defensive", "--concurrency", "--seed", "--limit",
    ],
    "bench run healthcontradict": ["--data", "--model", "--base-url", "--hf", "--out"],
    "bench run trojan": ["--data", "--model", "--base-url", "--judge-model", "--judge-base-url", "--out"],
    "bench generate": ["--source", "--format", "--model", "--base-url", "--out", "--seed", "--limit", "--one-call"],
    "bench report": ["--json"],
    "review import": ["--kind", "--study"],
    "review study create": ["--rubrics"],
    "review pool": ["--study", "--size", "--quota", "--seed"],
    "review assign": ["--study", "--raters", "--dual-share", "--seed"],
    "review user add": ["--role", "--languages"],
    "review status": ["--study", "--json"],
    "review export": ["--study", "--out", "--format", "--real-names"],
    "stats agreement": ["--input", "--unit", "--rater", "--score", "--weights", "--categories", "--json"],
    "stats harm-model": ["--input", "--outcome", "--fixed", "--group", "--reference", "--json"],
    "stats proportion": ["--successes", "--n", "--json"],
    "stats plan": [
        "--metric", "--expected", "--ci-width", "--categories", "--raters", "--odds-ratio", "--power", "--reviewers",
        "--icc", "--pilot", "--seed", "--json",
    ],
}  # fmt: skip


@pytest.mark.parametrize(("command", "flags"), CONTRACT.items(), ids=list(CONTRACT))
def test_command_and_flags_exist(command, flags):
    result = CliRunner().invoke(app, [*command.split(), "--help"], env={"COLUMNS": "200", "TERM": "dumb"})
    assert result.exit_code == 0, result.output
    text = re.sub(r"\x1b\[[0-9;]*m", "", result.output)
    for flag in flags:
        assert re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", text), f"{command}: {flag} missing"
