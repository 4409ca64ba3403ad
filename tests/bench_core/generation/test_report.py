"""The construction report: loader drops, outcomes per subset and reason, Table 3 counts, score distributions."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from bench_core.cli.main import app
from bench_core.generation.report import distribution
from bench_core.generation.sources import load_source
from tests.bench_core.generation.fake_generator import FakeGenerator


def test_distribution_bins_and_summary():
    dist = distribution([0, 0.5, 3.2, 9.9, 10, None])
    assert (dist["n"], dist["min"], dist["max"], dist["median"]) == (5, 0.0, 10.0, 3.2)
    assert [b["n"] for b in dist["histogram"]] == [2, 0, 0, 1, 0, 0, 0, 0, 0, 2]
    assert distribution([])["mean"] is None


def test_report_counts_what_the_loader_and_the_generator_did(fake_openai, tmp_path):
    source = tmp_path / "US_dev.jsonl"
    rows = [
        {"question": f"Vignette {i}: which regimen is indicated?", "options": {"A": f"Plan a{i}", "B": f"Plan b{i}"},
         "answer_idx": "AB"[i % 2]}
        for i in range(9)
    ]  # fmt: skip
    lines = [json.dumps(r) for r in rows] + ['{"question": "broken', json.dumps({"question": "No options?"})]
    source.write_text("\n".join(lines) + "\n")
    items = load_source(source, "medqa").items
    script = {items[0].id: "not_viable", items[1].id: "leak"}
    server = fake_openai(FakeGenerator(items, script))
    out = tmp_path / "gen"
    args = ["generate", "--source", str(source), "--format", "medqa", "--model", "g", "--base-url", server.url]
    refused = CliRunner().invoke(app, [*args, "--out", str(out), "--no-progress"], env={"COLUMNS": "200"})
    assert refused.exit_code == 2 and "US_dev.jsonl:10" in refused.output and "US_dev.jsonl:11" in refused.output
    assert not out.exists() and server.request_count == 0  # strict by default: refused whole, nothing written
    args += ["--skip-bad-rows"]
    result = CliRunner().invoke(app, [*args, "--out", str(out), "--no-progress"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "2 of 11 source rows not used (unreadable 1, missing_field 1)" in result.output
    assert "Source rows (loader)" in result.output and "Kept items by content type x provenance" in result.output

    report = json.loads(CliRunner().invoke(app, ["generate-report", str(out), "--json"]).stdout)
    (source_report,) = report["sources"]
    assert (source_report["n_rows"], source_report["n_kept"], source_report["n_dropped"]) == (11, 9, 2)
    assert source_report["dropped_by_reason"] == {"unreadable": 1, "missing_field": 1}
    detail = json.loads((out / "source_report.json").read_text())
    assert [(d["line"], d["reason"]) for d in next(iter(detail.values()))["dropped"]] == [
        (10, "unreadable"),
        (11, "missing_field"),
    ]
    assert report["status"] == {"kept": 7, "rejected": 1, "failed": 1, "pending": 0}
    qa = report["subsets"]["MEDMISQA"]
    assert (qa["rejected_by_reason"], qa["failed_by_reason"]) == ({"not_viable": 1}, {"gold_leak": 1})
    table3 = report["content_x_provenance"]["MEDMISQA"]
    assert sum(table3["cue_remapping"].values()) == 7 and sum(table3["threshold_corruption"].values()) == 0
    assert sorted(table3["cue_remapping"].values()) == [2, 2, 3]  # balanced frames
    difficulty = report["difficulty"]["MEDMISQA"]
    kept_difficulties = [float(len(i.question) % 10) for i in items[2:]]
    assert difficulty["n"] == 7 and difficulty["mean"] == sum(kept_difficulties) / 7
    assert sum(b["n"] for b in difficulty["histogram"]) == 7
    assert report["mislead_score"]["Overall"]["mean"] == 6.5
    assert report["problems"] == {"gold_leak": 3}
    assert report["generator"]["model"] == "g" and report["generator"]["settings"]["provenance_sampling"] == "balanced"

    page = (out / "report" / "construction.html").read_text()
    assert "Source rows (loader)" in page and "gold_leak 1" in page and "<script" not in page
    assert json.loads((out / "report" / "construction.json").read_text())["status"] == report["status"]
