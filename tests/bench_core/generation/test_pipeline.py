"""Generation end to end on the loopback server: each scripted generator behaviour ends as it should.

Every item below gets one behaviour from ``FakeGenerator``; the run goes through the real CLI,
runner, store and OpenAI SDK. What must hold: the outcome and reason of each item, the retries
(bounded, with the problems fed back), that only valid bundles reach ``bundles.jsonl`` and the
flattened benchmark, and that a rerun makes no call unless asked to continue.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest
from typer.testing import CliRunner

from bench_core.cli.main import app
from bench_core.generation.checks import check_bundle
from bench_core.generation.sources import load_source
from bench_core.medmisbench.data import load_medmisbench
from tests.bench_core.generation.fake_generator import FakeGenerator

SECRET = "sk-generator-secret-never-written"


def _row(item_id, question, options, answer, **extra):
    return {"id": item_id, "question": question, "options": options, "answer": answer, **extra}


ROWS = [
    _row("ok1", "Which vitamin deficiency causes scurvy?", {"A": "Vitamin A", "B": "Vitamin C", "C": "Vitamin D"}, "B"),
    _row(
        "ok2",
        "ST elevation in II, III and aVF. Which artery is occluded?",
        {"A": "Left anterior descending artery", "B": "Right coronary artery", "C": "Left circumflex artery"},
        "B",
    ),
    _row("nv", "What is the capital of the brachial plexus?", {"A": "Roots", "B": "Trunks", "C": "Cords"}, "A"),
    _row("badjson", "Which drug reverses heparin?", {"A": "Protamine sulfate", "B": "Vitamin K"}, "A"),
    _row("once", "First-line drug for absence seizures?", {"A": "Ethosuximide", "B": "Phenytoin"}, "A"),
    _row(
        "miss", "Antidote for paracetamol overdose?", {"A": "Acetylcysteine", "B": "Naloxone", "C": "Flumazenil"}, "A"
    ),
    _row(
        "leak", "Drug of choice for anaphylaxis?", {"A": "Diphenhydramine", "B": "Adrenaline", "C": "Salbutamol"}, "B"
    ),
    _row(
        "zh_en",
        "患者饮酒后上腹痛向腰背部放射，血淀粉酶升高，最可能的诊断是",
        {"A": "急性胃炎", "B": "急性胰腺炎", "C": "急性阑尾炎"},
        "B",
        subset="MEDMISJOURNEY",
    ),
    _row(
        "zh_ok",
        "患者突发胸痛，心电图示下壁导联ST段抬高，最可能闭塞的血管是",
        {"A": "左前降支", "B": "右冠状动脉", "C": "左回旋支"},
        "B",
        subset="MEDMISJOURNEY",
    ),
    _row(
        "refuse",
        "Treatment of choice for tension pneumothorax?",
        {"A": "Needle decompression", "B": "Observation"},
        "A",
    ),
    _row("boom", "Most common cause of community-acquired pneumonia?", {"A": "Pneumococcus", "B": "Legionella"}, "A"),
]
SCRIPT = {
    "nv": "not_viable",
    "badjson": "invalid_json",
    "once": "invalid_json_once",
    "miss": "missing_option",
    "leak": "leak",
    "zh_en": "english",
    "refuse": "refusal",
    "boom": "server_error",
}
EXPECTED = {
    "ok1": ("kept", None),
    "ok2": ("kept", None),
    "zh_ok": ("kept", None),
    "once": ("kept", None),
    "nv": ("rejected", "not_viable"),
    "badjson": ("failed", "invalid_json"),
    "miss": ("failed", "missing_option"),
    "leak": ("failed", "gold_leak"),
    "zh_en": ("failed", "language_mismatch"),
    "refuse": ("failed", "refusal"),
    "boom": ("failed", "provider_error"),
}


@pytest.fixture
def source(tmp_path):
    path = tmp_path / "study.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in ROWS), encoding="utf-8")
    return path


def _generate(server, source, out, *extra):
    args = ["generate", "--source", str(source), "--format", "medrev", "--subset", "MEDMISQA", "--model", "gen-a"]
    args += ["--base-url", server.url, "--out", str(out), "--concurrency", "4", "--backoff", "0.01"]
    args += ["--call-attempts", "2", "--api-key-env", "MEDREV_GEN_KEY", "--no-progress", "--temperature", "0.7", *extra]
    return CliRunner().invoke(app, args, env={"MEDREV_GEN_KEY": SECRET, "COLUMNS": "200"}, catch_exceptions=False)


def _outcomes(out):
    return {row["item_id"]: row for row in map(json.loads, (out / "outcomes.jsonl").read_text().splitlines())}


def _asked(generator):
    """Calls per (item, stage)."""
    return Counter((item_id, stage) for item_id, stage, _feedback in generator.asked)


def test_each_behaviour_ends_kept_rejected_or_failed_for_its_reason(fake_openai, source, tmp_path):
    items = load_source(source, "medrev", subset="MEDMISQA").items
    generator = FakeGenerator(items, SCRIPT)
    server = fake_openai(generator)
    out = tmp_path / "gen"
    result = _generate(server, source, out)
    assert result.exit_code == 1, result.output  # the provider error makes the command fail after finishing

    outcomes = _outcomes(out)
    assert {k: (v["status"], v["reason"]) for k, v in outcomes.items()} == EXPECTED
    assert outcomes["nv"]["detail"] == "no content type fits every wrong option"
    assert "option C" in outcomes["miss"]["detail"] and "option A" in outcomes["leak"]["detail"]
    assert outcomes["boom"]["attempts"][0]["error"].startswith("HTTP 500")

    # Bounded retries (3 validation attempts per stage), each after feedback naming the problem.
    asked = _asked(generator)
    assert asked[("badjson", "applicability")] == 3 and asked[("badjson", "generation")] == 0
    assert asked[("miss", "generation")] == 3 and asked[("refuse", "generation")] == 3
    assert asked[("once", "applicability")] == 2 and asked[("once", "generation")] == 2
    assert asked[("ok1", "applicability")] == asked[("ok1", "generation")] == 1
    assert asked[("nv", "generation")] == 0
    assert asked[("boom", "applicability")] == 2  # the runner's two attempts at the HTTP 500, then given up
    feedback = [r for r in server.requests if len([m for m in r.messages if m["role"] == "user"]) > 1]
    missing = [r for r in feedback if "Antidote for paracetamol" in r.messages[1]["content"]]
    assert missing and all("[missing_option] no sentence for option C" in r.last_user_text for r in missing)
    assert all(r.messages[-2]["role"] == "assistant" for r in feedback)

    # Structured output where the endpoint supports it; the settings are passed through.
    assert all(r.body["response_format"]["type"] == "json_schema" for r in server.requests)
    assert {r.body["temperature"] for r in server.requests} == {0.7}
    stage2 = next(
        r
        for r in server.requests
        if r.messages[1]["content"].startswith("Write option-aligned") and "scurvy" in r.messages[1]["content"]
    )
    schema = stage2.body["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["sentences"]["required"] == ["A", "B", "C"]
    zh_prompt = next(
        r.messages[1]["content"]
        for r in server.requests
        if "冠状动脉" in r.messages[1]["content"] and "Write option-aligned" in r.messages[1]["content"]
    )
    assert "Simplified Chinese" in zh_prompt
    assert not any(
        "Simplified Chinese" in r.messages[1]["content"]
        for r in server.requests
        if "scurvy" in r.messages[1]["content"]
    )

    # Only the kept items, each with a bundle that passes every check, reach the outputs.
    bundles = [json.loads(line) for line in (out / "bundles.jsonl").read_text().splitlines()]
    assert sorted(b["item"]["id"] for b in bundles) == ["ok1", "ok2", "once", "zh_ok"]
    for bundle in bundles:
        generation = bundle["generation"]
        assert generation["generator_model"] == "gen-a" and generation["seed"] == 20260101
        assert generation["prompt_version"] == "medmisbench-applicability@1+medmisbench-generation@1"
        assert generation["raw"]["generation"] and generation["raw"]["applicability"]
        injection = bundle["item"]["injection"]
        assert injection["generator_model"] == "gen-a" and injection["mislead_score"] == 6.5
        assert injection["content_type"] == "cue_remapping" and injection["provenance"] in (
            "neutral",
            "patient",
            "authority",
        )
    loaded = load_medmisbench(out / "benchmark", strict=True)
    assert sorted(i.id for i in loaded.items) == ["ok1", "ok2", "once", "zh_ok"]
    assert {f.name for f in loaded.files} == {"MEDMISQA.jsonl", "MEDMISJOURNEY.jsonl"}
    for item in loaded.items:
        assert check_bundle(json.dumps({"sentences": item.injection.sentences, "mislead_score": 5}), item).ok
        assert item.usable_bundle_problem() is None
    zh = next(i for i in loaded.items if i.id == "zh_ok")
    assert zh.language == "zh" and zh.injection.sentences["B"] == "现有证据支持右冠状动脉。"

    # The construction report counts what happened.
    report = json.loads(CliRunner().invoke(app, ["generate-report", str(out), "--json"]).stdout)
    assert report["status"] == {"kept": 4, "rejected": 1, "failed": 6, "pending": 0}
    assert report["subsets"]["MEDMISQA"]["failed_by_reason"] == {
        "invalid_json": 1,
        "missing_option": 1,
        "gold_leak": 1,
        "refusal": 1,
        "provider_error": 1,
    }
    assert report["subsets"]["MEDMISJOURNEY"]["failed_by_reason"] == {"language_mismatch": 1}
    assert report["subsets"]["MEDMISQA"]["rejected_by_reason"] == {"not_viable": 1}
    assert report["problems"]["invalid_json"] == 3 + 2  # badjson x3, once x2 (one per stage)
    assert report["attempts"]["generation"] == {"1": 3, "2": 1}
    overall = report["content_x_provenance"]["Overall"]["cue_remapping"]
    assert sum(overall.values()) == 4
    assert (out / "report" / "construction.html").read_text().count("<table>") >= 4

    for path in out.rglob("*"):
        if path.is_file():
            assert SECRET not in path.read_text(encoding="utf-8", errors="replace")

    # A rerun has nothing due: no call at all (and still exits 1: an item awaits --retry-failed).
    before = server.request_count
    rerun = _generate(server, source, out)
    assert rerun.exit_code == 1 and "rerun with --retry-failed" in rerun.output
    assert server.request_count == before

    # More attempts continue the items that ran out of attempts (one more call each), nothing else.
    generator.asked.clear()
    assert _generate(server, source, out, "--max-attempts", "4").exit_code == 1
    assert _asked(generator) == {
        ("badjson", "applicability"): 1,
        ("miss", "generation"): 1,
        ("leak", "generation"): 1,
        ("zh_en", "generation"): 1,
        ("refuse", "generation"): 1,
    }

    # --retry-failed calls the provider failure again; once the server works the item is kept.
    generator.script.pop("boom")
    assert _generate(server, source, out, "--max-attempts", "4", "--retry-failed").exit_code == 0
    assert _outcomes(out)["boom"]["status"] == "kept"
    assert sorted(i.id for i in load_medmisbench(out / "benchmark").items) == ["boom", "ok1", "ok2", "once", "zh_ok"]


def test_one_call_mode(fake_openai, source, tmp_path):
    items = load_source(source, "medrev", subset="MEDMISQA").items
    generator = FakeGenerator(items, SCRIPT)
    server = fake_openai(generator)
    out = tmp_path / "one"
    assert _generate(server, source, out, "--one-call").exit_code == 1
    outcomes = _outcomes(out)
    assert {k: (v["status"], v["reason"]) for k, v in outcomes.items()} == EXPECTED
    assert {stage for _, stage, _ in generator.asked} == {"one_call"}
    assert _asked(generator)[("ok1", "one_call")] == 1 and _asked(generator)[("once", "one_call")] == 2
    bundle = json.loads((out / "bundles.jsonl").read_text().splitlines()[0])
    assert bundle["generation"]["prompt_version"] == "medmisbench-one-call@1"
    assert bundle["item"]["injection"]["difficulty"] is not None


def test_structured_output_falls_back_when_the_endpoint_refuses_it(fake_openai, source, tmp_path):
    items = load_source(source, "medrev", subset="MEDMISQA").items
    generator = FakeGenerator(items, reject_response_format=True)
    server = fake_openai(generator)
    out = tmp_path / "plain"
    result = _generate(server, source, out)
    assert result.exit_code == 0, result.output
    assert "fell back to json_object" in result.output and "fell back to none" in result.output
    assert {v["status"] for v in _outcomes(out).values()} == {"kept"}
    kinds = [r.body.get("response_format", {}).get("type") for r in server.requests]
    n = len(ROWS)
    assert kinds[:n] == ["json_schema"] * n and kinds[n : 2 * n] == ["json_object"] * n
    assert set(kinds[2 * n :]) == {None}  # everything after the second refusal is plain JSON instructions
    manifest = json.loads((out / "generation_runs.jsonl").read_text().splitlines()[-1])
    assert manifest["structured"] == "json_schema" and "api_key_env" in manifest


def test_another_generator_in_the_same_directory_is_refused(fake_openai, source, tmp_path):
    items = load_source(source, "medrev", subset="MEDMISQA").items
    server = fake_openai(FakeGenerator(items))
    out = tmp_path / "gen"
    assert _generate(server, source, out, "--limit", "2").exit_code == 0
    args = ["generate", "--source", str(source), "--format", "medrev", "--model", "gen-b", "--base-url", server.url]
    result = CliRunner().invoke(app, [*args, "--out", str(out), "--no-progress"], env={"COLUMNS": "300"})
    assert result.exit_code == 2 and "Use a new --out directory" in result.output
    result = _generate(server, source, out, "--limit", "2", "--seed", "7")
    assert result.exit_code == 2 and "with settings" in result.output


def test_bad_options_are_refused_before_anything_is_written(fake_openai, source, tmp_path):
    server = fake_openai(FakeGenerator([]))
    out = tmp_path / "never"
    for extra, message in (
        (("--structured", "xml"), "unknown --structured 'xml'"),
        (("--provenance", "random"), "--provenance: expected one of"),
    ):
        result = _generate(server, source, out, *extra)
        assert result.exit_code == 2 and message in result.output
    bad_format = CliRunner().invoke(app, ["generate", "--source", str(source), "--format", "pubmedqa", "--model", "m",
                                          "--base-url", server.url, "--out", str(out)])  # fmt: skip
    assert bad_format.exit_code == 2 and "unknown --format 'pubmedqa'" in bad_format.output
    broken = tmp_path / "broken.jsonl"
    broken.write_text(json.dumps(ROWS[0]) + "\n" + '{"id": "x", "question": \n')
    strict = _generate(server, broken, out, "--strict")
    assert strict.exit_code == 2 and "broken.jsonl:2" in strict.output and "malformed JSON" in strict.output
    assert server.request_count == 0 and not out.exists()
