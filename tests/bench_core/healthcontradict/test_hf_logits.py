"""The local-model logit path end to end on a tiny Llama built offline in the test (random weights)."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the 'hf' extra (torch + transformers) is not installed")
pytest.importorskip("transformers", reason="the 'hf' extra (torch + transformers) is not installed")

from typer.testing import CliRunner  # noqa: E402

from bench_core.cli.main import app  # noqa: E402
from bench_core.healthcontradict.hf_logits import HFLogitModel, find_label_tokens  # noqa: E402
from bench_core.healthcontradict.items import HCInstance  # noqa: E402
from bench_core.healthcontradict.prompts import get_template_set  # noqa: E402
from bench_core.healthcontradict.run import TokenizerCounter, fit_prompt  # noqa: E402
from bench_core.healthcontradict.scoring import predict  # noqa: E402
from bench_core.kernel.providers.base import ChatRequest, ProviderError  # noqa: E402
from tests.bench_core.healthcontradict.tiny_lm import build_tiny_lm  # noqa: E402

TEMPLATES = get_template_set()


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return build_tiny_lm(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="module")
def scorer(model_dir) -> HFLogitModel:
    return HFLogitModel(model_dir, batch_size=3)


def _reference_p_yes(scorer: HFLogitModel, prompt: str) -> float:
    """P(YES) computed here directly: one unpadded forward, full-vocabulary softmax, label spellings summed."""
    ids = scorer.tokenizer(prompt, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        logits = scorer.model(input_ids=ids).logits[0, -1]
    probs = torch.softmax(logits.double(), dim=-1)
    yes = sum(probs[i].item() for i in scorer.labels.ids["yes"])
    no = sum(probs[i].item() for i in scorer.labels.ids["no"])
    return yes / (yes + no)


def _instance(index: int, words: int = 5) -> HCInstance:
    return HCInstance(
        instance_id=str(index),
        topic_id=100 + index // 2,
        query=f"Can coffee help you lose weight {index}?",
        query_stance="yes" if index % 3 else "no",
        doc_a=" ".join(["green coffee is useful for weight loss"] * (words + index)),
        doc_b=" ".join(["Of course not! Studies show no benefit"] * (words + 2 * index)),
    )


def test_label_tokens_are_the_single_token_spellings(scorer):
    labels = scorer.labels
    assert labels.tokens["yes"] == ("ĠYES", "YES", "ĠYes", "Yes", "yes")
    assert labels.tokens["no"] == ("ĠNO", "NO", "ĠNo", "No", "Ġno", "no")  # " yes" splits into "Ġ" + "yes": left out
    assert scorer.tokenizer.tokenize("Answer: yes") == ["Answer", ":", "Ġ", "yes"]
    original = find_label_tokens(scorer.tokenizer, "original")
    assert original.tokens == {"yes": ("YES",), "no": ("NO",)}
    with pytest.raises(ValueError, match="label mode"):
        find_label_tokens(scorer.tokenizer, "first")


def test_scores_equal_a_direct_forward_pass_and_do_not_depend_on_batching(scorer):
    prompts = [
        TEMPLATES[name].render(i.query, i.correct_doc, i.incorrect_doc)
        for i in map(_instance, range(4))
        for name in ("NC", "CIC")
    ]
    batched = scorer.score_prompts(prompts)  # lengths differ: left padding inside batches of 3
    for prompt, response in zip(prompts, batched, strict=True):
        prediction = predict(response.text, response.logprobs, source="logits")
        assert prediction.p_yes == pytest.approx(_reference_p_yes(scorer, prompt), abs=1e-5)
        (alone,) = scorer.score_prompts([prompt])
        assert predict(alone.text, alone.logprobs, source="logits").p_yes == pytest.approx(prediction.p_yes, abs=1e-5)
        top = response.logprobs[0]["top_logprobs"]
        assert {e["token"] for e in top} == set(scorer.labels.tokens["yes"] + scorer.labels.tokens["no"])
        assert all(e["logprob"] < 0 for e in top)  # log-probabilities over the whole vocabulary
        assert response.usage["prompt_tokens"] == len(scorer.tokenizer(prompt)["input_ids"])
    assert {round(predict(r.text, r.logprobs, source="logits").p_yes, 6) for r in batched} != {0.5}


def test_concurrent_requests_are_batched_and_a_too_long_prompt_fails_alone(model_dir):
    scorer = HFLogitModel(model_dir, batch_size=4, max_context_tokens=64)
    short = [f"Question: is {k} a number? \nAnswer:" for k in range(7)]
    too_long = "word " * 200

    async def main():
        requests = [ChatRequest(messages=({"role": "user", "content": p},)) for p in [*short, too_long]]
        return await asyncio.gather(*(scorer.complete(r) for r in requests), return_exceptions=True)

    outcomes = asyncio.run(main())
    assert all(not isinstance(o, Exception) for o in outcomes[:7])
    assert isinstance(outcomes[7], ProviderError) and outcomes[7].kind == "context_length"
    assert scorer.prompts_scored == 7 and scorer.forward_passes == 2  # 4 + 3, not 7 passes


def test_documents_are_truncated_to_the_window_and_recorded(scorer):
    counter = TokenizerCounter(scorer)
    instance = _instance(3, words=40)
    for name in ("CC", "CIC"):
        fitted = fit_prompt(TEMPLATES[name], instance, counter, 120)
        info = fitted.truncation
        assert info["truncated"] and info["prompt_tokens"] <= 120 < info["prompt_tokens_full"]
        assert counter.prompt_tokens(fitted.text) == info["prompt_tokens"]
        assert fitted.text.endswith(" \nAnswer:") and fitted.text.startswith("Answer the following question")
        kept = [d["kept"] for d in info["documents"]]
        assert all(0 < d["kept"] < d["tokens"] for d in info["documents"])
        assert max(kept) - min(kept) <= 1  # two long documents share the room equally
        assert instance.correct_doc[:30] in fitted.text  # each document keeps its beginning
    untouched = fit_prompt(TEMPLATES["NC"], instance, counter, 120)
    assert untouched.truncation["truncated"] is False and untouched.text == TEMPLATES["NC"].render(instance.query)


def test_cli_runs_scores_reports_and_resumes(model_dir, tmp_path):
    instances = [_instance(i) for i in range(6)]
    data = tmp_path / "instances.jsonl"
    data.write_text("".join(json.dumps(i.model_dump()) + "\n" for i in instances))
    out = tmp_path / "run"
    args = ["run", "healthcontradict", "--data", str(data), "--model", "tiny", "--hf", str(model_dir)]
    args += ["--out", str(out), "--no-progress", "--batch-size", "4", "--max-context-tokens", "160"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    n_calls = 3 + 6 * 4  # NC once per topic (3 topics), four context templates per instance
    assert f"{n_calls} calls succeeded" in result.output
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(records) == n_calls
    manifest = json.loads((out / "runs.jsonl").read_text().splitlines()[0])
    assert manifest["provider"] == "hf" and manifest["label_tokens"]["tokens"]["yes"][0] == "ĠYES"
    assert manifest["context_window"] == 160

    scorer = HFLogitModel(model_dir)
    by_id = {i.instance_id: i for i in instances}
    for record in records:
        key, parsed, meta = record["key"], record["parsed"], record["meta"]
        prompt = record["messages"][0]["content"]
        assert parsed["p_yes"] == pytest.approx(_reference_p_yes(scorer, prompt), abs=1e-5)
        assert parsed["label"] == ("yes" if parsed["p_yes"] >= 0.5 else "no")
        assert meta["truncation"]["prompt_tokens"] <= 160
        if key["condition"] != "NC":
            instance = by_id[key["item"]]
            assert parsed["correct"] == (parsed["label"] == instance.query_stance)
    assert any(r["meta"]["truncation"]["truncated"] for r in records)

    report = json.loads(CliRunner().invoke(app, ["report", str(out), "--json"]).stdout)
    model = report["models"]["tiny"]
    cc = [r for r in records if r["key"]["condition"] == "CC"]
    assert model["templates"]["CC"]["n"] == 6
    assert model["templates"]["CC"]["accuracy"] == pytest.approx(sum(r["parsed"]["correct"] for r in cc) / 6)
    assert model["templates"]["NC"]["n"] == 6  # the topic's NC answer counts for each of its instances
    density = model["density"]["CC"]
    assert density["n"] == 6 and math.isclose(sum(density["density"]) * 0.05, 1.0)

    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0 and f"0 calls succeeded, 0 failed, {n_calls} already done" in again.output
    assert len((out / "results.jsonl").read_text().splitlines()) == n_calls  # resumed: no call repeated
