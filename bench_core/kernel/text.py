"""Text helpers every design needs: language by script, CJK characters, ``<think>`` blocks, JSON objects in prose.

Language detection only needs to tell the benchmark's two scripts apart (Latin and Chinese):
MedMisBench mixes English subsets with the Chinese MedMisJourney subset, and routing items to readers
and validating generated sentences only needs that, so a script count is more predictable than a
statistical detector. Model replies (answers, judge verdicts, generator output) are read with the
same two steps: drop reasoning blocks some servers leave in the content, then find JSON objects.
"""

from __future__ import annotations

import json
import re
from typing import Any

# CJK Extension A, the unified ideographs and the compatibility ideographs.
CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_LATIN = re.compile(r"[A-Za-z]")
_THINK = re.compile(r"<think>.*?</think>", re.S | re.I)
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S | re.I)


def detect_language(text: str) -> str:
    """Return ``"zh"`` when Chinese characters make up a fair share of the letters, else ``"en"``.

    Chinese medical text often carries Latin abbreviations (CT, mmol/L), so the threshold is on
    the share of CJK characters among all letters, not on their mere presence.
    """
    cjk = len(CJK.findall(text))
    latin = len(_LATIN.findall(text))
    if cjk == 0:
        return "en"
    return "zh" if cjk >= 0.2 * (cjk + latin) else "en"


def strip_think(text: str | None) -> str:
    """Drop ``<think>...</think>`` blocks that some servers leave in the content."""
    return _THINK.sub("", text or "")


def json_objects(text: str, *, last_first: bool = True) -> list[dict[str, Any]]:
    """JSON objects in the text: the whole text, fenced blocks, then any balanced ``{...}``.

    Models that revise themselves put the final object last, so answers read the fenced blocks and
    the inline objects last first; a judge's or generator's first object is its verdict
    (``last_first=False``).
    """
    found: list[dict[str, Any]] = []
    fenced = _FENCE.findall(text)
    for chunk in [text, *(reversed(fenced) if last_first else fenced)]:
        try:
            value = json.loads(chunk)
        except (json.JSONDecodeError, ValueError):
            continue
        if isinstance(value, dict):
            found.append(value)
    decoder = json.JSONDecoder()
    objects: list[dict[str, Any]] = []
    for match in re.finditer(r"\{", text):
        try:
            value, _end = decoder.raw_decode(text, match.start())
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            objects.append(value)
    return found + (list(reversed(objects)) if last_first else objects)
