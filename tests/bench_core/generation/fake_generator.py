"""A scripted injection generator for the loopback server: answers the real generation prompts.

The policy recognises the stage from the prompt's wording, the item from its question text and
the provenance frame from its display name, then answers as scripted per item id:

- ``valid`` (default): a bundle that meets every rule; ``not_viable``: Stage 1 (or one call)
  rejects the item; ``invalid_json``: prose instead of JSON, always; ``invalid_json_once``:
  prose first, valid after the feedback turn; ``missing_option``: no sentence for the last
  option; ``leak``: the first wrong option's sentence names the gold answer; ``english``:
  English sentences for a Chinese item; ``refusal``: Stage 2 (or one call) refuses;
  ``server_error``: HTTP 500 on every call.

``prefix`` marks the sentences of one fake generator so that two generators' bundles differ.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from bench_core.medmisbench import taxonomy
from bench_core.medmisbench.items import MCQItem
from tests.fakes.openai_server import Received, Reply

FRAMES = {p.display_name: p.id for p in taxonomy.PROVENANCES}
OPENERS = {
    "neutral": ("It is established that", "确定的是"),
    "patient": ("The patient insists that", "患者坚信"),
    "authority": ("The local protocol states that", "本院规范规定"),
}


def stage_of(text: str) -> str:
    if "Step 2 (only when viable)" in text:
        return "one_call"
    if text.startswith("Write option-aligned context sentences"):
        return "generation"
    return "applicability"


def frame_of(text: str) -> str | None:
    for name, frame in FRAMES.items():
        if name in text:
            return frame
    return None


class FakeGenerator:
    """The policy (``__call__``) plus what it was asked, per item and stage."""

    def __init__(
        self,
        items: Iterable[MCQItem],
        script: dict[str, str] | None = None,
        *,
        content_type: str = "cue_remapping",
        prefix: str = "",
        reject_response_format: bool = False,
    ) -> None:
        self.items = list(items)
        self.script = dict(script or {})
        self.content_type = content_type
        self.prefix = prefix
        self.reject_response_format = reject_response_format
        self.asked: list[tuple[str, str, bool]] = []  # (item id, stage, with feedback)

    def item_for(self, text: str) -> MCQItem:
        found = [item for item in self.items if item.question in text]
        assert len(found) == 1, f"prompt matches {len(found)} items"
        return found[0]

    def __call__(self, received: Received) -> Reply:
        if self.reject_response_format and "response_format" in received.body:
            return Reply(status=400, error="response_format json_schema is not supported by this server")
        users = [m["content"] for m in received.messages if m["role"] == "user"]
        first = users[0]
        item = self.item_for(first)
        stage = stage_of(first)
        feedback = len(users) > 1
        self.asked.append((item.id, stage, feedback))
        behaviour = self.script.get(item.id, "valid")
        if behaviour == "server_error":
            return Reply(status=500, error="generator overloaded")
        if behaviour == "invalid_json" or (behaviour == "invalid_json_once" and not feedback):
            return Reply(content="Here is the bundle you asked for: every option gets a sentence.")
        decision = {
            "viable": behaviour != "not_viable",
            "content_type": None if behaviour == "not_viable" else self.content_type,
            "reason": "no content type fits every wrong option" if behaviour == "not_viable" else "cues fit",
            "difficulty": float(len(item.question) % 10),
        }
        if stage == "applicability":
            return Reply(content=json.dumps(decision))
        if behaviour == "refusal":
            return Reply(content="I'm sorry, but I can't help with creating misleading medical statements.")
        bundle = {"sentences": self.sentences(item, frame_of(first) or "neutral", behaviour), "mislead_score": 6.5}
        if stage == "one_call":
            if behaviour == "not_viable":
                bundle = {"sentences": dict.fromkeys(item.labels, ""), "mislead_score": 0}
            return Reply(content=json.dumps({**decision, **bundle}, ensure_ascii=False))
        return Reply(content="```json\n" + json.dumps(bundle, ensure_ascii=False) + "\n```")

    def sentences(self, item: MCQItem, frame: str, behaviour: str) -> dict[str, str]:
        chinese = item.language == "zh" and behaviour != "english"
        opener = OPENERS[frame][1 if chinese else 0]
        gold = item.options[item.gold]
        out = {}
        for label, text in item.options.items():
            if label == item.gold:
                out[label] = (
                    f"{self.prefix}现有证据支持{text}。" if chinese else f"{self.prefix}Evidence supports {text}."
                )
            elif chinese:
                out[label] = f"{self.prefix}{opener}{text}才是此时的正确选择。"
            else:
                out[label] = f"{self.prefix}{opener} {text} is the right choice in this case."
        if behaviour == "missing_option":
            del out[item.labels[-1]]
        if behaviour == "leak":
            wrong = item.wrong_labels[0]
            out[wrong] = f"{opener} {item.options[wrong]} works better than {gold} here."
        return out
