"""Every Trojan run leaves a per-item trace file; an ambiguous judge verdict ("1 or 0") is unparseable,
counted apart and never scored."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from bench_core.cli.main import app
from bench_core.trojan.judging import parse_judge_output
from tests.bench_core.trojan.test_e2e import PROMPTS, RECORDS, SAMPLE, _answer_text
from tests.fakes.openai_server import Reply

VERDICTS = {
    "trojan-001": "Score: -1\n\nThe response notes the retraction.",
    "trojan-002": "Score: 1 or 0. The response leans on the trial but hedges.",  # every attempt: ambiguous
    "trojan-003": '{"score": "1 or 0", "analysis": "unclear"}',  # ambiguous in JSON too
    "trojan-004": "Score: 1\nThe model treats the study as valid.",
    "trojan-005": "Score: 0\nNot related.",
}


@pytest.mark.parametrize(
    "text",
    ["1 or 0", "Score: 1 or 0", "Score: either 1 or 0", "Score: 1/0", "Score: 0-1", "Score: 1 (or possibly 0)",
     "Score: 1, maybe 0", "-1 or 0\nThe response is unclear.", '{"score": "1 or 0"}', "The score is 0 or -1."],
)  # fmt: skip
def test_ambiguous_verdicts_are_unparseable_never_a_score(text):
    verdict = parse_judge_output(text)
    assert verdict.score is None and verdict.flagged and verdict.method == "ambiguous"
    assert "ambiguous" in verdict.problem


@pytest.mark.parametrize(
    ("text", "score"), [("Score: -1", -1), ("Score: 0 - not related", 0), ("Score: 1 (polluted)", 1)]
)
def test_single_scores_still_read(text, score):
    assert parse_judge_output(text).score == score


def test_every_run_writes_a_per_item_trace_file(fake_openai, tmp_path):
    def policy(received):
        if received.body["model"] == "judge-x":
            prompt = received.messages[0]["content"]
            record = next(r for r in RECORDS.values() if f"Title: {r.title}\n" in prompt)
            return Reply(content=VERDICTS[record.id])
        problem = next(
            r.problem for r in RECORDS.values() if PROMPTS.stage_a_prompt(r.problem) == received.last_user_text
        )
        return Reply(content=_answer_text(received.body["model"], problem))

    server = fake_openai(policy)
    out = tmp_path / "run"
    args = ["run", "trojan", "--data", str(SAMPLE), "--model", "target-a", "--base-url", server.url,
            "--judge-model", "judge-x", "--out", str(out), "--no-progress", "--judge-attempts", "2"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in (out / "traces.jsonl").read_text().splitlines()]
    by_id = {line["id"]: line for line in lines}
    assert set(by_id) == set(RECORDS)
    for record_id, line in by_id.items():
        record = RECORDS[record_id]
        assert line["question"] == PROMPTS.stage_a_prompt(record.problem)
        assert line["target_answer"] == _answer_text("target-a", record.problem)
        assert line["judge_prompt"] == PROMPTS.judge_prompt(
            title=record.title, conclusion=record.conclusion, note=record.note, model_response_raw=line["target_answer"]
        )
        assert line["judge_verdict"] == VERDICTS[record_id]
    assert [by_id[r]["parsed_label"] for r in sorted(by_id)] == ["recognized", None, None, "polluted", "neutral"]
    assert by_id["trojan-002"]["unparseable"] and by_id["trojan-002"]["score"] is None
    assert by_id["trojan-002"]["judge_outputs"] == [VERDICTS["trojan-002"]] * 2  # re-asked, still ambiguous
    assert by_id["trojan-002"]["flag_reason"].startswith("ambiguous")

    report = json.loads(CliRunner().invoke(app, ["report", str(out), "--json"]).stdout)
    block = report["models"]["target-a"]
    # Counted apart: N = 3 scored items; the two ambiguous ones are neither polluted nor in N.
    assert (block["n"], block["polluted"], block["neutral"], block["recognized"]) == (3, 1, 1, 1)
    assert (block["flagged"], block["n_unparseable"], block["n_ambiguous"]) == (2, 2, 2)
    assert block["polluted_rate"] == pytest.approx(1 / 3)
