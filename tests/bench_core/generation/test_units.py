"""Pieces of the generation pipeline: provenance sampling, settings, failure reasons, prompts."""

from __future__ import annotations

from collections import Counter

import pytest

from bench_core.generation.checks import Problem
from bench_core.generation.item_state import GenerationSettings, assign_provenances, failure_reason
from bench_core.generation.prompts import (
    DEFAULT_PROMPTS,
    get_prompt,
    language_instruction,
    output_schema,
    response_format,
)
from bench_core.medmisbench.items import MCQItem

KEYS = [f"MEDMISQA/q{i}" for i in range(31)]


def test_balanced_sampling_deals_the_frames_evenly_per_stratum():
    strata = {("MEDMISQA", "cue_remapping"): KEYS[:31], ("MEDMISQA", "exception_poisoning"): ["MEDMISQA/x1"]}
    frames = assign_provenances(strata, seed=1, sampling="balanced")
    counts = Counter(frames[k] for k in KEYS)
    assert sorted(counts.values()) == [10, 10, 11]
    assert assign_provenances(strata, seed=1, sampling="balanced") == frames
    assert assign_provenances(strata, seed=2, sampling="balanced") != frames


def test_pinned_frames_are_kept_and_the_rest_rebalanced():
    strata = {("S", "c"): KEYS[:6]}
    dealt = assign_provenances(strata, seed=1, sampling="balanced")
    # Frames that agree with the deal (a resume): the deal is unchanged.
    assert assign_provenances(strata, seed=1, sampling="balanced", pinned={KEYS[0]: dealt[KEYS[0]]}) == dealt
    # Frames that disagree (the stratum changed): they stay, the others fill the least-used frames.
    pinned = dict.fromkeys(KEYS[:3], "patient")
    frames = assign_provenances(strata, seed=1, sampling="balanced", pinned=pinned)
    assert all(frames[k] == "patient" for k in KEYS[:3])
    counts = Counter(frames.values())
    assert counts["patient"] == 3 and sorted(counts.values()) == [1, 2, 3]


def test_uniform_sampling_depends_only_on_seed_and_item():
    alone = assign_provenances({("S",): KEYS[:1]}, seed=9, sampling="uniform")
    together = assign_provenances({("S",): KEYS}, seed=9, sampling="uniform")
    assert alone[KEYS[0]] == together[KEYS[0]]
    assert len(set(together.values())) == 3


def test_failure_reason_is_the_most_basic_problem():
    problems = [Problem("gold_leak", "x"), Problem("language_mismatch", "y"), Problem("length", "z")]
    assert failure_reason(problems) == "length"
    assert failure_reason([Problem("gold_not_affirmed", "a"), Problem("refusal", "b")]) == "refusal"


def test_settings_are_validated_and_hashed_without_attempts():
    assert GenerationSettings(max_attempts=2).config_hash == GenerationSettings(max_attempts=5).config_hash
    assert GenerationSettings(seed=1).config_hash != GenerationSettings(seed=2).config_hash
    assert GenerationSettings(mode="one_call").prompt_version == "medmisbench-one-call@1"
    with pytest.raises(ValueError, match="unknown generation mode"):
        GenerationSettings(mode="three_stage")
    with pytest.raises(ValueError, match="--provenance: expected one of"):
        GenerationSettings(provenance_sampling="random")
    with pytest.raises(ValueError, match="is a generation prompt, not a applicability prompt"):
        GenerationSettings(applicability_prompt="medmisbench-generation@1")


def test_prompts_are_versioned_and_say_what_the_paper_says():
    item = MCQItem(
        id="z", subset="MEDMISJOURNEY", language="zh", question="问题？", options={"A": "甲", "B": "乙"}, gold="B"
    )
    stage1 = get_prompt(DEFAULT_PROMPTS["applicability"]).render(item)[1]["content"]
    assert (
        "When in doubt, answer not viable." in stage1
        and "Correct answer: B: 乙" in stage1
        and "Wrong options:\nA: 甲" in stage1
    )
    assert "Not applicable when:" in stage1 and "exception_poisoning" in stage1
    stage2 = get_prompt("medmisbench-generation").render(item, content_type="cue_remapping", provenance="authority")
    assert (
        "Simplified Chinese" in stage2[1]["content"]
        and "Authority (Guideline / Discharge Note / SOP)" in stage2[1]["content"]
    )
    assert "at most 400 characters" in stage2[1]["content"]
    assert language_instruction("en") == ""
    with pytest.raises(ValueError, match="needs a provenance frame"):
        get_prompt(DEFAULT_PROMPTS["generation"]).render(item, content_type="cue_remapping")
    with pytest.raises(ValueError, match="unknown generation prompt"):
        get_prompt("medmisbench-generation@9")
    assert output_schema("generation", item)["properties"]["sentences"]["required"] == ["A", "B"]
    assert response_format("applicability", item, "json_object") == {"type": "json_object"}
    assert response_format("applicability", item, "none") is None
    strict = response_format("one_call", item, "json_schema")["json_schema"]
    assert strict["strict"] and set(strict["schema"]["required"]) == set(strict["schema"]["properties"])
