"""``bench report`` at 80 columns keeps ``n`` and every CI whole: a table too wide is stacked."""

from __future__ import annotations

import json
import re
import shutil

from typer.testing import CliRunner

from review_app.cli import app
from tests.conftest import ROOT

OLD_RUN = ROOT / "tests" / "data" / "medmisbench_old_run"


def _run_dir(tmp_path, name="old"):
    target = tmp_path / name
    shutil.copytree(OLD_RUN, target)
    (target / "expected_report.json").unlink()
    return target


def _cis(report: dict) -> set[str]:
    """Every "rate (low–high)" cell the report's terminal tables show, from the JSON report."""
    from bench_core.cli.common import pct_ci

    found = set()
    for model in report["models"].values():
        for block in model["conditions"].values():
            for rate in ("accuracy", "asr", "tasr"):
                text = pct_ci(block, rate)
                if "(" in text:
                    found.add(text)
    return found


def test_every_ci_and_n_is_whole_at_80_columns(tmp_path):
    run = _run_dir(tmp_path)
    runner = CliRunner()
    report = json.loads(runner.invoke(app, ["bench", "report", str(run), "--json"]).stdout)
    result = runner.invoke(app, ["bench", "report", str(run), "--no-figures"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert "…" not in text, text
    assert max(len(line) for line in text.splitlines()) <= 80 or str(run) in text
    cis = _cis(report)
    assert len(cis) >= 5
    for ci in cis:
        assert ci in text, f"{ci} cut at 80 columns:\n{text}"
    for block in report["models"]["old-model"]["conditions"].values():
        assert re.search(rf"\bn: {block['n']}\b", text) or re.search(rf"│ {block['n']} │", text), text
    wide = runner.invoke(app, ["bench", "report", str(run), "--no-figures"], env={"COLUMNS": "160"})
    assert "┃ n ┃" in wide.stdout  # with room, the table itself


def test_the_combined_report_keeps_numbers_whole_at_80_columns(tmp_path):
    first, second = _run_dir(tmp_path, "a"), _run_dir(tmp_path, "b")
    result = CliRunner().invoke(
        app, ["bench", "report", str(first), str(second), "--no-figures", "--combined"], env={"COLUMNS": "80"}
    )
    assert result.exit_code == 0, result.output
    assert "…" not in result.stdout, result.stdout
