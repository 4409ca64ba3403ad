"""Turning a model's answer into a HealthContradict prediction: YES or NO, and the probability behind it.

The paper's prediction (Eq. 1-3) is the argmax of a softmax over two label logits, and its
probability is the predicted label's share. Every scoring path lands in the same place:

- local Hugging Face models (``bench_core.healthcontradict.hf_logits``) return, for the next token, the
  log-probability over the whole vocabulary of each YES/NO label token;
- API models asked with ``logprobs``/``top_logprobs`` return the same for the tokens the endpoint
  lists at the answer position;
- API models without logprobs give text only, parsed to yes/no with no probability.

``label_probability`` combines what is listed: the log-probabilities of all tokens that spell a
label are added up (log-sum-exp), and the two totals are normalised against each other. With one
token per label this is exactly the paper's softmax over the two label logits (a softmax over two
logits equals their log-softmax values renormalised). When a label's tokens are missing from an
API's top list, that label had at most the smallest listed probability; using that bound is
reported as ``logprobs_bound`` (the predicted label's probability is then a lower bound).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bench_core.kernel.text import strip_think

LABELS = ("yes", "no")
# The spellings that count as a label token (case variants; a leading space or SentencePiece/byte-level
# space marker is stripped before comparing).
SURFACE_FORMS: dict[str, tuple[str, ...]] = {"yes": ("YES", "Yes", "yes"), "no": ("NO", "No", "no")}
_SPACE_MARKERS = " \t\n\u2581\u0120\u010a"  # "▁" (SentencePiece), "Ġ"/"Ċ" (byte-level BPE)
_EDGE_PUNCT = "*_`'\".,:;!()[]{}<>"


def token_label(token: str | None) -> str | None:
    """``"yes"``/``"no"`` when a vocabulary token spells exactly a label (any case, any space marker)."""
    if not token:
        return None
    core = token.strip(_SPACE_MARKERS).strip(_EDGE_PUNCT).strip(_SPACE_MARKERS)
    folded = core.casefold()
    return folded if folded in LABELS else None


@dataclass(frozen=True)
class YesNo:
    """A prediction: the label (None when unreadable), P(yes) and the predicted label's probability.

    ``method``: ``logits`` (local model), ``logprobs``/``logprobs_bound`` (API log-probabilities),
    ``text`` (parsed from the answer text; no probability) or ``unparseable``.
    """

    label: str | None
    p_yes: float | None
    method: str
    detail: str | None = None

    @property
    def p_hat(self) -> float | None:
        if self.label is None or self.p_yes is None:
            return None
        return self.p_yes if self.label == "yes" else 1.0 - self.p_yes


def _logsumexp(values: Sequence[float]) -> float:
    top = max(values)
    return top + math.log(sum(math.exp(v - top) for v in values))


def label_probability(top_logprobs: Iterable[Mapping[str, Any]]) -> tuple[float | None, str | None]:
    """P(yes) among the label tokens of one position's top list, and the method (None when no label is listed)."""
    entries = [e for e in top_logprobs if isinstance(e, Mapping) and isinstance(e.get("logprob"), int | float)]
    by_label: dict[str, list[float]] = {label: [] for label in LABELS}
    for entry in entries:
        label = token_label(entry.get("token"))
        if label is not None and math.isfinite(entry["logprob"]):
            by_label[label].append(float(entry["logprob"]))
    present = [label for label in LABELS if by_label[label]]
    if not present:
        return None, None
    totals = {label: _logsumexp(values) for label, values in by_label.items() if values}
    method = "logprobs"
    if len(present) == 1:
        # The unlisted label had at most the smallest listed probability (the list is a top-k) and
        # at most the mass not covered by the list.
        listed = [math.exp(float(e["logprob"])) for e in entries if math.isfinite(e["logprob"])]
        bound = min(min(listed), max(1.0 - sum(listed), 1e-12))
        totals["no" if present[0] == "yes" else "yes"] = math.log(bound)
        method = "logprobs_bound"
    top = max(totals.values())
    weight_yes = math.exp(totals["yes"] - top)
    weight_no = math.exp(totals["no"] - top)
    return weight_yes / (weight_yes + weight_no), method


def answer_position(logprobs: Sequence[Mapping[str, Any]]) -> int | None:
    """The generated position holding the answer: the first token that spells a label, else the first token."""
    if not logprobs:
        return None
    for index, entry in enumerate(logprobs):
        if token_label(entry.get("token")) is not None:
            return index
    return 0


_FIRST_WORD = re.compile(r"^[\W_]*(yes|no)\b", re.I)
_ANSWER_IS = re.compile(r"\b(?:answer|verdict)\s*(?:is|:)\s*[\W_]*(yes|no)\b", re.I)


def extract_yes_no(text: str | None) -> tuple[str | None, str]:
    """Read YES/NO from an answer text: leading word, a JSON ``answer``, "answer: X", or a lone mention.

    Returns (label or None, method). "Not sure" is not "no": labels match whole words only.
    """
    body = strip_think(text).strip()
    if not body:
        return None, "unparseable"
    match = _FIRST_WORD.match(body)
    if match:
        return match.group(1).lower(), "first_word"
    try:
        value = json.loads(body)
    except (json.JSONDecodeError, ValueError):
        value = None
    if isinstance(value, dict):
        for key in ("answer", "label", "prediction"):
            found = _FIRST_WORD.match(str(value.get(key, "")))
            if found:
                return found.group(1).lower(), "json"
    found = _ANSWER_IS.findall(body)
    if found:
        return found[-1].lower(), "answer_is"
    mentions = {word.lower() for word in re.findall(r"\b(yes|no)\b", body, re.I)}
    if len(mentions) == 1:
        return mentions.pop(), "only_mention"
    return None, "unparseable"


def predict(text: str | None, logprobs: Sequence[Mapping[str, Any]] | None, *, source: str) -> YesNo:
    """The prediction for one response.

    ``source="logits"`` (local model): the label is the argmax of the label softmax, as in the paper,
    whatever token the model would have generated. ``source="api"``: the label is read from the text
    (what the model said); the probability comes from the log-probabilities when listed, and the
    log-probabilities decide only when the text cannot be read.
    """
    p_yes, method = None, None
    position = answer_position(logprobs or [])
    if position is not None:
        p_yes, method = label_probability((logprobs or [])[position].get("top_logprobs") or [])
    if source == "logits":
        if p_yes is None:
            return YesNo(None, None, "unparseable", "no label token scored")
        return YesNo("yes" if p_yes >= 0.5 else "no", p_yes, "logits")
    label, how = extract_yes_no(text)
    if label is not None:
        return YesNo(label, p_yes, method or "text", how)
    if p_yes is not None:
        return YesNo("yes" if p_yes >= 0.5 else "no", p_yes, method or "logprobs", "text unreadable")
    return YesNo(None, None, "unparseable", how)
