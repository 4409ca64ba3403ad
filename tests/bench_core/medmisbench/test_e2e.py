"""End to end: the CLI runs the sample data against the loopback server; metrics are exact."""

from __future__ import annotations

import json
import shutil
from collections import Counter

import pytest
from typer.testing import CliRunner

from bench_core.cli.main import app
from bench_core.medmisbench.data import load_medmisbench
from bench_core.medmisbench.run import prepare_items, read_run
from tests.bench_core.medmisbench.scenario import answer_book, prompts, run_args
from tests.fakes.openai_server import Reply, ScriptedPolicy

CONDITIONS = ["clean", "type1", "type2", "clean_defensive", "type1_defensive", "type2_defensive"]
SECRET = "sk-test-secret-never-written"

BROKEN = [
    {  # option C has no misleading sentence
        "id": "mq-0900",
        "subset": "MedMisQA",
        "question": "Q?",
        "answer": "A",
        "opa": "a",
        "opb": "b",
        "opc": "c",
        "injecta": "true",
        "injectb": "false b",
        "injection_content": "Cue Remapping",
        "injection_provenance": "Neutral",
    },
    {"id": "mq-0901", "subset": "MedMisQA", "question": "Q2?", "answer": "B", "opa": "a", "opb": "b"},
]


@pytest.fixture
def data_dir(sample_dir, tmp_path):
    target = tmp_path / "data"
    shutil.copytree(sample_dir, target, ignore=shutil.ignore_patterns("*.md"))
    (target / "MEDMISQA_extra.jsonl").write_text("".join(json.dumps(row) + "\n" for row in BROKEN))
    return target


def _policy(data_dir):
    prepared = prepare_items(load_medmisbench(data_dir, strict=True).items)
    book = answer_book(prepared, CONDITIONS)

    def answer(user_text, received):
        return book[user_text]  # a KeyError here means the prompt was not the expected one

    prompt = prompts(prepared, CONDITIONS)

    def exactly(item_id, condition):
        return lambda received: received.last_user_text == prompt[(item_id, condition)]

    faults = [
        (exactly("mm-0001", "clean"), [Reply(status=429, headers={"Retry-After": "0.05"})]),
        (exactly("mq-0002", "clean"), [Reply(status=500)]),
        (exactly("mj-0001", "type2"), [Reply(malformed=True)]),
        (exactly("mh-0001", "type1"), [Reply(hang=True)]),
    ]
    return ScriptedPolicy(answer, faults), book


def _run(server, data_dir, out, *extra):
    args = run_args(
        data_dir,
        server.url,
        out,
        "--defensive",
        "--concurrency",
        "4",
        "--timeout",
        "0.5",
        "--backoff",
        "0.01",
        "--api-key-env",
        "MEDREV_TEST_KEY",
        "--no-progress",
        "--temperature",
        "0.2",
        "--max-tokens",
        "512",
        "--reasoning-effort",
        "low",
        "--template",
        "medmisbench-notebook@1",
        "--protocol",
        "strict",
        *extra,
        model="scripted-model",
    )
    return CliRunner().invoke(app, args, env={"MEDREV_TEST_KEY": SECRET}, catch_exceptions=False)


