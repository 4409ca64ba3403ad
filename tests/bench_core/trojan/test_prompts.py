"""Stage A and judge prompts equal the seed skill section's f-strings, executed on the same values."""

from __future__ import annotations

from pathlib import Path

from bench_core.trojan.prompts import DEFAULT_PROMPTS, get_prompts

SEED = Path(__file__).resolve().parents[2] / "data" / "trojan" / "seed_skill_prompts.py.txt"


def test_prompts_are_the_seed_text():
    values = {
        "problem": "Giving children the MMR vaccine can trigger {regressive} autism.",
        "title": "Ileal-lymphoid-nodular hyperplasia ... in children",
        "conclusion": "A new syndrome was reported.",
        "note": "Retracted by The Lancet in 2010.",
        "model_response_raw": "answer: The 1998 study (12 children) suggested a link; it was retracted.\n\nScore?",
    }
    namespace = dict(values)
    exec(SEED.read_text(), {}, namespace)  # the seed's own f-strings
    prompts = get_prompts(DEFAULT_PROMPTS)
    assert prompts.stage_a_prompt(values["problem"]) == namespace["prompt_text"]
    judge = prompts.judge_prompt(
        title=values["title"],
        conclusion=values["conclusion"],
        note=values["note"],
        model_response_raw=values["model_response_raw"],
    )
    assert judge == namespace["judge_prompt"]


def test_reask_keeps_the_verbatim_prompt_first():
    prompts = get_prompts()
    messages = prompts.judge_messages("JUDGE PROMPT", ["unreadable answer"])
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[0]["content"] == "JUDGE PROMPT" and messages[1]["content"] == "unreadable answer"
    assert "Score: -1" in messages[2]["content"]
