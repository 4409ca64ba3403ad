"""Language detection sufficient for the benchmark's two scripts (Latin and Chinese).

MedMisBench mixes English subsets with the Chinese MedMisJourney subset; routing items to
readers and validating generated sentences only needs to tell those apart, so a script count
is more predictable than a statistical detector.
"""

from __future__ import annotations

import re

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN = re.compile(r"[A-Za-z]")


def detect_language(text: str) -> str:
    """Return ``"zh"`` when Chinese characters make up a fair share of the letters, else ``"en"``.

    Chinese medical text often carries Latin abbreviations (CT, mmol/L), so the threshold is on
    the share of CJK characters among all letters, not on their mere presence.
    """
    cjk = len(_CJK.findall(text))
    latin = len(_LATIN.findall(text))
    if cjk == 0:
        return "en"
    return "zh" if cjk >= 0.2 * (cjk + latin) else "en"
