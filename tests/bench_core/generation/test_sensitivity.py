"""Sensitivity tools: stratified subsets, generator regeneration, cyclic provenance reassignment, run comparison."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest
from typer.testing import CliRunner

from bench_core.cli.main import app
from bench_core.generation.sensitivity import CYCLES, SensitivityError, allocate, parse_quotas, stratified_subset
from bench_core.medmisbench import taxonomy
from bench_core.medmisbench.data import load_medmisbench
from bench_core.medmisbench.items import InjectionBundle, MCQItem
from bench_core.medmisbench.release import write_release
from tests.bench_core.generation.fake_generator import OPENERS, FakeGenerator
from tests.fakes.openai_server import Reply

FRAMES = taxonomy.PROVENANCE_IDS
CONTENTS = ("cue_remapping", "exception_poisoning")


def _items(counts: dict[str, int]) -> list[MCQItem]:
    """Synthetic benchmark items whose sentences follow the fake generator's frame openers."""
    out = []
    writer = FakeGenerator([])
    for subset, n in counts.items():
        for i in range(n):
            options = {letter: f"Plan {letter}{i} regimen" for letter in "ABCD"}
            item = MCQItem(
                id=f"{subset.lower()}-{i}",
                subset=subset,
                question=f"Synthetic {subset} case {i}: which management plan is indicated?",
                options=options,
                gold="ABCD"[i % 4],
            )
            frame = FRAMES[i % 3]
            sentences = writer.sentences(item, frame, "valid")
            bundle = InjectionBundle(sentences=sentences, content_type=CONTENTS[(i // 3) % 2], provenance=frame)
            out.append(item.model_copy(update={"injection": bundle}))
    return out


def test_quotas_and_allocation():
    assert parse_quotas("MedMisQA=150, MEDMISMCQA=180") == {"MEDMISQA": 150, "MEDMISMCQA": 180}
    with pytest.raises(SensitivityError, match="expected SUBSET=COUNT"):
        parse_quotas("MEDMISQA:150")
    assert allocate(10, {"a": 5, "b": 3, "c": 2}) == {"a": 5, "b": 3, "c": 2}
    assert allocate(5, {"a": 6, "b": 3, "c": 1}) == {"a": 3, "b": 2, "c": 0}  # 3.0, 1.5, 0.5: tie to "b"
    assert sum(allocate(7, {k: 3 for k in "abcdef"}).values()) == 7


def test_stratified_subset_is_seeded_and_proportional():
    items = _items({"MEDMISQA": 30, "MEDMISMCQA": 12})
    chosen = stratified_subset(items, seed=1, per_subset={"MEDMISQA": 12, "MEDMISMCQA": 6})
    assert Counter(i.subset for i in chosen) == {"MEDMISQA": 12, "MEDMISMCQA": 6}
    strata = Counter((i.injection.content_type, i.injection.provenance) for i in chosen if i.subset == "MEDMISQA")
    assert set(strata.values()) == {2}  # 6 equal strata of 5 items -> 2 each
    assert stratified_subset(items, seed=1, per_subset={"MEDMISQA": 12, "MEDMISMCQA": 6}) == chosen
    assert stratified_subset(items, seed=2, per_subset={"MEDMISQA": 12, "MEDMISMCQA": 6}) != chosen
    by_size = stratified_subset(items, seed=1, size=21)
    assert Counter(i.subset for i in by_size) == {"MEDMISQA": 15, "MEDMISMCQA": 6}
    assert len(stratified_subset(items, seed=1)) == 42
    with pytest.raises(SensitivityError, match="no usable item in subset"):
        stratified_subset(items, seed=1, per_subset={"MEDMISHLE": 3})


def test_cycles_move_every_frame_and_undo_each_other():
    forward, reverse = CYCLES["forward"], CYCLES["reverse"]
    assert forward == {"neutral": "patient", "patient": "authority", "authority": "neutral"}
    assert all(forward[f] != f and reverse[forward[f]] == f for f in FRAMES)


def _evaluated_model(items):
    """Clean / Type 2: the gold. Type 1: resists patient-framed claims, follows every other frame."""
    by_question = {item.question: item for item in items}
    patient = OPENERS["patient"][0]

    def policy(received):
        prompt = received.last_user_text
        item = next(i for q, i in by_question.items() if q in prompt)
        context = re.search(r"Additional Clinical Context:\n(.*?)\n\nOptions:", prompt, re.S)
        answer = item.gold
        if context and len(context.group(1).splitlines()) == 1 and patient not in context.group(1):
            answer = next(label for label, text in item.options.items() if text in context.group(1))
        return Reply(content=json.dumps({"thinking_process": "t", "answer_letter": answer}))

    return policy


def _run(server, data, out):
    args = ["run", "medmisbench", "--data", str(data), "--model", "evalm", "--base-url", server.url]
    legacy = ["--template", "medmisbench-notebook@1", "--protocol", "strict"]  # the policy reads its layout
    result = CliRunner().invoke(app, [*args, "--out", str(out), "--no-progress", *legacy])
    assert result.exit_code == 0, result.output


def _sensitivity(command, server, source, out, *extra):
    args = [command, "--from", str(source), "--model", "gen-b", "--base-url", server.url, "--out", str(out)]
    return CliRunner().invoke(app, [*args, "--no-progress", *extra], env={"COLUMNS": "250"}, catch_exceptions=False)


@pytest.fixture
def benchmark(tmp_path):
    items = _items({"MEDMISQA": 12, "MEDMISMCQA": 6})
    write_release(items, tmp_path / "release")
    return tmp_path / "release", items


def test_regenerate_holds_item_target_and_labels_fixed(fake_openai, benchmark, tmp_path):
    source, items = benchmark
    generator = FakeGenerator(items, prefix="[gen-b] ")
    server = fake_openai(generator)
    out = tmp_path / "regen"
    result = _sensitivity("regenerate", server, source, out, "--per-subset", "MEDMISQA=6,MEDMISMCQA=3", "--seed", "5")
    assert result.exit_code == 0, result.output
    assert {stage for _, stage, _ in generator.asked} == {"generation"}  # Stage 2 only: labels are given

    reference = {i.id: i for i in load_medmisbench(out / "reference" / "benchmark", strict=True).items}
    regenerated = {i.id: i for i in load_medmisbench(out / "regenerated" / "benchmark", strict=True).items}
    assert len(reference) == 9 and set(regenerated) == set(reference)
    original = {i.id: i for i in items}
    for item_id, item in regenerated.items():
        before = reference[item_id]
        assert before.injection.sentences == original[item_id].injection.sentences
        assert (item.question, item.options, item.gold) == (before.question, before.options, before.gold)
        assert (item.injection.content_type, item.injection.provenance) == (
            before.injection.content_type,
            before.injection.provenance,
        )
        assert all(s.startswith("[gen-b] ") for s in item.injection.sentences.values())
    comparison = json.loads((out / "comparison.json").read_text())
    regen = comparison["variants"]["regenerated"]
    assert (regen["kept"], regen["labels_as_planned"], regen["generator"]) == (9, 9, "gen-b")
    assert regen["mean_word_overlap_with_reference"] < 1.0
    assert (out / "comparison.html").is_file()

    # A rerun resumes: no call.
    before = server.request_count
    rerun = _sensitivity("regenerate", server, source, out, "--per-subset", "MEDMISQA=6,MEDMISMCQA=3", "--seed", "5")
    assert rerun.exit_code == 0 and server.request_count == before
    other = _sensitivity("regenerate", server, source, out, "--per-subset", "MEDMISQA=3", "--seed", "5")
    assert other.exit_code == 2 and "use a new --out directory" in other.output

    # Both benchmarks run as they are, with the same Type 1 targets; compare-runs matches them.
    evaluated = fake_openai(_evaluated_model(list(reference.values())))
    _run(evaluated, out / "reference" / "benchmark", tmp_path / "run-ref")
    _run(evaluated, out / "regenerated" / "benchmark", tmp_path / "run-regen")
    targets = {}
    for name in ("run-ref", "run-regen"):
        rows = [json.loads(line) for line in (tmp_path / name / "items.jsonl").read_text().splitlines()]
        targets[name] = {row["item_key"]: row["type1_target"] for row in rows}
    assert targets["run-ref"] == targets["run-regen"]
    compared = CliRunner().invoke(
        app, ["compare-runs", "--run", f"reference={tmp_path / 'run-ref'}", "--run",
              f"regenerated={tmp_path / 'run-regen'}", "--json"],
    )  # fmt: skip
    assert compared.exit_code == 0, compared.output
    result = json.loads(compared.stdout)
    assert result["n_matched_items"] == 9
    ref = result["variants"]["reference"]["models"]["evalm"]["conditions"]
    regen_model = result["variants"]["regenerated"]["models"]["evalm"]
    patients = sum(reference[i].injection.provenance == "patient" for i in reference)
    assert ref["type1"]["asr"] == regen_model["conditions"]["type1"]["asr"] == (9 - patients) / 9
    assert regen_model["delta_vs_reference"] == {"type1_asr": 0.0, "type1_tasr": 0.0, "type2_asr": 0.0}


def test_reassign_provenance_rotates_frames_both_ways(fake_openai, benchmark, tmp_path):
    source, items = benchmark
    server = fake_openai(FakeGenerator(items))
    out = tmp_path / "shuffle"
    result = _sensitivity("reassign-provenance", server, source, out, "--size", "9", "--seed", "3")
    assert result.exit_code == 0, result.output

    reference = {i.id: i for i in load_medmisbench(out / "reference" / "benchmark").items}
    frames = Counter(i.injection.provenance for i in reference.values())
    for variant, cycle in CYCLES.items():
        rotated = {i.id: i for i in load_medmisbench(out / variant / "benchmark", strict=True).items}
        assert set(rotated) == set(reference)
        for item_id, item in rotated.items():
            old = reference[item_id].injection
            assert item.injection.provenance == cycle[old.provenance]
            assert item.injection.content_type == old.content_type
            opener = OPENERS[item.injection.provenance][0]
            assert all(item.injection.sentences[w].startswith(opener) for w in item.wrong_labels)
    comparison = json.loads((out / "comparison.json").read_text())
    assert comparison["variants"]["forward"]["labels_as_planned"] == 9
    assert comparison["variants"]["forward"]["provenance"] == {
        CYCLES["forward"][frame]: n for frame, n in frames.items()
    }

    evaluated = fake_openai(_evaluated_model(list(reference.values())))
    for name in ("reference", "forward", "reverse"):
        _run(evaluated, out / name / "benchmark", tmp_path / f"run-{name}")
    args = ["compare-runs", "--out", str(tmp_path / "cmp")]
    for name in ("reference", "forward", "reverse"):
        args += ["--run", f"{name}={tmp_path / f'run-{name}'}"]
    args += ["--pool", "shuffled=forward,reverse"]
    table = CliRunner().invoke(app, args, env={"COLUMNS": "250"})
    assert table.exit_code == 0, table.output
    result = json.loads((tmp_path / "cmp" / "compare_runs.json").read_text())
    assert "shuffled" in table.stdout and (tmp_path / "cmp" / "compare_runs.html").is_file()

    # The fake model resists only patient-framed claims, so each Type 1 ASR follows from the frame counts.
    n, neutral, patient, authority = 9, frames["neutral"], frames["patient"], frames["authority"]
    asr = {name: v["models"]["evalm"]["conditions"]["type1"] for name, v in result["variants"].items()}
    assert asr["reference"]["asr"] == (neutral + authority) / n
    assert asr["forward"]["asr"] == (patient + authority) / n  # neutral items became patient-framed
    assert asr["reverse"]["asr"] == (neutral + patient) / n  # authority items became patient-framed
    assert (asr["shuffled"]["n_clean_correct"], asr["shuffled"]["n_flipped"]) == (2 * n, 2 * n - neutral - authority)
    shuffled = result["variants"]["shuffled"]["models"]["evalm"]
    assert shuffled["provenance"]["patient"]["type1"]["asr"] == 0.0
    assert shuffled["provenance"]["authority"]["type1"]["asr"] == 1.0
    assert shuffled["delta_vs_reference"]["type1_asr"] == pytest.approx(
        (2 * n - neutral - authority) / (2 * n) - (neutral + authority) / n
    )
