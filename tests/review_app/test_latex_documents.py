"""Every kind of LaTeX table medrev writes compiles with pdflatex in one standalone document.

The tables are built from real outputs: a MedMisBench report and a with/without-tools comparison
from runs on the loopback server, a hand-built report whose model names carry every special
character and Chinese, and the publication export of a small dual-rated review study whose name does
too. The document is compiled with ``pdflatex -halt-on-error``; any LaTeX error fails the test.
CI installs texlive (``.ci/run``) and sets ``MEDREV_REQUIRE_LATEX=1``, so there it cannot be skipped.
"""

from __future__ import annotations

import os
import shutil

import pytest
from typer.testing import CliRunner

from bench_core.cli.main import app as bench_app
from bench_core.kernel import latex
from bench_core.medmisbench.metrics import medmisbench_report
from bench_core.medmisbench.report import latex_tables as report_tables
from bench_core.medmisbench.run import read_run_data
from bench_core.mitigation.metrics import compare_runs
from bench_core.mitigation.report import latex_tables as comparison_tables
from review_app.services import export
from tests.bench_core.medmisbench.test_metrics import _run_data
from tests.bench_core.mitigation.harness_agent import CORPUS_DIR, ITEMS_DIR, EvidenceAgent
from tests.fakes.openai_server import FakeOpenAIServer

from .test_export import build_study

HC_TABLES = {"accuracy_macro_f1", "failure_modes", "mcnemar", "macro_f1_by_context_quartile", "model_mcnemar"}

NASTY = r"R&D_50% #1 $x$ {y} ~z^ \path <a|b> --opt [beta] 模型（中文） café ≥5µg"
BENCH_REPORT_TABLES = {
    "clean_accuracy", "type1_accuracy", "type2_accuracy", "type1_asr", "type1_tasr", "type2_asr",
    "asr_by_provenance", "asr_by_content",
}  # fmt: skip
COMPARISON_TABLES = {"mitigation_accuracy", "mitigation_attack", "mitigation_tool_use", "mitigation_flips"}
EXPORT_TABLES = {"agreement.tex", "rubric_a.tex", "rubric_b_outcomes.tex", "rubric_b_strata.tex", "harm_model.tex"}

needs_pdflatex = pytest.mark.skipif(
    shutil.which("pdflatex") is None and not os.environ.get("MEDREV_REQUIRE_LATEX"),
    reason="pdflatex not installed (apt-get install texlive-latex-base texlive-latex-recommended)",
)


def _bench_tables(tmp_path) -> dict[str, str]:
    """Benchmark report and comparison tables from runs on the loopback server, plus a hand-built report."""
    plain, tools = tmp_path / "plain", tmp_path / "tools"
    with FakeOpenAIServer(EvidenceAgent()) as server:
        for out, extra in ((plain, ["--label", NASTY]), (tools, ["--label", NASTY, "--tools", f"local:{CORPUS_DIR}"])):
            args = ["run", "medmisbench", "--data", str(ITEMS_DIR), "--model", "agent", "--base-url", server.url]
            result = CliRunner().invoke(bench_app, [*args, "--out", str(out), "--no-progress", *extra])
            assert result.exit_code == 0, result.output
    tables: dict[str, str] = {}
    run_report = report_tables(medmisbench_report(read_run_data(plain)))
    assert set(run_report) == BENCH_REPORT_TABLES
    tables.update({f"run/{k}": v for k, v in run_report.items()})
    two_models = report_tables(medmisbench_report(_run_data(models=("gpt_5.4 100% & co", NASTY))))
    tables.update({f"hand/{k}": v for k, v in two_models.items()})
    comparison = comparison_tables(compare_runs(tools, plain))
    assert set(comparison) == COMPARISON_TABLES
    tables.update({f"compare/{k}": v for k, v in comparison.items()})
    tables.update(_healthcontradict_and_trojan_tables())
    return tables


