"""HealthContradict as its paper reports it: NC-only runs on the public data, models side by side,
McNemar between models on one template, macro-F1 by context-length quartile (Fig. 7)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from scipy.stats import chi2 as chi2_distribution
from typer.testing import CliRunner

from bench_core.cli.main import app
from tests.bench_core.healthcontradict.test_e2e import _book, _instances
from tests.fakes.openai_server import Reply

PUBLIC = Path(__file__).resolve().parents[2] / "data" / "healthcontradict"
RELEASED_NC = [json.loads(line) for line in (PUBLIC / "prompts_1.jsonl").read_text().splitlines()]


def _says(model: str, prompt: str) -> str:
    """A deterministic scripted model: its YES/NO depends on the model name and the prompt text."""
    return "YES" if int(hashlib.sha256(f"{model}|{prompt}".encode()).hexdigest(), 16) % 3 == 0 else "NO"


def _run(server, data, out, model, *extra):
    args = ["run", "healthcontradict", "--data", str(data), "--model", model, "--base-url", server.url,
            "--out", str(out), "--no-progress", "--no-logprobs", *extra]  # fmt: skip
    return CliRunner().invoke(app, args, catch_exceptions=False)


def test_a_no_context_run_needs_no_document_and_matches_the_released_prompts(fake_openai, tmp_path):
    server = fake_openai(lambda received: Reply(content=_says(received.body["model"], received.last_user_text)))
    runs = tmp_path / "runs"
    for model in ("model-a", "model-b"):
        result = _run(server, PUBLIC, runs / model, model, "--templates", "NC")
        assert result.exit_code == 0, result.output
    asked = {r.last_user_text for r in server.requests}
    assert asked == {row["prompt"] for row in RELEASED_NC}  # the authors' 920 NC prompts, 81 distinct
    assert server.request_count == 2 * len(asked) == 2 * 81

    # Expected numbers straight from the released prompt file (one row per instance).
    correct = {
        model: [_says(model, row["prompt"]).lower() == row["query_stance"] for row in RELEASED_NC]
        for model in ("model-a", "model-b")
    }
    b = sum(x and not y for x, y in zip(correct["model-a"], correct["model-b"], strict=True))
    c = sum(y and not x for x, y in zip(correct["model-a"], correct["model-b"], strict=True))
    chi2 = (abs(b - c) - 1) ** 2 / (b + c)

    result = CliRunner().invoke(app, ["report", str(runs), "--json", "--combined"])
    assert result.exit_code == 0, result.output
    (combined,) = [json.loads(line) for line in result.stdout.splitlines()]
    assert combined["combined"] and combined["templates"] == ["NC"] and combined["n_instances"] == 920
    for model in ("model-a", "model-b"):
        block = combined["models"][model]["templates"]["NC"]
        assert (block["n"], block["n_correct"]) == (920, sum(correct[model]))
        assert combined["models"][model]["or_rate"] is None  # needs CC, not run
    test = combined["model_mcnemar"]["NC"]["model-a vs model-b"]
    assert (test["b"], test["c"], test["n"]) == (b, c, 920)
    assert abs(test["chi2"] - chi2) < 1e-12 and abs(test["p_value"] - chi2_distribution.sf(chi2, 1)) < 1e-12

    # Without --json: the per-directory reports, then the side-by-side table and the model McNemar.
    table = CliRunner().invoke(app, ["report", str(runs), "--no-figures"], env={"COLUMNS": "200"})
    assert table.exit_code == 0, table.output
    text = " ".join(table.stdout.split())
    assert "models side by side" in text and "McNemar between models on the same template" in text
    assert (runs / "report" / "combined-healthcontradict" / "model_mcnemar.tex").is_file()


def test_models_side_by_side_and_macro_f1_by_context_quartile(fake_openai, tmp_path):
    book = _book()
    instances = {i.instance_id: i for i in _instances()}
    data = tmp_path / "instances.jsonl"
    data.write_text("".join(json.dumps(i.model_dump()) + "\n" for i in instances.values()))

    def policy(received):
        if received.body["model"] == "scripted":
            return book[received.last_user_text]
        return Reply(content="No")  # a model that always says no

    server = fake_openai(policy)
    runs = tmp_path / "runs"
    for model in ("scripted", "always-no"):
        assert _run(server, data, runs / model, model).exit_code == 0
    combined = json.loads(CliRunner().invoke(app, ["report", str(runs), "--json", "--combined"]).stdout)
    scripted, no = combined["models"]["scripted"], combined["models"]["always-no"]
    # test_e2e's table: CC 6/6 for the scripted model; "no" is right for i2..i5 (4/6) everywhere.
    assert scripted["templates"]["CC"]["accuracy"] == 1.0 and no["templates"]["CC"]["accuracy"] == 4 / 6
    # macro-F1 of always-no: F1(no) = 2*4/(2*4+2) = 0.8, F1(yes) = 0 -> 0.4 over both classes.
    assert abs(no["templates"]["CC"]["macro_f1"] - 0.4) < 1e-12
    # McNemar between models under CC: scripted alone right on i0, i1 (b = 2), never the other way.
    test = combined["model_mcnemar"]["CC"]["always-no vs scripted"]
    assert (test["b"], test["c"]) == (0, 2) and abs(test["chi2"] - 0.5) < 1e-12
    # Quartiles: CC shows the correct document; its words grow with the instance number (k + 1
    # repeats), so the quartiles are {i0, i1}, {i2, i3}, {i4}, {i5}. always-no under CC: Q1 both wrong
    # (yes items): macro-F1 over yes and no = 0; Q2 both right (no items): F1(no) = 1, only class -> 1.
    quartiles = {g["quartile"]: g for g in no["by_context_quartile"]["CC"]}
    assert [quartiles[q]["n"] for q in (1, 2, 3, 4)] == [2, 2, 1, 1]
    assert (quartiles[1]["macro_f1"], quartiles[2]["macro_f1"]) == (0.0, 1.0)
    words = sorted(len(i.correct_doc.split()) for i in instances.values())
    assert (quartiles[1]["min_words"], quartiles[4]["max_words"]) == (words[0], words[-1])
