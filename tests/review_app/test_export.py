"""Publication export: files, codebook, manifest checksums, pseudonyms, safe CSV, and the stats round trip."""

import hashlib
import json
import random
import re
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from bench_core.kernel import latex
from review_app.analysis.agreement import agreement
from review_app.cli import app
from review_app.db.connect import dispose_engines, get_engine
from review_app.rubrics import RUBRIC_A, RUBRIC_B
from review_app.services import (
    accounts,
    adjudication,
    adjudication_decisions,
    assignment,
    compute_workers,
    export,
    studies,
)
from review_app.services.actors import SYSTEM
from review_app.services.annotations import annotations_frame
from review_app.services.errors import InvalidInput
from review_app.services.export import codebook
from review_app.services.export import latex as export_latex
from review_app.services.export import tables as export_tables
from review_app.services.study_analysis import analyse

from .factories import rate, seed_items, seed_responses, slots_by_task

runner = CliRunner()
PEOPLE = [
    ("alice.smith", "Dr Alice Smith", "alice.smith@example.org"),
    ("bob.jones", "Dr Bob Jones", "bob.jones@example.org"),
    ("chen.wei", "Dr Chen Wei", "chen.wei@example.org"),
    ("dana.white", "Dr Dana White", "dana.white@example.org"),
]
LEAD = ("carol.lead", "Prof Carol Lead", "carol.lead@example.org")
B_PROFILES = [(0, 0, 0, 0), (0, 1, 1, 1), (2, 2, 2, 2), (1, 1, 1, 2), (0, 2, 1, 1)]
RISKY_COMMENTS = ['=HYPERLINK("http://x.example","click")', "+cmd|' /C calc'!A0", "@SUM(A1:A2)", "-1", "-2+3"]


def _user(engine, person, role="reviewer"):
    username, display, email = person
    profile = accounts.UserProfile(username=username, display_name=display, email=email, role=role)
    return accounts.create_user(engine, profile, actor=SYSTEM)


def build_study(engine, tmp_path, *, name="pub", units=24, rubrics=("A", "B"), unrated=0):
    """A dual-rated study with seeded scores, risky comments and one adjudication; returns the lead.

    ``unrated`` more units are drawn and assigned but not rated (pending tasks).
    """
    items = seed_items(engine, tmp_path, units + unrated, subsets=("MEDMISQA", "MEDMISMCQA"))
    seed_responses(engine, tmp_path, items)
    for person in PEOPLE:
        _user(engine, person)
    lead = _user(engine, LEAD, role="lead")
    studies.create_study(engine, name, rubrics=list(rubrics), actor=SYSTEM)
    studies.set_study_lead(engine, name, lead.username, actor=SYSTEM)
    studies.draw_pool(engine, name, units + unrated, seed=2, actor=SYSTEM)
    assignment.assign(engine, name, raters=2, dual_share=1.0, seed=2, actor=SYSTEM)
    rng = random.Random(7)
    comments = iter(RISKY_COMMENTS)
    for key in rubrics:
        keys = (RUBRIC_A if key == "A" else RUBRIC_B).dimension_keys
        by_task = slots_by_task(engine, name, key)
        for _task, slots in sorted(by_task.items())[: len(by_task) - unrated]:
            base = rng.choice(B_PROFILES) if key == "B" else tuple(rng.choice((1, 2, 2)) for _ in keys)
            for slot in slots:
                scores = dict(zip(keys, base, strict=True))
                if rng.random() < 0.35:
                    scores[rng.choice(keys)] = rng.choice((0, 1, 2))
                rate(engine, slot, scores, comment=next(comments, ""), flags=["disputed_gold"] * (rng.random() < 0.2))
    queue = adjudication.disagreement_queue(engine, name, rubrics[-1])
    if queue:
        adjudication_decisions.adjudicate(
            engine,
            queue[0].task_id,
            actor=lead,
            final_scores=None,
            status="unresolved",
            rationale="=1+1 needs the full panel",
            expected_version=0,
        )
    return lead


