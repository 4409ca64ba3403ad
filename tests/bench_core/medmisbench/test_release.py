"""The released-format writer is the inverse of the loader (letter and numeric labels, extra columns)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from bench_core.medmisbench.data import load_medmisbench
from bench_core.medmisbench.items import InjectionBundle, MCQItem
from bench_core.medmisbench.release import ReleaseRefused, release_row, write_release
from bench_core.medmisbench.run import prepare_items
from bench_core.medmisbench.targets import DEFAULT_SEED, draw_type1_target


def _item(item_id, subset, labels, **bundle):
    options = {label: f"option {label} text" for label in labels}
    sentences = {label: f"A sentence supporting option text {label} here." for label in labels}
    injection = InjectionBundle(sentences=sentences, content_type="cue_remapping", provenance="authority", **bundle)
    return MCQItem(
        id=item_id, subset=subset, question=f"{item_id}?", options=options, gold=labels[1], injection=injection
    )


def test_sample_benchmark_round_trips(sample_dir, tmp_path):
    """The copy reads back as the same items, now carrying the Type 1 target drawn once for them."""
    items = load_medmisbench(sample_dir, strict=True).items
    write_release(items, tmp_path / "copy")
    again = load_medmisbench(tmp_path / "copy", strict=True).items
    strip = {"source_file", "source_line"}

    def dumped(loaded):
        return [i.model_dump(exclude=strip) for i in sorted(loaded, key=lambda i: (i.subset, i.id))]

    with_targets = [i.model_copy(update={"type1_target": draw_type1_target(i, DEFAULT_SEED)}) for i in items]
    assert len(again) == 7 and dumped(again) == dumped(with_targets)
    assert all(i.type1_target is not None for i in again)
    # A second export of the copy writes the same files (the stored target is kept, not drawn again).
    write_release(again, tmp_path / "copy2", seed=99)
    for path in (tmp_path / "copy").glob("*.jsonl"):
        assert (tmp_path / "copy2" / path.name).read_text() == path.read_text()


def test_bench_run_uses_the_target_in_the_file_before_drawing(tmp_path):
    item = _item("t1", "PILOT", ["A", "B", "C", "D"])
    drawn = draw_type1_target(item, DEFAULT_SEED)
    stored = next(label for label in ("A", "C", "D") if label != drawn)  # a target the seed would not give
    row = {**release_row(item), "type1_target": stored}
    path = tmp_path / "PILOT.jsonl"
    path.write_text(json.dumps(row) + "\n")
    for reading in ("medrev", "authors"):
        (loaded,) = load_medmisbench(path, strict=True, reading=reading).items
        (entry,) = prepare_items([loaded], seed=12345)
        assert loaded.type1_target == entry.target == stored
        assert entry.to_json(12345)["target_source"] == "file"
    # A stored target that is not a wrong option with a misleading sentence refuses the row.
    path.write_text(json.dumps({**row, "type1_target": "B"}) + "\n")  # B is the gold option
    (issue,) = load_medmisbench(path).issues
    assert issue.field == "type1_target" and "not a wrong option" in issue.message


def test_numeric_labels_extra_columns_and_stale_files(tmp_path):
    numeric = _item("n1", "MEDMISJOURNEY", ["1", "2", "3"], generator_model="g", difficulty=3.5, mislead_score=8)
    lettered = _item("l1", "PILOT", ["A", "B"], prompt_version="p@1")
    row = release_row(numeric)
    assert (row["answer"], row["opc"], row["injection_provenance"]) == (
        "2",
        "option 3 text",
        "Authority (Guideline, Discharge Note, SOP)",
    )
    assert (row["generator_model"], row["difficulty"], row["mislead_score"]) == ("g", 3.5, 8)
    assert "prompt_version" not in row
    out = tmp_path / "bench"
    (out).mkdir()
    (out / "OLD.jsonl").write_text("{}\n")
    written = write_release([numeric, lettered], out)
    assert (
        sorted(p.name for p in out.iterdir())
        == sorted(p.name for p in written)
        == ["MEDMISJOURNEY.jsonl", "PILOT.jsonl"]
    )
    loaded = {i.id: i for i in load_medmisbench(out, strict=True).items}
    assert loaded["n1"].labels == ["1", "2", "3"] and loaded["n1"].gold == "2"
    assert loaded["n1"].injection.mislead_score == 8 and loaded["n1"].injection.generator_model == "g"
    assert loaded["l1"].injection.prompt_version == "p@1" and loaded["l1"].injection.difficulty is None


def test_labels_keep_their_columns_and_labels_the_format_cannot_hold_are_refused(tmp_path):
    gap = MCQItem(id="x", subset="S", question="q?", options={"A": "a", "C": "c"}, gold="A")
    row = release_row(gap)
    assert (row["opa"], row["opc"], "opb" in row) == ("a", "c", False)
    write_release([gap], tmp_path)
    assert load_medmisbench(tmp_path, strict=True).items[0].options == {"A": "a", "C": "c"}
    for options in ({"A": "a", "1": "b"}, {"B": "b", "A": "a"}, {"A": "a", "N": "n"}):
        item = MCQItem(id="x", subset="S", question="q?", options=options, gold="A")
        with pytest.raises(ValueError, match=r"letters A-M or numbers 1-13|not in column order"):
            release_row(item)


def test_bad_score_columns_are_reported(tmp_path):
    row = release_row(_item("s1", "PILOT", ["A", "B"]))
    path = tmp_path / "PILOT.jsonl"
    path.write_text(
        json.dumps({**row, "difficulty": "hard"}) + "\n" + json.dumps({**row, "id": "s2", "mislead_score": 12}) + "\n"
    )
    issues = load_medmisbench(path).issues
    assert [(i.line, i.field) for i in issues] == [(1, "difficulty"), (2, "mislead_score")]
    assert "not a number" in issues[0].message and "outside 0-10" in issues[1].message


def _authors_only_benchmark(folder):
    """PILOT.jsonl: line 1 a valid item; line 2 an item only the authors' reading loads (answer C with a
    placeholder in ``opc``, so gold C is no option and ``injectc`` a sentence for a missing option)."""
    folder.mkdir()
    good = release_row(_item("ok1", "PILOT", ["A", "B", "C", "D"]))
    odd = {**release_row(_item("odd2", "PILOT", ["A", "B", "C", "D"])), "answer": "C", "opc": "nan"}
    path = folder / "PILOT.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps(odd) + "\n")
    return path


def _snapshot(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_items_medrev_refuses_are_never_released_and_nothing_is_written(tmp_path):
    source = _authors_only_benchmark(tmp_path / "authors")
    items = load_medmisbench(source, strict=True, reading="authors").items
    assert [i.id for i in items] == ["ok1", "odd2"]  # the notebook evaluates both
    out = tmp_path / "release"
    write_release(items[:1], out)  # an earlier export, then a stray file
    (out / "OLD.jsonl").write_text("{}\n")
    before = _snapshot(out)
    with pytest.raises(ReleaseRefused) as refused:
        write_release(items, out)
    found = [(i.file, i.line, i.field) for i in refused.value.issues]
    assert found == [("PILOT.jsonl", 2, "answer"), ("PILOT.jsonl", 2, "injectc")]  # one per problem
    text = str(refused.value)
    assert "nothing was written" in text and "PILOT.jsonl:2: field 'answer': item 'odd2' (PILOT)" in text
    assert "gold answer 'C' is not among the options (A, B, D)" in text
    assert _snapshot(out) == before  # no subset file replaced, no stale one removed, no temporary left
    with pytest.raises(ReleaseRefused):
        write_release(items, tmp_path / "new")
    assert not (tmp_path / "new").exists()


def test_the_command_writing_a_release_exits_2_naming_file_line_and_column(tmp_path, monkeypatch):
    """``bench regenerate`` writes its reference benchmark with ``write_release``: given items read under the
    authors' protocol it stops with exit 2 and the release's message, before any generator call."""
    from bench_core.generation import sensitivity
    from review_app.cli import app as medrev

    source = _authors_only_benchmark(tmp_path / "authors")
    monkeypatch.setattr(sensitivity, "load_benchmark", lambda path: load_medmisbench(path, reading="authors").items)
    out = tmp_path / "regen"
    args = ["bench", "regenerate", "--from", str(source), "--model", "gen", "--base-url", "http://127.0.0.1:9/v1"]
    result = CliRunner().invoke(medrev, [*args, "--out", str(out), "--no-progress"], env={"COLUMNS": "250"})
    assert result.exit_code == 2, result.output
    assert "PILOT.jsonl:2: field 'answer'" in result.output and "PILOT.jsonl:2: field 'injectc'" in result.output
    assert "Traceback" not in result.output and "unexpected" not in result.output
    assert not out.exists() or not any(out.iterdir())  # not even sensitivity.json
