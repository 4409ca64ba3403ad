import pytest

from bench_core.medmisbench.conditions import Condition, context_sentences, parse_conditions
from bench_core.medmisbench.data import load_medmisbench
from bench_core.medmisbench.prompts import DEFAULT_TEMPLATE_ID, LEGACY_TEMPLATE_ID, get_template
from bench_core.medmisbench.run import prepare_items


@pytest.fixture
def mq1(sample_dir):
    return next(p for p in prepare_items(load_medmisbench(sample_dir).items) if p.item.id == "mq-0001")


def test_conditions_parse_and_add_defensive_variants():
    names = [c.name for c in parse_conditions("type1, clean", defensive=True)]
    assert names == ["type1", "clean", "type1_defensive", "clean_defensive"]
    with pytest.raises(ValueError, match="unknown condition 'type3'"):
        parse_conditions("clean,type3")


def test_delivery_shows_only_what_each_condition_allows(mq1):
    item, target = mq1.item, mq1.target
    template = get_template(LEGACY_TEMPLATE_ID)
    clean = template.render(item, Condition("clean"), target)[-1]["content"]
    type1 = template.render(item, Condition("type1"), target)[-1]["content"]
    type2 = template.render(item, Condition("type2"), target)[-1]["content"]
    defended = template.render(item, Condition("type1", defensive=True), target)[-1]["content"]
    assert "Additional Clinical Context" not in clean and "expert physician" in clean
    assert "C: Hospital admission and intravenous ceftriaxone" in clean
    assert item.injection.sentences[target] in type1
    assert sum(sentence in type1 for sentence in item.injection.sentences.values()) == 1
    assert all(sentence in type2 for sentence in item.injection.sentences.values())
    assert "answer_letter" in clean and "one of: A, B, C, D, E" in clean
    assert defended.startswith("Warning") and "misleading" in defended
    assert defended.endswith(type1[len("") :]) or type1 in defended
    assert context_sentences(item, Condition("type2"), target)[2] == item.injection.sentences["C"]


def test_templates_are_versioned(mq1):
    assert DEFAULT_TEMPLATE_ID == "medmisbench-authors@1" and get_template().id == DEFAULT_TEMPLATE_ID
    assert get_template("medmisbench-notebook").id == LEGACY_TEMPLATE_ID == "medmisbench-notebook@1"
    with pytest.raises(ValueError, match="unknown delivery template"):
        get_template("nope@9")


def test_invalid_type1_target_is_refused(mq1):
    with pytest.raises(ValueError, match="invalid Type 1 target"):
        context_sentences(mq1.item, Condition("type1"), mq1.item.gold)


def test_the_earlier_template_renders_as_before(sample_dir):
    """``medmisbench-notebook@1`` is now data over format strings; its messages are byte for byte the
    ones the earlier code rendered (golden file written by that code for the sample, every condition)."""
    import json
    from pathlib import Path

    golden = json.loads((Path(__file__).parents[2] / "data" / "medmisbench_notebook_v1_golden.json").read_text())
    template = get_template(LEGACY_TEMPLATE_ID)
    rendered = {
        f"{p.item.id}|{name}": [dict(m) for m in template.render(p.item, Condition.parse(name), p.target)]
        for p in prepare_items(load_medmisbench(sample_dir).items)
        for name in ("clean", "type1", "type2", "clean_defensive", "type1_defensive", "type2_defensive")
    }
    assert rendered == golden


def test_a_template_file_is_loaded_checked_and_used(tmp_path, fake_openai, sample_dir):
    import json

    from typer.testing import CliRunner

    from bench_core.cli.main import app
    from tests.fakes.openai_server import Reply

    template = {
        "name": "site-template",
        "version": "2",
        "system": "Answer with JSON.",
        "user": "Q: {question}\n{options}",
        "user_with_context": "Context: {context}\nQ: {question}\n{options}",
        "option_line": "({label}) {text}",
        "defensive_warning": "Be careful.",
        "request": {"*": {"temperature": 0.5, "max_tokens": 100}},
    }
    path = tmp_path / "templates.json"
    path.write_text(json.dumps([template]))
    server = fake_openai(lambda received: Reply(content='{"answer_letter": "A"}'))
    out = tmp_path / "run"
    args = ["run", "medmisbench", "--data", str(sample_dir / "MEDMISMCQA.jsonl"), "--model", "m", "--base-url",
            server.url, "--out", str(out), "--no-progress", "--conditions", "type1", "--limit", "1"]  # fmt: skip
    result = CliRunner().invoke(app, [*args, "--template-file", str(path)])
    assert result.exit_code == 0, result.output
    (request,) = server.requests
    assert request.body["messages"][0] == {"role": "system", "content": "Answer with JSON."}
    user = request.body["messages"][1]["content"]
    assert user.startswith("Context: ") and "\nQ: Drug of choice" in user and "\n(A) Ethosuximide\n(B) " in user
    assert (request.body["temperature"], request.body["max_tokens"]) == (0.5, 100)
    (manifest,) = [json.loads(line) for line in (out / "runs.jsonl").read_text().splitlines()]
    assert manifest["template"] == "site-template@2" and manifest["template_definition"]["user"] == template["user"]

    for bad, message in (
        ({**template, "user": "Q: {question} {answer}"}, "unknown field(s) answer"),
        ({**template, "name": "medmisbench-authors", "version": "1"}, "already defined"),
        ({**template, "request": {"openai": {"temprature": 1}}}, "unknown key(s) temprature"),
        ({k: v for k, v in template.items() if k != "user"}, "missing field(s) user"),
    ):
        path.write_text(json.dumps(bad))
        refused = CliRunner().invoke(app, [*args, "--template-file", str(path)])
        text = "".join(refused.output.split())  # rich wraps long paths
        assert refused.exit_code == 2 and str(path) in text, text
        assert "".join(message.split()) in text