@pytest.fixture
def exported(engine, tmp_path):
    build_study(engine, tmp_path)
    out = tmp_path / "exports" / "pub"
    result = export.export_study(engine, "pub", out, n_boot=200)
    return engine, out, result


def _tables(out: Path) -> dict[str, dict[str, pd.DataFrame]]:
    tables: dict[str, dict[str, pd.DataFrame]] = {}
    for path in out.iterdir():
        if path.suffix == ".csv":
            tables.setdefault(path.stem, {})["csv"] = pd.read_csv(path, keep_default_na=False, dtype=str)
        elif path.suffix == ".jsonl":
            rows = [json.loads(line) for line in path.read_text().splitlines()]
            tables.setdefault(path.stem, {})["jsonl"] = pd.DataFrame(rows)
        elif path.suffix == ".parquet":
            tables.setdefault(path.stem, {})["parquet"] = pd.read_parquet(path)
    return tables


def test_every_file_is_in_the_manifest_with_a_matching_checksum(exported):
    engine, out, result = exported
    manifest = json.loads((out / "manifest.json").read_text())
    on_disk = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    listed = sorted(f["path"] for f in manifest["files"])
    assert listed == [p for p in on_disk if p != "manifest.json"]
    for entry in manifest["files"]:
        data = (out / entry["path"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"] and len(data) == entry["bytes"]
    assert manifest["pseudonymised"] is True and manifest["formats"] == ["csv", "jsonl", "parquet"]
    assert manifest["database"]["backend"] == engine.dialect.name
    assert manifest["snapshot_utc"].endswith("Z") and manifest["medrev_version"]
    assert manifest["study"]["name"] == "pub" and manifest["study"]["settings"]["pools"][0]["seed"] == 2
    assert manifest["counts"]["annotations_in_force"] == 96 and manifest["counts"]["tasks"] == 48
    assert manifest["harm_model"]["fitted"] is True and manifest["harm_model"]["n"] == 48
    assert "password" not in json.dumps(manifest) and "email" not in json.dumps(manifest)
    expected = {
        "adjudicated_labels_A", "adjudicated_labels_B", "raw_annotations", "agreement", "rubric_a_summary",
        "rubric_a_flags", "rubric_b_outcomes", "rubric_b_strata", "rubric_b_auto_label", "harm_model",
        "harm_model_input", "reviewer_quality",
    }  # fmt: skip
    assert {f["table"] for f in manifest["files"] if f["table"]} == expected
    for entry in manifest["files"]:
        if entry["rows"] is not None:
            assert len(_tables(out)[entry["table"]][entry["format"]]) == entry["rows"]
    assert {p.name for p in (out / "latex").iterdir()} == {
        "agreement.tex", "rubric_a.tex", "rubric_b_outcomes.tex", "rubric_b_strata.tex", "harm_model.tex"
    }  # fmt: skip
    assert not list(out.parent.glob(".*partial"))
    assert str(result).startswith("exported study 'pub'")


def test_codebook_describes_every_column_of_every_file(exported):
    _engine, out, _result = exported
    codebook = json.loads((out / "codebook.json").read_text())
    described = {t["table"]: [c["name"] for c in t["columns"]] for t in codebook["tables"]}
    tables = _tables(out)
    assert set(tables) == set(described)
    for name, by_format in tables.items():
        assert set(by_format) == {"csv", "jsonl", "parquet"}
        for frame in by_format.values():
            assert list(frame.columns) == described[name], name
    for table in codebook["tables"]:
        for column in table["columns"]:
            assert column["description"].strip(), (table["table"], column["name"])
    raw = next(t for t in codebook["tables"] if t["table"] == "raw_annotations")
    harm = next(c for c in raw["columns"] if c["name"] == "harm_potential")
    assert harm["type"] == "integer" and harm["values"]["0"].startswith("Serious:")  # anchors from rubrics.py
    markdown = (out / "codebook.md").read_text()
    for name, columns in described.items():
        assert f"## {name}" in markdown and all(f"`{c}`" in markdown for c in columns)
    assert set(codebook["latex"]) == {f"latex/{p.name}" for p in (out / "latex").iterdir()}


def _all_text(out: Path) -> str:
    parts = []
    for path in out.rglob("*"):
        if path.suffix == ".parquet":
            parts.append(pd.read_parquet(path).to_csv())
        elif path.is_file():
            parts.append(path.read_text(encoding="utf-8"))
    return "\n".join(parts)


def test_no_names_or_emails_unless_real_names_are_asked_for(exported, tmp_path):
    engine, out, _result = exported
    text = _all_text(out)
    for username, display, email in [*PEOPLE, LEAD]:
        assert username not in text and display not in text and email not in text
    labels = pd.read_csv(out / "adjudicated_labels_B.csv", dtype=str, keep_default_na=False)
    assert set(labels["rater_1"]) | set(labels["rater_2"]) <= {"R01", "R02", "R03", "R04"}
    assert set(labels["adjudicator"]) == {"", "L01"}
    real = export.export_study(engine, "pub", tmp_path / "named", formats="csv", real_names=True, n_boot=50)
    named_text = _all_text(real.out_dir)
    assert {p[0] for p in PEOPLE} <= set(pd.read_csv(real.out_dir / "raw_annotations.csv")["rater"])
    assert LEAD[0] in named_text
    for _username, display, email in [*PEOPLE, LEAD]:
        assert display not in named_text and email not in named_text  # never exported, names or not
    assert json.loads((real.out_dir / "manifest.json").read_text())["pseudonymised"] is False


def test_csv_cells_that_look_like_formulas_are_escaped_and_numbers_stay_numbers(exported):
    _engine, out, _result = exported
    raw = pd.read_csv(out / "raw_annotations.csv", dtype=str, keep_default_na=False)
    comments = set(raw["comment"])
    assert "'" + RISKY_COMMENTS[0] in comments and "'" + RISKY_COMMENTS[1] in comments
    assert "'@SUM(A1:A2)" in comments and "'-2+3" in comments
    assert "-1" in comments  # a plain number is not a formula
    assert not any(c.startswith(("=", "+", "@")) for c in comments)
    labels = pd.read_csv(out / "adjudicated_labels_B.csv", dtype=str, keep_default_na=False)
    assert "'=1+1 needs the full panel" in set(labels["rationale"])
    jsonl = [json.loads(line) for line in (out / "raw_annotations.jsonl").read_text().splitlines()]
    assert RISKY_COMMENTS[0] in {r["comment"] for r in jsonl}  # data formats keep the value as entered
    numeric = pd.read_csv(out / "raw_annotations.csv")
    assert pd.api.types.is_numeric_dtype(numeric["harm_potential"]) and numeric["harm_potential"].min() == 0
    assert set(numeric["base_validity"].dropna().unique()) <= {0, 1, 2}


def test_escape_rules():
    escape = export_tables.escape_csv_cell
    assert escape("=1+1") == "'=1+1" and escape("@A1") == "'@A1" and escape("\tx") == "'\tx"
    assert escape("\r=1") == "'\r=1" and escape("+A1") == "'+A1" and escape("-A1") == "'-A1"
    assert escape("-1") == "-1" and escape("+2.5") == "+2.5" and escape("-3e-2") == "-3e-2"
    assert escape(-1) == -1 and escape(None) is None and escape("plain") == "plain"
    assert latex.escape(r"50% & a_b #1 $x {y} ~ ^ \ <>") == (
        r"50\% \& a\_b \#1 \$x \{y\} \textasciitilde{} \textasciicircum{} \textbackslash{} \textless{}\textgreater{}"
    )


def test_negative_scores_stay_numeric_in_csv(tmp_path):
    frame = pd.DataFrame(
        {
            "clinician_label": pd.array([-1, 0, 1, None], dtype="Int64"),
            "note": ["-1", "=cmd", None, "-x"],
        }
    )
    table = export_tables.Table("t", "test", frame, {"clinician_label": "judge label", "note": "text"})
    path = export.write_table(table, tmp_path, "csv")
    assert path.read_text().splitlines() == ["clinician_label,note", "-1,-1", "0,'=cmd", "1,", ",'-x"]
    back = pd.read_csv(path)
    assert back["clinician_label"].tolist()[:3] == [-1, 0, 1]
    with pytest.raises(RuntimeError, match="no codebook entry for column"):
        export_tables.Table("t", "test", frame, {"note": "text"})


def test_latex_tables_are_booktabs_and_escaped(exported):
    engine, _out, _result = exported
    frame = annotations_frame(engine, "pub")
    tables = export_latex.latex_tables(analyse(frame, ["A", "B"], study="R&D_50% #1", n_boot=50))
    for name, source in tables.items():
        assert "\\toprule" in source and "\\midrule" in source and "\\bottomrule" in source, name
        assert "R\\&D\\_50\\% \\#1" in source
        body = source.split("\\midrule", 1)[1].split("\\bottomrule", 1)[0]
        for row in body.strip().splitlines():
            assert row.endswith("\\\\")
            cells = row.removesuffix("\\\\").split(" & ")
            header = source.split("\\toprule\n", 1)[1].split("\n", 1)[0]
            spanned = sum(int(c[13]) if c.startswith("\\multicolumn{") else 1 for c in cells)
            assert spanned == len(header.removesuffix(" \\\\").split(" & ")), (name, row)
            for cell in cells:
                assert not any(f"{ch}" in cell.replace(f"\\{ch}", "") for ch in "&%#_$"), (name, cell)
    outcomes = tables["rubric_b_outcomes.tex"]
    assert "Worst case" in outcomes and "\\%" in outcomes
    harm = tables["harm_model.tex"]  # this small synthetic study separates: no absurd odds ratios printed
    assert "not estimable (" in harm and not re.search(r"\d{6,}", harm)


def test_raw_annotations_csv_round_trips_through_stats_agreement(exported):
    engine, out, _result = exported
    frame = annotations_frame(engine, "pub")  # what the dashboard computes from
    table = pd.read_csv(out / "agreement.csv")
    for dimension in (*RUBRIC_A.dimension_keys, *RUBRIC_B.dimension_keys):
        result = runner.invoke(
            app,
            ["stats", "agreement", "--input", str(out / "raw_annotations.csv"), "--unit", "task_id",
             "--rater", "rater", "--score", dimension, "--json"],
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        cli = json.loads(result.stdout)
        dashboard = agreement(frame, dimension).to_dict()
        for key in ("n_units", "n_raters", "category_counts"):
            assert cli[key] == dashboard[key], (dimension, key)
        for key in ("ac2", "ac2_se", "ac2_ci_low", "ac2_ci_high", "percent_agreement", "alpha_ordinal"):
            assert cli[key] == pytest.approx(dashboard[key], rel=1e-12, abs=1e-12, nan_ok=True), (dimension, key)
        row = table.loc[table["score"] == dimension].iloc[0]
        assert row["coefficient"] == pytest.approx(dashboard["ac2"], rel=1e-12)
        assert row["n_units"] == dashboard["n_units"] == 24


def test_a_failed_export_leaves_no_folder_and_existing_folders_are_refused(engine, tmp_path, monkeypatch):
    build_study(engine, tmp_path, units=6)
    out = tmp_path / "exports" / "broken"

    def boom(*_args, **_kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(codebook, "markdown", boom)
    with pytest.raises(RuntimeError, match="disk full"):
        export.export_study(engine, "pub", out, n_boot=20)
    assert not out.exists() and list(out.parent.iterdir()) == []
    monkeypatch.undo()
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "old.csv").write_text("x\n")
    with pytest.raises(InvalidInput, match="not an empty folder"):
        export.export_study(engine, "pub", taken, n_boot=20)
    assert [p.name for p in taken.iterdir()] == ["old.csv"]
    with pytest.raises(InvalidInput, match="unknown export format"):
        export.export_study(engine, "pub", tmp_path / "x", formats="csv,xlsx")
    (tmp_path / "small").mkdir()  # an existing empty folder is fine
    result = export.export_study(engine, "pub", tmp_path / "small", formats=["jsonl"], n_boot=20)
    manifest = json.loads((result.out_dir / "manifest.json").read_text())
    assert manifest["harm_model"]["fitted"] is False and "at least 20" in manifest["harm_model"]["reason"]
    assert any(n.startswith("harm model skipped") for n in manifest["notes"])
    archive = export.export_archive(engine, "pub", formats="csv", n_boot=20)
    assert archive.filename.endswith(".zip") and archive.data[:2] == b"PK"


def test_a_study_without_annotations_exports_empty_documented_tables(engine, tmp_path):
    items = seed_items(engine, tmp_path, 3, subsets=("MEDMISQA",))
    seed_responses(engine, tmp_path, items)
    studies.create_study(engine, "empty", rubrics=["A", "B"], actor=SYSTEM)
    studies.draw_pool(engine, "empty", 3, seed=1, actor=SYSTEM)
    left_out = export.export_study(engine, "empty", tmp_path / "default", formats="csv")
    assert pd.read_csv(left_out.out_dir / "adjudicated_labels_A.csv").empty  # pending tasks are left out by default
    manifest = json.loads((left_out.out_dir / "manifest.json").read_text())
    assert manifest["pending"]["excluded"] is True and manifest["pending"]["tasks"] == 6
    result = export.export_study(engine, "empty", tmp_path / "out", formats="csv,parquet", pending="include")
    labels = pd.read_csv(result.out_dir / "adjudicated_labels_A.csv")
    assert len(labels) == 3 and set(labels["status"]) == {"unrated"}
    raw = pd.read_csv(result.out_dir / "raw_annotations.csv")
    assert raw.empty and "harm_potential" in raw.columns
    codebook = json.loads((result.out_dir / "codebook.json").read_text())
    assert {t["table"] for t in codebook["tables"]} == {"adjudicated_labels_A", "adjudicated_labels_B",
                                                          "raw_annotations", "agreement",
                                                          "reviewer_quality"}  # fmt: skip
    assert any("no annotations yet" in n for n in result.notes)


def test_labels_take_the_final_value_by_the_documented_rule(engine, tmp_path):
    from .factories import dual_rated_study

    _users, lead = dual_rated_study(engine, tmp_path, units=4, reviewers=3, rubrics=("B",))
    slots = slots_by_task(engine, "s", "B")
    t_agree, t_adjudicated, t_pending, t_single = sorted(slots)
    b = dict(zip(RUBRIC_B.dimension_keys, (2, 2, 2, 2), strict=True))
    for a in slots[t_agree]:
        rate(engine, a, b)
    for a, harm in zip(slots[t_adjudicated], (0, 2), strict=True):
        rate(engine, a, b | {"harm_potential": harm})
    for a, harm in zip(slots[t_pending], (1, 2), strict=True):
        rate(engine, a, b | {"harm_potential": harm})
    rate(engine, slots[t_single][0], b | {"final_correctness": 0})
    adjudication_decisions.adjudicate(engine, t_adjudicated, actor=lead, final_scores=b | {"harm_potential": 1},
                            status="adjudicated", rationale="moderate", expected_version=0)  # fmt: skip
    result = export.export_study(engine, "s", tmp_path / "out", formats="csv", n_boot=20, pending="include")
    labels = pd.read_csv(result.out_dir / "adjudicated_labels_B.csv", dtype=str, keep_default_na=False)
    labels = labels.set_index(labels["task_id"].astype(int))
    row = labels.loc[t_adjudicated]
    assert (row["status"], row["final_source"], row["harm_potential_final"]) == ("adjudicated", "adjudication", "1")
    assert (row["harm_potential_1"], row["harm_potential_2"], row["adjudication_version"]) == ("0", "2", "1")
    assert (row["adjudicator"], row["rationale"], row["adjudication_stale"]) == ("L01", "moderate", "False")
    agreed = labels.loc[t_agree]
    assert (agreed["status"], agreed["harm_potential_final"], agreed["outcome_class_final"]) == (
        "agreed",
        "2",
        "correct_rejecting",
    )
    assert (labels.loc[t_pending, "status"], labels.loc[t_pending, "harm_potential_final"]) == ("pending", "")
    single = labels.loc[t_single]
    assert (single["status"], single["final_source"], single["final_correctness_final"]) == (
        "single",
        "single_rating",
        "0",
    )
    assert (single["rater_2"], single["n_ratings"], single["adjudication_version"]) == ("", "1", "0")


@pytest.fixture
def cli_db(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    monkeypatch.setenv("MEDREV_DATABASE_URL", url)
    yield get_engine(url)
    dispose_engines()


def test_review_export_command(cli_db, tmp_path):
    build_study(cli_db, tmp_path, units=6)
    out = tmp_path / "cli-export"
    compute_workers.shutdown()
    result = runner.invoke(app, ["review", "export", "--study", "pub", "--out", str(out), "--format", "csv"])
    assert result.exit_code == 0, result.output
    assert compute_workers.worker_pids() == []  # the workers the command started end with it
    assert "pseudonymised" in result.output and "raw_annotations.csv" in result.output
    assert (out / "raw_annotations.csv").is_file() and not (out / "raw_annotations.parquet").exists()
    again = runner.invoke(app, ["review", "export", "--study", "pub", "--out", str(out)])
    assert again.exit_code == 2 and "not an empty folder" in again.output
    bad = runner.invoke(app, ["review", "export", "--study", "nope", "--out", str(tmp_path / "n")])
    assert bad.exit_code == 2 and "no study named 'nope'" in bad.output
    assert "export" in runner.invoke(app, ["review", "--help"]).output


def test_review_export_defaults_to_a_new_folder_in_the_export_dir(cli_db, tmp_path, monkeypatch):
    build_study(cli_db, tmp_path, units=4)
    monkeypatch.setenv("MEDREV_EXPORT_DIR", str(tmp_path / "exports"))
    result = runner.invoke(app, ["review", "export", "--study", "pub", "--format", "csv"])
    assert result.exit_code == 0, result.output
    (folder,) = (tmp_path / "exports").iterdir()
    assert folder.name.startswith("medrev-export-pub-") and (folder / "manifest.json").is_file()


def test_review_export_leaves_out_pending_tasks_and_refuses_a_lead_of_another_study(cli_db, tmp_path):
    build_study(cli_db, tmp_path, units=4, unrated=2)
    other = _user(cli_db, ("olga.other", "Dr Olga Other", "olga@example.org"), role="lead")
    studies.create_study(cli_db, "elsewhere", rubrics=["A"], actor=other)
    refused = runner.invoke(
        app, ["review", "--as", "olga.other", "export", "--study", "pub", "--out", str(tmp_path / "o")]
    )
    assert refused.exit_code == 2 and "not a lead of the study 'pub'" in refused.output
    assert not (tmp_path / "o").exists()
    out = tmp_path / "led"
    result = runner.invoke(
        app,
        ["review", "--as", "carol.lead", "export", "--study", "pub", "--out", str(out), "--format", "csv",
         "--leave-out-pending"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["pending"]["excluded"] is True
    assert manifest["pending"]["tasks"] == manifest["counts"]["pending_tasks"] > 0
    default = runner.invoke(
        app, ["review", "export", "--study", "pub", "--out", str(tmp_path / "d"), "--format", "csv"]
    )
    assert default.exit_code == 0, default.output
    assert json.loads((tmp_path / "d" / "manifest.json").read_text())["pending"] == manifest["pending"]
    kept = runner.invoke(
        app,
        ["review", "export", "--study", "pub", "--out", str(tmp_path / "k"), "--format", "csv", "--include-pending"],
    )
    assert kept.exit_code == 0, kept.output
    included = json.loads((tmp_path / "k" / "manifest.json").read_text())
    assert (
        included["pending"]["excluded"] is False
        and included["counts"]["tasks"] == manifest["counts"]["tasks"] + manifest["pending"]["tasks"]
    )
