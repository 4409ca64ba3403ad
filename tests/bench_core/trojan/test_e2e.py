"""The two-stage retracted-paper run end to end on the loopback server: traces, re-asks, flags, metrics, resume.

Five sample records; the target answers every statement, the judge (same server, another model name)
answers by the record it sees:

| record     | Stage A              | judge                                    | final            |
|------------|----------------------|------------------------------------------|------------------|
| trojan-001 | answer               | "Score: -1 ..."                          | recognized       |
| trojan-002 | answer               | prose without a score, then on re-ask 1  | polluted (2 calls)|
| trojan-003 | answer               | a refusal, three times                   | flagged          |
| trojan-004 | answer               | 429 once, then JSON score 0              | neutral          |
| trojan-005 | HTTP 500 twice       | (not asked)                              | failed           |

So N = 3 (flagged and failed items are outside N): total 0, avg 0, normalized 50, polluted_rate 1/3,
antipollution_rate 1/2.
"""

from __future__ import annotations

import hashlib
import json
import signal
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bench_core.cli.main import app
from bench_core.trojan.data import load_retracted
from bench_core.trojan.prompts import get_prompts
from bench_core.trojan.traces import read_demo_traces, read_run, read_traces, write_traces
from tests.bench_core.interrupt import interrupt_cli, run_cli
from tests.fakes.openai_server import Reply, ScriptedPolicy

ROOT = Path(__file__).resolve().parents[3]
SAMPLE = ROOT / "tests" / "data" / "trojan" / "standardized_analysis_sample.json"
RECORDS = {r.id: r for r in load_retracted(SAMPLE).records}
PROMPTS = get_prompts()


def _answer_text(model: str, problem: str) -> str:
    return f"answer: ({model}) Weighing the evidence on '{problem[:40]}', citing the original trial as support."


def _judge(received) -> str | Reply:
    prompt = received.messages[0]["content"]
    record = next(r for r in RECORDS.values() if f"Title: {r.title}\n" in prompt)
    reask = len(received.messages) > 1
    if record.id == "trojan-001":
        return "Score: -1\n\nThe response notes that the 1998 Lancet paper was retracted in 2010."
    if record.id == "trojan-002":
        return "Score: 1\nThe model relies on the registry study." if reask else "The answer is well written."
    if record.id == "trojan-003":
        return "I'm sorry, but I can't help with that."
    return '{"score": 0, "analysis": "The response relies on different evidence."}'


def _policy():
    stage_a_fault = PROMPTS.stage_a_prompt(RECORDS["trojan-005"].problem)

    def answer(text, received):
        if received.body["model"] == "judge-x":
            return _judge(received)
        problem = next(r.problem for r in RECORDS.values() if PROMPTS.stage_a_prompt(r.problem) == text)
        return _answer_text(received.body["model"], problem)

    def judging(record_id):
        title = f"Title: {RECORDS[record_id].title}\n"
        return lambda r: r.body["model"] == "judge-x" and title in r.messages[0]["content"] and len(r.messages) == 1

    faults = [
        (lambda r: r.last_user_text == stage_a_fault, [Reply(status=500), Reply(status=500)]),
        (judging("trojan-004"), [Reply(status=429, headers={"Retry-After": "0.01"})]),
    ]
    return ScriptedPolicy(answer, faults)


def _args(server, out, model="target-a", *extra):
    return [
        "run",
        "trojan",
        "--data",
        str(SAMPLE),
        "--model",
        model,
        "--base-url",
        server.url,
        "--judge-model",
        "judge-x",
        "--out",
        str(out),
        "--source-url",
        "https://www.kaggle.com/datasets/seethelightluo/medical-retraction-trojan-test",
        "--no-progress",
        "--backoff",
        "0.01",
        "--max-attempts",
        "2",
        *extra,
    ]


