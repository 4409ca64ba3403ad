"""End to end through the CLI against the loopback server: prompts, logprobs, faults, metrics, resume.

Six instances, three questions (topic 1: yes; topics 2 and 3: no). The scripted model answers:

| template | i0 (yes) | i1 (yes) | i2 (no) | i3 (no) | i4 (no)      | i5 (no)      |
|----------|----------|----------|---------|---------|--------------|--------------|
| NC       | Yes (logprobs .8/.2)| = i0 | YES (text only) | = i2 | No (logprobs, YES unlisted) | = i4 |
| CC       | Yes      | Yes.     | No      | No      | no           | NO           |
| IC       | No       | No       | Yes     | Yes     | Yes          | unreadable   |
| CIC      | Yes      | Yes      | No      | Yes     | No           | No           |
| ICC      | Yes      | Yes      | Yes     | Yes     | Yes          | Yes          |

Accuracy: NC 4/6, CC 6/6, IC 0/6 (one unreadable), CIC 5/6, ICC 2/6. OR: of the NC-wrong {i2, i3}, none
wrong under CC -> 0/2. VM: of the NC-right {i0, i1, i4, i5}, all wrong under IC -> 4/4.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bench_core.cli.main import app
from bench_core.healthcontradict.items import HCInstance
from bench_core.healthcontradict.prompts import TEMPLATE_ORDER, get_template_set
from tests.bench_core.batch.scenario import healthcontradict_args
from tests.fakes.openai_server import Reply, ScriptedPolicy

TEMPLATES = get_template_set()
GOLD = ["yes", "yes", "no", "no", "no", "no"]
ANSWERS = {
    "CC": ["Yes", "Yes.", "No", "No", "no", "NO"],
    "IC": ["No", "No", "Yes", "Yes", "Yes", "I cannot determine this from the context."],
    "CIC": ["Yes", "Yes", "No", "Yes", "No", "No"],
    "ICC": ["Yes"] * 6,
}


def _instances() -> list[HCInstance]:
    return [
        HCInstance(
            instance_id=str(k),
            topic_id=1 + k // 2,
            query=f"Does treatment {1 + k // 2} work?",
            query_stance=GOLD[k],
            doc_a=f"Treatment {1 + k // 2} works, says document {k}a. " * (k + 1),
            doc_b=f"Treatment {1 + k // 2} does not work, says document {k}b. " * (k + 1),
        )
        for k in range(6)
    ]


def _lp(token: str, p: float) -> dict:
    return {"token": token, "logprob": math.log(p)}


def _book() -> dict[str, Reply]:
    book: dict[str, Reply] = {}
    instances = _instances()
    nc = {
        1: Reply(content="Yes", logprobs=[{**_lp("Yes", 0.8), "top_logprobs": [_lp("Yes", 0.8), _lp("No", 0.2)]}]),
        2: Reply(content="YES"),
        3: Reply(content="No", logprobs=[{**_lp("No", 0.9), "top_logprobs": [_lp("No", 0.9), _lp("The", 0.05)]}]),
    }
    for instance in instances:
        book[TEMPLATES["NC"].render(instance.query)] = nc[instance.topic_id]
        for name, answers in ANSWERS.items():
            prompt = TEMPLATES[name].render(instance.query, instance.correct_doc, instance.incorrect_doc)
            book[prompt] = Reply(content=answers[int(instance.instance_id)])
    return book


@pytest.fixture
def data(tmp_path) -> Path:
    path = tmp_path / "instances.jsonl"
    path.write_text("".join(json.dumps(i.model_dump()) + "\n" for i in _instances()))
    return path


def _args(server, data, out, *extra):
    return healthcontradict_args(server, data, out, *extra, model="scripted")


def test_api_run_with_faults_then_resume_without_repeats(fake_openai, data, tmp_path):
    book = _book()
    first_cc = TEMPLATES["CC"].render(_instances()[0].query, _instances()[0].correct_doc, _instances()[0].incorrect_doc)
    faults = [
        (
            lambda r: r.last_user_text == first_cc,
            [Reply(status=429, headers={"Retry-After": "0.02"}), Reply(status=500)],
        ),
        (lambda r: r.last_user_text == TEMPLATES["NC"].render("Does treatment 2 work?"), [Reply(malformed=True)]),
    ]
    server = fake_openai(ScriptedPolicy(lambda text, received: book[text], faults))
    out = tmp_path / "run"

    first = CliRunner().invoke(app, _args(server, data, out, "--templates", "NC,CC"))
    assert first.exit_code == 0, first.output
    assert "9 calls succeeded" in first.output  # 3 NC (one per question) + 6 CC
    assert server.request_count == 9 + 3  # and three failed attempts retried
    body = server.requests[0].body
    assert body["logprobs"] is True and body["top_logprobs"] == 20 and body["temperature"] == 0.0

    second = CliRunner().invoke(app, _args(server, data, out))
    assert second.exit_code == 0 and "18 calls succeeded, 0 failed, 9 already done" in second.output
    third = CliRunner().invoke(app, _args(server, data, out))
    assert "0 calls succeeded, 0 failed, 27 already done" in third.output
    prompts = [r.last_user_text for r in server.requests]
    assert len(set(prompts)) == 27 and server.request_count == 27 + 3  # every prompt answered once, none repeated

    report = json.loads(CliRunner().invoke(app, ["report", str(out), "--json"]).stdout)
    assert report["benchmark"] == "healthcontradict" and report["templates"] == list(TEMPLATE_ORDER)
    model = report["models"]["scripted"]
    accuracy = {t: (b["n_correct"], b["n"]) for t, b in model["templates"].items()}
    assert accuracy == {"NC": (4, 6), "CC": (6, 6), "IC": (0, 6), "CIC": (5, 6), "ICC": (2, 6)}
    assert model["templates"]["IC"]["n_unparseable"] == 1
    assert (model["or_k"], model["or_n"], model["vm_k"], model["vm_n"]) == (0, 2, 4, 4)
    assert model["or_rate"] == 0.0 and model["vm_rate"] == 1.0
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    nc = {r["key"]["item"]: r["parsed"] for r in records if r["key"]["condition"] == "NC"}
    assert nc["topic-1"]["p_yes"] == pytest.approx(0.8) and nc["topic-1"]["method"] == "logprobs"
    assert nc["topic-2"]["p_yes"] is None and nc["topic-2"]["method"] == "text"
    assert nc["topic-3"]["method"] == "logprobs_bound" and nc["topic-3"]["p_hat"] == pytest.approx(0.9 / 0.95)
    assert model["templates"]["NC"]["n_with_probability"] == 4  # topics 1 and 3, two instances each


def test_no_logprobs_and_word_truncation_for_api_models(fake_openai, data, tmp_path):
    book = _book()
    server = fake_openai(ScriptedPolicy(lambda text, received: book.get(text, Reply(content="No"))))
    out = tmp_path / "short"
    args = _args(server, data, out, "--templates", "CIC", "--no-logprobs", "--max-context-tokens", "60")
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert all("logprobs" not in r.body for r in server.requests)
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(records) == 6
    for record in records:
        prompt = record["messages"][0]["content"]
        truncation = record["meta"]["truncation"]
        assert len(prompt.split()) <= 60 and truncation["prompt_tokens"] == len(prompt.split())
        assert truncation["counter"] == "words"
    truncated = [r for r in records if r["meta"]["truncation"]["truncated"]]
    assert truncated and all(r["meta"]["truncation"]["prompt_tokens_full"] > 60 for r in truncated)
    by_id = {i.instance_id: i for i in _instances()}
    for record in truncated:  # context length counts the documents before truncation
        skeleton = len(TEMPLATES["CIC"].render(by_id[record["key"]["item"]].query, "", "").split())
        full = record["meta"]["truncation"]["prompt_tokens_full"]
        assert full == skeleton + record["meta"]["context_words"]


def test_bad_invocations_are_refused(fake_openai, data, tmp_path):
    server = fake_openai()
    both = CliRunner().invoke(app, [*_args(server, data, tmp_path / "x"), "--hf", str(tmp_path)])
    assert both.exit_code == 2 and "exactly one of --base-url" in both.output
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"instance_id": 1, "topic_id": 1, "query": "Q?", "query_stance": "maybe", "doc_a": "a", "doc_b": "b"}\n'
    )
    refused = CliRunner().invoke(app, _args(server, bad, tmp_path / "y"))
    assert refused.exit_code == 2 and "bad.jsonl:1: field 'query_stance'" in " ".join(refused.output.split())
    assert not (tmp_path / "y").exists() and server.request_count == 0