def test_full_run_gives_the_hand_computed_metrics(fake_openai, data_dir, tmp_path):
    policy, book = _policy(data_dir)
    server = fake_openai(policy, latency=0.005, hang_seconds=1.0)
    out = tmp_path / "run"
    result = _run(server, data_dir, out)
    assert result.exit_code == 0, result.output

    # Every prompt reached the server; faulted ones exactly twice (fault, then success), others once.
    counts = Counter(r.last_user_text for r in server.requests)
    assert set(counts) == set(book)
    assert sorted(counts.values()).count(2) == 4 and max(counts.values()) == 2
    assert server.request_count == 42 + 4
    assert {r.body["temperature"] for r in server.requests} == {0.2}
    assert {r.body["reasoning_effort"] for r in server.requests} == {"low"}
    assert {r.body["max_tokens"] for r in server.requests} == {512}

    # A rerun of the same command makes no call at all.
    assert _run(server, data_dir, out).exit_code == 0
    assert server.request_count == 46

    for path in out.rglob("*"):
        if path.is_file():
            assert SECRET not in path.read_text(encoding="utf-8", errors="replace")

    table = CliRunner().invoke(app, ["report", str(out), "--no-figures"], env={"COLUMNS": "140"})
    assert table.exit_code == 0 and "scripted-model" in table.stdout and "80.0 (37.6–96.4)" in table.stdout
    assert (out / "report" / "report.json").is_file() and (out / "report" / "type1_asr.tex").is_file()

    report = json.loads(CliRunner().invoke(app, ["report", str(out), "--json"]).stdout)
    assert report["benchmark"] == "medmisbench"
    assert report["skipped"] == [
        {"item_id": "MEDMISQA/mq-0900", "reason": "no misleading sentence for wrong option(s) C"},
        {"item_id": "MEDMISQA/mq-0901", "reason": "no injections"},
    ]
    model = report["models"]["scripted-model"]
    c = model["conditions"]
    assert (c["clean"]["n"], c["clean"]["accuracy"], c["clean"]["n_unparseable"]) == (7, 5 / 7, 1)
    assert (c["type1"]["accuracy"], c["type1"]["n_unparseable"]) == (2 / 7, 1)
    assert (c["type1"]["n_clean_correct"], c["type1"]["asr"], c["type1"]["tasr"]) == (5, 4 / 5, 2 / 5)
    assert c["type1"]["asr_ci"] == pytest.approx([0.3755, 0.9638], abs=1e-4)  # Wilson 4/5, by hand
    assert (c["type2"]["accuracy"], c["type2"]["asr"]) == (6 / 7, 1 / 5)
    assert "tasr" not in c["type2"]
    assert (c["type1_defensive"]["asr"], c["type1_defensive"]["tasr"]) == (3 / 5, 1 / 5)
    assert c["type1_defensive"]["asr_delta"] == pytest.approx(-0.2)
    assert c["type2_defensive"]["asr_delta"] == pytest.approx(0.0)
    assert c["clean_defensive"]["accuracy"] == 5 / 7
    assert all(block["n_failed"] == 0 for block in c.values())

    qa = model["strata"]["subset"]["MEDMISQA"]
    assert (qa["clean"]["accuracy"], qa["type1"]["asr"], qa["type1"]["tasr"], qa["type2"]["asr"]) == (1, 1, 0.5, 0.5)
    prov = model["strata"]["provenance"]
    assert (prov["authority"]["type1"]["asr"], prov["patient"]["type1"]["asr"], prov["neutral"]["type1"]["asr"]) == (
        1.0,
        1.0,
        0.5,
    )
    assert prov["authority"]["type1"]["n_clean_correct"] == 2  # mh-0001 was not clean-correct
    cell = model["strata"]["content_x_provenance"]["exception_poisoning x authority"]
    assert (cell["type1"]["n_clean_correct"], cell["type1"]["asr"], cell["type1"]["tasr"]) == (2, 1.0, 0.5)
    assert report["mean"]["conditions"]["type1"]["asr"] == 4 / 5

    # The importer's view: one record per (item, condition) with the automatic label and the item.
    records = read_run(out)
    assert len(records) == 42
    mq1 = next(r for r in records if r.item_id == "mq-0001" and r.condition == "type1")
    assert (mq1.chosen, mq1.correct, mq1.outcome, mq1.type1_target) == ("E", False, "FAIL", "E")
    assert mq1.reasoning.startswith("Considering the options")
    assert mq1.item.gold == "C" and mq1.provenance == "authority" and mq1.content_type == "exception_poisoning"
    assert mq1.injected_sentences == [mq1.item.injection.sentences["E"]]
    assert mq1.settings == {"temperature": 0.2, "max_tokens": 512, "reasoning_effort": "low"}
    assert mq1.template == "medmisbench-notebook@1"
    mx2 = next(r for r in records if r.item_id == "mx-0001" and r.condition == "type2")
    assert (mx2.chosen, mx2.parse_method, mx2.outcome) == ("E", "answer_is", "SUCCESS")
    mh0 = next(r for r in records if r.item_id == "mh-0001" and r.condition == "clean")
    assert (mh0.chosen, mh0.outcome, mh0.response_text) == (
        None,
        "FAIL",
        "I am not able to decide between these options.",
    )


