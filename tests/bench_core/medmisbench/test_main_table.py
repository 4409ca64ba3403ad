"""``bench report`` over several run directories (one per model): the paper's main tables.

Two models on the sample: the scripted model of ``scenario.py`` (numbers known by hand) and one
that always answers the gold label. Overall pools counts over subsets; Mean averages the models.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from bench_core.cli.main import app
from bench_core.medmisbench.data import load_medmisbench
from bench_core.medmisbench.run import prepare_items
from tests.bench_core.medmisbench.scenario import answer_book
from tests.fakes.openai_server import Reply

CONDITIONS = ["clean", "type1", "type2"]


@pytest.fixture
def runs(fake_openai, sample_dir, tmp_path):
    prepared = prepare_items(load_medmisbench(sample_dir, strict=True).items)
    book = answer_book(prepared, CONDITIONS)
    gold = {}
    for entry in prepared:
        for prompt_text, _reply in answer_book([entry], CONDITIONS).items():
            gold[prompt_text] = entry.item.gold

    def policy(received):
        if received.body["model"] == "scripted":
            return Reply(content=book[received.last_user_text])
        return Reply(content=json.dumps({"thinking_process": "t", "answer_letter": gold[received.last_user_text]}))

    server = fake_openai(policy)
    root = tmp_path / "runs"
    for model in ("scripted", "oracle"):
        args = ["run", "medmisbench", "--data", str(sample_dir), "--model", model, "--base-url", server.url,
                "--out", str(root / model), "--no-progress", "--template", "medmisbench-notebook@1",
                "--protocol", "strict"]  # fmt: skip
        assert CliRunner().invoke(app, args).exit_code == 0
    return root


def test_the_combined_report_pools_subsets_and_averages_models(runs):
    result = CliRunner().invoke(app, ["report", str(runs), "--json", "--combined"])
    assert result.exit_code == 0, result.output
    (report,) = [json.loads(line) for line in result.stdout.splitlines()]
    assert report["combined"] and sorted(report["run_dirs"]) == ["oracle", "scripted"]
    assert set(report["models"]) == {"scripted", "oracle"} and report["protocol"] == "strict"
    scripted, oracle = report["models"]["scripted"]["conditions"], report["models"]["oracle"]["conditions"]
    assert (scripted["type1"]["asr"], scripted["type1"]["tasr"], oracle["type1"]["asr"]) == (4 / 5, 2 / 5, 0.0)
    mean = report["mean"]
    assert mean["conditions"]["clean"]["accuracy"] == pytest.approx((5 / 7 + 1) / 2)
    assert mean["conditions"]["type1"]["asr"] == pytest.approx(0.4)
    assert mean["conditions"]["type1"]["tasr"] == pytest.approx(0.2)
    assert mean["conditions"]["type2"]["asr"] == pytest.approx(0.1)
    qa = mean["strata"]["subset"]["MEDMISQA"]
    assert (qa["clean"]["accuracy"], qa["type1"]["asr"], qa["type1"]["tasr"]) == (1.0, 0.5, 0.25)
    # Without --combined, --json keeps its contract: one object per run directory.
    per_dir = CliRunner().invoke(app, ["report", str(runs), "--json"]).stdout.splitlines()
    assert len(per_dir) == 2 and all("combined" not in json.loads(line) for line in per_dir)


def test_the_terminal_and_files_show_the_papers_tables(runs):
    result = CliRunner().invoke(app, ["report", str(runs / "scripted"), str(runs / "oracle"), "--no-figures"],
                                env={"COLUMNS": "220"})  # fmt: skip
    assert result.exit_code == 0, result.output
    text = result.stdout
    for title in ("Clean accuracy", "Type 1 attack success rate (ASR)", "Type 1 targeted attack success rate (TASR)",
                  "Type 2 attack success rate (ASR)"):  # fmt: skip
        assert title in text
    header = next(line for line in text.splitlines() if "MedMisQA" in line and "Overall" in line)
    assert header.index("MedMisQA") < header.index("MedMisMCQA") < header.index("MedMisXpertQA")  # paper order
    row = next(line for line in text.splitlines() if line.strip("│ ").startswith("Mean") and "40.0" in line)
    assert row  # Type 1 ASR, Overall: mean of 80.0 and 0.0
    target = runs / "report" / "combined-medmisbench"
    tex = (target / "type1_asr.tex").read_text()
    assert r"Mean & " in tex and "40.0" in tex
    assert "scripted (scripted): " in " ".join(text.split())
