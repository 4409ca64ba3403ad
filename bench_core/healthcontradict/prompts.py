"""The five HealthContradict prompt templates (NC, CC, IC, CIC, ICC), verbatim, as versioned data.

The wording is the authors' script ``scripts/a3_create_prompt.py`` in github.com/tinaboya/HealthContradict,
which produced the released ``dataset/prompts_1.jsonl`` (every NC prompt there is this NC template,
character for character; ``tests/bench_core/healthcontradict/test_prompts.py`` checks all 920).
Paper Table 2 shows the same text in display form ("Instruction: ... Question: ... Context: ...")
without the line breaks and the trailing "Answer:" cue, which the script has and the models saw; we
keep the script's whitespace exactly (including the two spaces before the CC line break and the
single space elsewhere), because next-token scoring is sensitive to it.

The correct document is the one whose stance equals the factual answer (``query_stance``); CIC puts
it first, ICC second. Placeholders are filled with ``str.format``, so braces inside documents are safe.
"""

from __future__ import annotations

from dataclasses import dataclass

_NC_INSTRUCTION = "Answer the following question with only YES or NO based on your parametric knowledge."
_CONTEXT_INSTRUCTION = "Answer the following question with only YES or NO based on the given contextual knowledge."

TEMPLATE_ORDER = ("NC", "CC", "IC", "CIC", "ICC")


@dataclass(frozen=True)
class HCTemplate:
    """One prompt template: its short name, the repo's template number and the text with placeholders.

    ``documents`` lists which documents the template shows, in order ("correct"/"incorrect");
    ``text`` has ``{query}`` and one ``{correct}``/``{incorrect}`` placeholder per document.
    """

    name: str
    number: int
    text: str
    documents: tuple[str, ...]
    description: str

    def render(self, query: str, correct: str = "", incorrect: str = "") -> str:
        """The prompt for ``query`` with the documents filled in (documents unused by NC are ignored)."""
        return self.text.format(query=query, correct=correct, incorrect=incorrect)


@dataclass(frozen=True)
class HCTemplateSet:
    """A versioned set of the five templates; the ``id`` is recorded with every result."""

    name: str
    version: str
    templates: tuple[HCTemplate, ...]

    @property
    def id(self) -> str:
        return f"{self.name}@{self.version}"

    def __getitem__(self, name: str) -> HCTemplate:
        for template in self.templates:
            if template.name == name:
                return template
        raise KeyError(f"unknown HealthContradict template {name!r}; expected one of {', '.join(TEMPLATE_ORDER)}")


REPO_V1 = HCTemplateSet(
    name="healthcontradict-repo",
    version="1",
    templates=(
        HCTemplate(
            "NC",
            1,
            _NC_INSTRUCTION + "\nQuestion: {query} \nAnswer:",
            (),
            "no context: parametric knowledge only (control)",
        ),
        HCTemplate(
            "CC",
            2,
            _CONTEXT_INSTRUCTION + "\nQuestion: {query}\nContext: {correct}  \nAnswer:",
            ("correct",),
            "correct document as context",
        ),
        HCTemplate(
            "IC",
            3,
            _CONTEXT_INSTRUCTION + "\nQuestion: {query}\nContext: {incorrect} \nAnswer:",
            ("incorrect",),
            "incorrect document as context",
        ),
        HCTemplate(
            "CIC",
            4,
            _CONTEXT_INSTRUCTION + "\nQuestion: {query}\nContext:\n{correct}\n\n{incorrect} \nAnswer:",
            ("correct", "incorrect"),
            "correct then incorrect document",
        ),
        HCTemplate(
            "ICC",
            5,
            _CONTEXT_INSTRUCTION + "\nQuestion: {query}\nContext:\n{incorrect}\n\n{correct} \nAnswer:",
            ("incorrect", "correct"),
            "incorrect then correct document",
        ),
    ),
)

_REGISTRY = {REPO_V1.id: REPO_V1}
DEFAULT_TEMPLATE_SET = REPO_V1.id


def get_template_set(template_id: str = DEFAULT_TEMPLATE_SET) -> HCTemplateSet:
    """The template set with this ``name@version``."""
    try:
        return _REGISTRY[template_id]
    except KeyError:
        raise ValueError(
            f"unknown HealthContradict template set {template_id!r}; known: {', '.join(_REGISTRY)}"
        ) from None


def parse_templates(text: str) -> list[str]:
    """``"NC,CC"`` -> ``["NC", "CC"]`` in canonical order; unknown names raise ValueError."""
    names = [part.strip().upper() for part in text.split(",") if part.strip()]
    unknown = [name for name in names if name not in TEMPLATE_ORDER]
    if unknown or not names:
        raise ValueError(
            f"unknown template(s) {', '.join(unknown) or '(none)'}; choose from {','.join(TEMPLATE_ORDER)}"
        )
    return [name for name in TEMPLATE_ORDER if name in names]