def _healthcontradict_and_trojan_tables() -> dict[str, str]:
    """HealthContradict and retracted-paper report tables, with model names full of special characters."""
    from bench_core.healthcontradict import report as report_healthcontradict
    from bench_core.healthcontradict.items import HCInstance
    from bench_core.healthcontradict.metrics import healthcontradict_report
    from bench_core.healthcontradict.run import HCRunData
    from bench_core.trojan import report as report_trojan
    from bench_core.trojan.metrics import trojan_report
    from bench_core.trojan.traces import TrojanRunData
    from tests.bench_core.healthcontradict.test_metrics import GOLD, TOPIC, _predictions
    from tests.bench_core.trojan.test_report import _trace

    instances = [
        HCInstance(instance_id=f"i{k}", topic_id=TOPIC[k], query="Q?", query_stance=GOLD[k], doc_a="a", doc_b="b")
        for k in range(8)
    ]
    hc = healthcontradict_report(HCRunData(instances, _predictions(NASTY) + _predictions("m_2 & co"), [], 0))
    hc_tables = report_healthcontradict.latex_tables(hc)
    assert set(hc_tables) == HC_TABLES
    traces = [_trace(f"r{k}", NASTY, (-1, 0, 1)[k % 3], "scored") for k in range(9)]
    traces.append(_trace("f0", NASTY, None, "flagged"))
    trojan = report_trojan.latex_tables(trojan_report(TrojanRunData([], traces, {})))
    return {f"healthcontradict/{k}": v for k, v in hc_tables.items()} | {f"trojan/{k}": v for k, v in trojan.items()}


def _judge_audit_tables() -> dict[str, str]:
    """A judge-audit study's LaTeX (agreement with the judge, confusion table), the study name full of specials."""
    import pandas as pd

    from review_app.analysis.agreement import agreement
    from review_app.services.export.latex import judge_audit_latex
    from review_app.services.judge_audit import LABELS, JudgeAuditSummary

    judge, clinician = [-1, -1, 0, 0, 1, 1, 1, 0], [-1, 0, 0, 0, 1, 1, -1, 0]
    long = pd.DataFrame(
        {"unit": list(range(8)) * 2, "who": ["judge"] * 8 + ["clinician"] * 8, "label": judge + clinician}
    )
    result = agreement(long, "label", unit="unit", rater="who", weights="identity", categories=[-1, 0, 1])
    names = list(LABELS.values())
    confusion = pd.crosstab(
        pd.Categorical([LABELS[v] for v in clinician], categories=names),
        pd.Categorical([LABELS[v] for v in judge], categories=names),
        dropna=False,
    )
    confusion = pd.DataFrame(confusion.to_numpy(), index=pd.Index(names, name="clinician \\ judge"), columns=names)
    summary = JudgeAuditSummary(NASTY, 8, 1, result, 6 / 8, confusion, pd.DataFrame())
    tables = judge_audit_latex(summary)
    assert set(tables) == {"judge_audit.tex", "judge_audit_confusion.tex"}
    return {f"judge/{k}": v for k, v in tables.items()}


@needs_pdflatex
@pytest.mark.slow
def test_every_latex_table_compiles_in_one_document(sqlite_engine, tmp_path):
    tables = _bench_tables(tmp_path)
    build_study(sqlite_engine, tmp_path, name=NASTY)
    out = tmp_path / "export"
    export.export_study(sqlite_engine, NASTY, out, n_boot=50)
    exported = {p.name: p.read_text(encoding="utf-8") for p in (out / "latex").iterdir()}
    assert set(exported) == EXPORT_TABLES
    tables.update({f"export/{k}": v for k, v in exported.items()})
    tables.update(_judge_audit_tables())

    document = latex.standalone_document(tables, title=f"Every medrev table: {NASTY}")
    assert "\\usepackage{CJKutf8}" in document  # the Chinese in the names is typeset, not dropped
    assert "R\\&D\\_50\\% \\#1" in tables["export/agreement.tex"] and "R\\&D\\_50\\%" in tables["run/type1_asr"]
    result = latex.compile_document(document, tmp_path / "latex")
    assert result.ok, "\n".join(result.errors) + "\n" + result.log[-4000:]
    assert result.missing_characters == []
    assert result.pdf is not None and result.pdf.stat().st_size > 10_000
