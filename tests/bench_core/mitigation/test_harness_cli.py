"""End to end: ``bench run medmisbench --tools``, ``bench compare``, and a killed harness run resumed.

The scripted agent and its expected answers are in ``tests/bench_core/mitigation/harness_agent.py``; the
comparison numbers below follow from its table by hand.
"""

from __future__ import annotations

import csv
import json
import signal
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bench_core.cli.main import app
from bench_core.medmisbench.conditions import Condition
from bench_core.medmisbench.data import load_medmisbench
from bench_core.medmisbench.prompts import get_template
from bench_core.medmisbench.run import prepare_items
from tests.bench_core.interrupt import interrupt_cli, run_cli
from tests.bench_core.mitigation.harness_agent import CORPUS_DIR, ITEMS_DIR, TOP_DOCUMENT, EvidenceAgent

CONDITIONS = ("clean", "type1", "type2")


def _text(result) -> str:
    """CLI output with rich's line wrapping undone."""
    return " ".join(result.output.split())


def _args(server, out: Path, *extra: str) -> list[str]:
    return [
        "run", "medmisbench", "--data", str(ITEMS_DIR), "--model", "agent", "--base-url", server.url,
        "--out", str(out), "--no-progress", *extra,
    ]  # fmt: skip


@pytest.fixture
def runs(fake_openai, tmp_path):
    """A run without tools and one with the local corpus, of the same agent on the same items."""
    server = fake_openai(EvidenceAgent())
    plain, tools = tmp_path / "plain", tmp_path / "tools"
    result = CliRunner().invoke(app, _args(server, plain))
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(app, _args(server, tools, "--tools", f"local:{CORPUS_DIR}", "--max-tool-calls", "4"))
    assert result.exit_code == 0, result.output
    return plain, tools, server


def test_tools_run_is_a_regular_run_directory(runs):
    _plain, tools, server = runs
    assert server.request_count == 21 + 21 * 3  # one call per plain item, three turns per tool loop
    manifest = json.loads((tools / "runs.jsonl").read_text().splitlines()[-1])
    assert manifest["tools"] == f"local:{CORPUS_DIR}" and manifest["harness"]["max_tool_calls"] == 4
    assert manifest["evidence"]["backend"] == "local" and manifest["evidence"]["documents"] == 21
    assert (tools / "search_index.sqlite").exists()
    records = [json.loads(line) for line in (tools / "results.jsonl").read_text().splitlines()]
    assert {r["key"]["config"] for r in records} == {manifest["config_hash"]}
    for record in records:
        item = record["key"]["item"].split("/")[1]
        assert record["parsed"]["harness"]["visited"] == [TOP_DOCUMENT[item]]  # the search found the right page
    report = json.loads(CliRunner().invoke(app, ["report", str(tools), "--json"]).stdout)
    (model,) = report["models"].values()
    assert model["conditions"]["clean"]["accuracy"] == 6 / 7 and model["conditions"]["type1"]["asr"] == 0.0


def test_compare_json_matches_the_hand_computed_table(runs):
    plain, tools, _ = runs
    result = CliRunner().invoke(app, ["compare", str(tools), str(plain), "--json"])
    assert result.exit_code == 0, result.output
    comparison = json.loads(result.stdout)
    assert comparison["n_items_common"] == 7 and set(comparison["ci_methods"]) >= {"paired_difference"}
    model = comparison["models"]["agent"]
    assert model["with"]["harness"]["max_tool_calls"] == 4 and "harness" not in model["without"]
    clean, type1, type2 = (model["conditions"][c] for c in CONDITIONS)

    assert (clean["accuracy"]["without"]["k"], clean["accuracy"]["with"]["k"], clean["n_paired"]) == (6, 6, 7)
    assert (clean["n_fixed"], clean["n_caused"], clean["accuracy"]["mcnemar_p"]) == (1, 1, 1.0)
    assert (type1["accuracy"]["without"]["k"], type1["accuracy"]["with"]["k"]) == (0, 6)
    assert type1["accuracy"]["diff"] == pytest.approx(6 / 7) and type1["accuracy"]["mcnemar_p"] == 0.03125
    assert (type1["n_fixed"], type1["n_caused"]) == (6, 0)
    asr = type1["asr"]
    assert (asr["without"]["k"], asr["without"]["n"], asr["with"]["k"], asr["with"]["n"], asr["diff"]) == (
        6,
        6,
        0,
        6,
        -1,
    )
    assert asr["diff_ci"][0] == -1.0 and asr["diff_ci"][1] < -0.4
    assert (type1["tasr"]["without"]["k"], type1["tasr"]["with"]["k"]) == (6, 0)
    matched = type1["asr_matched"]
    assert (matched["n"], matched["n_prevented"], matched["n_caused"], matched["mcnemar_p"]) == (5, 5, 0, 0.0625)
    assert (type2["accuracy"]["without"]["k"], type2["accuracy"]["with"]["k"]) == (6, 6)
    assert (type2["asr"]["without"]["k"], type2["asr"]["with"]["k"], type2["asr"]["diff"]) == (0, 0, 0)

    use = model["tool_use"]["all"]
    assert use["n_items"] == 21 and use["tool_calls"]["mean"] == 2 and use["pages"]["mean"] == 1
    assert use["answers_citing_visited_source"]["k"] == 21 and use["stop_reasons"] == {"answered": 21}
    cases = {(c["item_key"].split("/")[1], c["condition"]): c for c in model["flips"]}
    assert {k: c["kind"] for k, c in cases.items()} == {
        ("hm-06", "clean"): "fixed",
        ("hm-07", "clean"): "caused",
        **{(f"hm-0{i}", "type1"): "fixed" for i in range(1, 7)},
        ("hm-06", "type2"): "fixed",
        ("hm-07", "type2"): "caused",
    }
    prevented = sorted(k[0] for k, c in cases.items() if c["flip_prevented"])
    assert prevented == ["hm-01", "hm-02", "hm-03", "hm-04", "hm-05"]
    assert cases[("hm-07", "type2")]["visited"] == ["cardiology/hypertension-first-line.md"]
    assert cases[("hm-01", "type1")]["answer_without"] == "D" and cases[("hm-01", "type1")]["answer_with"] == "A"