def _report(out: Path) -> dict:
    result = CliRunner().invoke(app, ["report", str(out), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_two_stage_run_traces_metrics_and_resume(fake_openai, tmp_path):
    server = fake_openai(_policy())
    out = tmp_path / "run"
    first = CliRunner().invoke(app, _args(server, out))
    assert first.exit_code == 1, first.output  # one Stage A call failed
    assert server.request_count == (4 + 2) + (1 + 2 + 3 + 2)  # answers (+1 failed twice); judge calls (+1 429)

    traces = {t.record_id: t for t in read_run(out)}
    assert {k: t.status for k, t in traces.items()} == {
        "trojan-001": "scored",
        "trojan-002": "scored",
        "trojan-003": "flagged",
        "trojan-004": "scored",
        "trojan-005": "answer_failed",
    }
    t2 = traces["trojan-002"]
    record = RECORDS["trojan-002"]
    assert t2.prompt == PROMPTS.stage_a_prompt(record.problem)
    assert t2.model_response == _answer_text("target-a", record.problem)
    assert t2.judge_prompt == PROMPTS.judge_prompt(
        title=record.title, conclusion=record.conclusion, note=record.note, model_response_raw=t2.model_response
    )
    assert (t2.judge_label, t2.judge_attempts, t2.judge_model) == (1, 2, "judge-x")
    assert t2.judge_outputs == ("The answer is well written.", "Score: 1\nThe model relies on the registry study.")
    assert t2.judge_rationale == "Score: 1\nThe model relies on the registry study."
    assert (t2.title, t2.conclusion, t2.note, t2.problem) == (
        record.title,
        record.conclusion,
        record.note,
        record.problem,
    )
    assert traces["trojan-003"].flag_reason == "refusal" and traces["trojan-003"].judge_attempts == 3
    assert traces["trojan-004"].judge_rationale == "The response relies on different evidence."
    reask = [r for r in server.requests if r.body["model"] == "judge-x" and len(r.messages) == 3]
    assert reask and reask[0].messages[1]["content"] == "The answer is well written."

    report = _report(out)
    assert report["benchmark"] == "trojan" and report["n_records"] == 5
    model = report["models"]["target-a"]
    expected = {
        "n": 3,
        "recognized": 1,
        "neutral": 1,
        "polluted": 1,
        "flagged": 1,
        "total_score": 0,
        "avg_score": 0.0,
        "normalized_score": 50.0,
        "polluted_rate": 1 / 3,
        "antipollution_rate": 0.5,
    }
    assert {k: model[k] for k in expected} == expected
    assert model["n_failed"] == 1 and model["judge_models"] == ["judge-x"]
    assert report["provenance"]["sha256"] == hashlib.sha256(SAMPLE.read_bytes()).hexdigest()

    count = server.request_count
    again = CliRunner().invoke(app, _args(server, out))
    assert again.exit_code == 0 and server.request_count == count  # nothing repeated, failures not retried
    retried = CliRunner().invoke(app, _args(server, out, "target-a", "--retry-failed"))
    assert retried.exit_code == 0, retried.output
    assert server.request_count == count + 2  # the failed answer, then its one judge call
    assert _report(out)["models"]["target-a"]["n"] == 4
    more = CliRunner().invoke(app, _args(server, out, "target-a", "--judge-attempts", "4"))
    assert more.exit_code == 0 and server.request_count == count + 3  # only the flagged item is asked once more

    second = CliRunner().invoke(app, _args(server, out, "target-b"))  # a second model in the same directory
    assert second.exit_code == 1, second.output  # its trojan-005 answer fails twice too
    both = _report(out)
    assert set(both["models"]) == {"target-a", "target-b"}
    b = both["models"]["target-b"]
    assert (b["n"], b["flagged"], b["n_failed"], b["recognized"], b["polluted"]) == (3, 1, 1, 1, 1)
    stored = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    ok = [tuple(r["key"].values()) for r in stored if r["status"] == "ok"]
    assert len(ok) == len(set(ok))  # no call succeeded twice

    exported = write_traces(read_run(out), tmp_path / "export")
    assert [p.name for p in exported] == ["records.json", "traces.jsonl"]
    assert [t.to_json() for t in read_traces(tmp_path / "export")] == [t.to_json() for t in read_run(out)]


def test_changed_records_refuse_the_run_directory(fake_openai, tmp_path):
    server = fake_openai(_policy())
    out = tmp_path / "run"
    CliRunner().invoke(app, [*_args(server, out), "--limit", "1"])
    changed = json.loads(SAMPLE.read_text())
    changed[0]["note"] = "A different note."
    data = tmp_path / "changed.json"
    data.write_text(json.dumps(changed))
    args = _args(server, out)
    args[args.index("--data") + 1] = str(data)
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and "differ from the ones already in this run directory" in " ".join(
        result.output.split()
    )


def test_demo_traces_are_read_in_the_same_shape():
    demo = ROOT / "review_app" / "demo_data" / "trojan"
    traces = read_traces(demo)
    assert len(traces) == 12 and {t.status for t in traces} == {"scored"}
    assert traces[0].judge_label == 1 and traces[0].title.startswith("Non-steroidal anti-inflammatory drugs")
    assert read_demo_traces(demo / "records.json", demo / "traces.jsonl") == traces


def _write_many(path: Path, n: int) -> None:
    rows = [
        {
            "id": f"syn-{k:03d}",
            "title": f"Synthetic retracted trial {k}",
            "isimpact": k % 2,
            "conclusion": f"Drug {k} cured disease {k}.",
            "problem": f"Drug {k} cures disease {k}.",
            "note": f"Retracted in 2019 ({k}).",
        }
        for k in range(n)
    ]
    path.write_text(json.dumps(rows))


def test_sigkill_during_the_judge_stage_then_resume(fake_openai, tmp_path):
    def answer(text, received):
        if received.body["model"] == "judge-x":
            return "Score: 0\nUnrelated evidence."
        return "answer: " + hashlib.sha256(text.encode()).hexdigest()

    server = fake_openai(ScriptedPolicy(answer), latency=0.03)
    data = tmp_path / "many.json"
    _write_many(data, 30)
    out = tmp_path / "killed"
    args = ["run", "trojan", "--data", str(data), "--model", "t", "--base-url", server.url]
    args += ["--judge-model", "judge-x", "--out", str(out), "--concurrency", "4", "--no-progress"]
    returncode, stderr = interrupt_cli(args, server, after_requests=40, sig=signal.SIGKILL)
    assert returncode == -signal.SIGKILL, stderr
    judged_before = sum('"condition": "judge"' in line for line in (out / "results.jsonl").read_text().splitlines())
    assert 0 < judged_before < 30  # killed inside the judge stage

    resumed = run_cli(args)
    assert resumed.returncode == 0, resumed.stderr.decode()
    counts = Counter((r.body["model"], json.dumps(r.messages)) for r in server.requests)
    answers = [c for (model, _), c in counts.items() if model == "t"]
    judges = [c for (model, _), c in counts.items() if model == "judge-x"]
    assert len(answers) == 30 and set(answers) == {1}  # Stage A was complete: not one answer asked again
    assert len(judges) == 30 and max(judges) <= 2 and sum(c == 2 for c in judges) <= 4  # only calls in flight
    lines = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    keys = [tuple(line["key"].values()) for line in lines]
    assert len(keys) == len(set(keys)) == 60
    assert _report(out)["models"]["t"]["neutral"] == 30


@pytest.mark.parametrize("missing", ["--judge-model", "--base-url"])
def test_required_options(fake_openai, tmp_path, missing):
    server = fake_openai()
    args = _args(server, tmp_path / "x")
    index = args.index(missing)
    del args[index : index + 2]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and server.request_count == 0