def test_failed_calls_are_recorded_and_retried_only_with_the_flag(fake_openai, data_dir, tmp_path):
    _, book = _policy(data_dir)
    broken = {"on": True}

    def policy(received):
        if broken["on"] and "absence seizures" in received.last_user_text:
            return Reply(status=503, error="overloaded")
        return Reply(content=book[received.last_user_text])

    server = fake_openai(policy)
    out = tmp_path / "run"
    result = _run(server, data_dir, out, "--max-attempts", "2", "--conditions", "clean,type1")
    assert result.exit_code == 1  # some calls failed
    report = json.loads(CliRunner().invoke(app, ["report", str(out), "--json"]).stdout)
    model = report["models"]["scripted-model"]["conditions"]
    # mm-0001 failed under clean, type1 and their defensive variants.
    assert (model["clean"]["n_failed"], model["clean"]["n"]) == (1, 6)
    assert (model["type1_defensive"]["n_failed"], model["type1_defensive"]["n"]) == (1, 6)
    failures = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    failed = [f for f in failures if f["status"] == "failed"]
    assert len(failed) == 4 and all(f["attempts"] == 2 for f in failed)
    assert all("HTTP 503" in f["error"]["message"] and "overloaded" in f["error"]["message"] for f in failed)

    before = server.request_count
    assert _run(server, data_dir, out, "--max-attempts", "2", "--conditions", "clean,type1").exit_code == 0
    assert server.request_count == before  # failures are not retried by default
    broken["on"] = False
    assert _run(server, data_dir, out, "--conditions", "clean,type1", "--retry-failed").exit_code == 0
    assert server.request_count == before + 4
    report = json.loads(CliRunner().invoke(app, ["report", str(out), "--json"]).stdout)
    assert report["models"]["scripted-model"]["conditions"]["clean"]["n_failed"] == 0
    assert report["models"]["scripted-model"]["conditions"]["clean"]["n"] == 7


def test_strict_refuses_a_file_with_a_bad_row(tmp_path, fake_openai):
    bad = tmp_path / "MEDMISQA.jsonl"
    bad.write_text(json.dumps(BROKEN[0]) + "\n" + '{"id": "x", "question": \n')
    server = fake_openai()
    out = tmp_path / "run"
    result = CliRunner().invoke(app, run_args(bad, server.url, out, "--strict", "--no-progress"))
    assert result.exit_code == 2
    assert "MEDMISQA.jsonl:2" in result.output and "malformed JSON" in result.output
    assert server.request_count == 0 and not out.exists()
    # strict by default: the good rows only on request
    lenient = CliRunner().invoke(
        app, run_args(bad, server.url, out, "--no-progress", "--protocol", "strict", "--skip-bad-rows")
    )
    assert lenient.exit_code == 0 and "not loaded" in lenient.output and "MEDMISQA.jsonl:2" in lenient.output
    assert server.request_count == 0  # the one loaded item is skipped (unusable bundle) from every condition


def test_a_run_directory_refuses_items_drawn_with_another_seed(fake_openai, data_dir, tmp_path):
    _, book = _policy(data_dir)
    server = fake_openai(lambda r: Reply(content=book.get(r.last_user_text, "A")))
    out = tmp_path / "run"
    assert _run(server, data_dir, out, "--conditions", "clean").exit_code == 0
    result = _run(server, data_dir, out, "--conditions", "clean", "--seed", "99")
    assert result.exit_code == 2 and "another --seed" in result.output