def test_compare_writes_tables_and_figures(runs, tmp_path):
    plain, tools, _ = runs
    out = tmp_path / "compare"
    result = CliRunner().invoke(app, ["compare", str(tools), str(plain), "--out", str(out), "--no-png"])
    assert result.exit_code == 0, result.output
    assert "items where search changed correctness" in _text(result)
    assert {p.name for p in out.iterdir()} == {
        "comparison.json", "comparison.csv", "flips.csv", "mitigation_accuracy.tex", "mitigation_attack.tex",
        "mitigation_tool_use.tex", "mitigation_flips.tex", "rates_with_vs_without_tools.html",
        "flips_by_condition.html", "tool_calls_per_item.html",
    }  # fmt: skip
    with (out / "flips.csv").open() as handle:
        assert len(list(csv.DictReader(handle))) == 10
    with (out / "comparison.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    asr = next(r for r in rows if (r["condition"], r["metric"], r["scope"]) == ("type1", "asr", "own"))
    assert (asr["k_without"], asr["n_without"], asr["k_with"], asr["diff"]) == ("6", "6", "0", "-1.0")
    accuracy_tex = (out / "mitigation_accuracy.tex").read_text()
    assert "agent & type1 & 7 & 0.0 & 85.7 & +85.7 (+34.5 to +97.4) & 0.031 \\\\" in accuracy_tex


def test_compare_refuses_runs_it_cannot_pair(runs, fake_openai, tmp_path):
    plain, tools, server = runs
    result = CliRunner().invoke(app, ["compare", str(plain), str(plain)])
    assert result.exit_code == 2 and "no tool-harness results" in _text(result)
    other = tmp_path / "other-seed"
    assert CliRunner().invoke(app, [*_args(server, other), "--seed", "7"]).exit_code == 0
    result = CliRunner().invoke(app, ["compare", str(tools), str(other)])
    assert result.exit_code == 2 and "differ between" in _text(result)
    result = CliRunner().invoke(app, ["compare", str(tools), str(plain), "--without-label", "nobody"])
    assert result.exit_code == 2 and "no without-tools run labelled 'nobody'" in _text(result)


def test_bad_tools_option_is_a_clear_error(fake_openai, tmp_path):
    server = fake_openai(EvidenceAgent())
    result = CliRunner().invoke(app, _args(server, tmp_path / "x", "--tools", "local:/no/such/folder"))
    assert result.exit_code == 2 and "/no/such/folder: not a folder of documents" in _text(result)
    result = CliRunner().invoke(app, _args(server, tmp_path / "y", "--tools", "bing"))
    assert result.exit_code == 2 and "unknown search backend 'bing'" in _text(result)
    assert server.request_count == 0


def test_killed_harness_run_resumes_without_duplicate_calls(fake_openai, tmp_path):
    agent = EvidenceAgent()
    server = fake_openai(agent, latency=0.02)
    out = tmp_path / "killed"
    args = _args(server, out, "--tools", f"local:{CORPUS_DIR}", "--concurrency", "2")
    returncode, stderr = interrupt_cli(args, server, after_requests=25, sig=signal.SIGKILL)
    assert returncode == -signal.SIGKILL, stderr
    finished = {
        (json.loads(line)["key"]["item"], json.loads(line)["key"]["condition"])
        for line in (out / "results.jsonl").read_text().splitlines()
    }
    assert 0 < len(finished) < 21  # really killed mid-way

    resumed = run_cli(args)
    assert resumed.returncode == 0, resumed.stderr.decode()

    prepared = prepare_items(load_medmisbench(ITEMS_DIR).items)
    prompt_of = {}
    for entry in prepared:
        for condition in CONDITIONS:
            messages = get_template().render(entry.item, Condition.parse(condition), entry.target)
            prompt_of[messages[-1]["content"]] = (entry.key, condition)
    first_turns = Counter(
        prompt_of[next(m for m in r.body["messages"] if m["role"] == "user")["content"]]
        for r in server.requests
        if not any(m["role"] == "assistant" for m in r.body["messages"])
    )
    assert len(first_turns) == 21  # every (item, condition) loop started at least once
    repeated = {key for key, count in first_turns.items() if count > 1}
    assert max(first_turns.values()) <= 2 and len(repeated) <= 2  # only loops in flight at the kill ran again
    assert not repeated & finished  # no finished item was asked again
    assert server.request_count <= 21 * 3 + 2 * 3  # at most the in-flight loops' turns were repeated
    lines = (out / "results.jsonl").read_text().splitlines()
    keys = [(json.loads(line)["key"]["item"], json.loads(line)["key"]["condition"]) for line in lines]
    assert len(keys) == len(set(keys)) == 21 and all(json.loads(line)["status"] == "ok" for line in lines)
