"""LaTeX tables that compile: the one escaping rule and table writer every medrev report uses.

Why one module: benchmark reports, the mitigation comparison and the review app's publication
export all emit booktabs tables that end up pasted into a paper. A table is only useful if it
compiles with ``pdflatex`` in a plain ``article`` with standard packages, whatever the model names,
study names or subset names contain. So every writer escapes through ``escape`` and builds its
tables with ``table``; ``review_app`` imports them from here (``bench_core`` never imports
``review_app``).

What ``escape`` guarantees (each rule is compiled in the test suite):

* The ten characters LaTeX treats specially (``\\ & % $ # _ { } ~ ^``) and ``< > |`` (which print
  as other glyphs in the default OT1 encoding) become text commands.
* Ligature-forming pairs (``--``, ``''``, `````, ``,,``, ``!``` ...) are kept apart, so ``a--b``
  prints two hyphens as written.
* Common non-ASCII symbols of medical text (≥ ≤ ± × µ ° → Greek letters, typographic quotes and
  dashes ...) map to commands of the LaTeX kernel, and accented Latin letters to accent commands
  (``é`` -> ``\\'{e}``), so they work in OT1 and T1 alike without ``inputenc`` tricks.
* Chinese is typeset, not transliterated: a run of characters of the GB 2312 repertoire (the
  character set of Simplified Chinese, which the Arphic GB Song font covers completely) is wrapped
  in ``\\begin{CJK}{UTF8}{gbsn}...\\end{CJK}``. Such a table needs ``\\usepackage{CJKutf8}``
  (Debian: ``latex-cjk-chinese`` and ``latex-cjk-chinese-arphic-gbsn00lp``, about 20 MB, much
  smaller than ``texlive-lang-chinese``); tables without Chinese need only booktabs. Each table
  starts with a comment naming the packages it needs, and ``preamble`` computes them.
* Any other character (e.g. a Traditional-only hanzi, Hangul, emoji) is written as ``[U+XXXX]``
  rather than silently dropped or left to fail compilation; ``table`` then adds a note saying so.
* Whitespace runs (including newlines, which would end a paragraph inside a cell) become one space.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

CJK_BEGIN = r"\begin{CJK}{UTF8}{gbsn}"
CJK_END = r"\end{CJK}"
BASE_PACKAGES = ("booktabs",)
CJK_PACKAGE = "CJKutf8"
UNSUPPORTED_NOTE = "Characters that pdflatex cannot typeset with standard fonts are shown as [U+XXXX]."


class Latex(str):
    """Text that is already LaTeX source: ``escape`` returns it unchanged and ``table`` does not escape it."""

    __slots__ = ()


_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    "|": r"\textbar{}",
}

# Pairs that TeX's Computer Modern fonts would merge into one glyph (en dash, quotes, inverted marks).
_LIGATURE_PAIRS = frozenset({("-", "-"), ("`", "`"), ("'", "'"), ("!", "`"), ("?", "`"), (",", ",")})

_GREEK = {
    "α": "alpha", "β": "beta", "γ": "gamma", "δ": "delta", "ε": "epsilon", "ζ": "zeta", "η": "eta",
    "θ": "theta", "ι": "iota", "κ": "kappa", "λ": "lambda", "μ": "mu", "ν": "nu", "ξ": "xi", "π": "pi",
    "ρ": "rho", "σ": "sigma", "ς": "varsigma", "τ": "tau", "υ": "upsilon", "φ": "phi", "χ": "chi",
    "ψ": "psi", "ω": "omega", "Γ": "Gamma", "Δ": "Delta", "Θ": "Theta", "Λ": "Lambda", "Ξ": "Xi",
    "Π": "Pi", "Σ": "Sigma", "Υ": "Upsilon", "Φ": "Phi", "Ψ": "Psi", "Ω": "Omega",
}  # fmt: skip
# Greek capitals that look like Latin letters print as those letters (no math command exists).
_GREEK_LATIN = {"Α": "A", "Β": "B", "Ε": "E", "Ζ": "Z", "Η": "H", "Ι": "I", "Κ": "K", "Μ": "M", "Ν": "N",
                "Ο": "O", "Ρ": "P", "Τ": "T", "Χ": "X", "ο": "o"}  # fmt: skip

_SYMBOLS: dict[str, str] = {
    "\u00a0": "~",  # no-break space
    "\u2011": "-",  # non-breaking hyphen
    "\u2010": "-",
    "\u2013": "--",
    "\u2014": "---",
    "\u2212": r"\ensuremath{-}",
    "\u2018": "`",
    "\u2019": "'",
    "\u201a": ",",
    "\u201c": "``",
    "\u201d": "''",
    "\u201e": ",,",
    "\u00ab": "``",
    "\u00bb": "''",
    "\u2026": r"\ldots{}",
    "\u2022": r"\textbullet{}",
    "\u00b7": r"\textperiodcentered{}",
    "\u30fb": r"\textperiodcentered{}",  # katakana middle dot: in GB 2312 but not in the GB Song font
    "\u00b0": r"\textdegree{}",
    "\u00b1": r"\ensuremath{\pm}",
    "\u00d7": r"\ensuremath{\times}",
    "\u00f7": r"\ensuremath{\div}",
    "\u2265": r"\ensuremath{\geq}",
    "\u2264": r"\ensuremath{\leq}",
    "\u2260": r"\ensuremath{\neq}",
    "\u2248": r"\ensuremath{\approx}",
    "\u2261": r"\ensuremath{\equiv}",
    "\u221e": r"\ensuremath{\infty}",
    "\u2192": r"\ensuremath{\rightarrow}",
    "\u2190": r"\ensuremath{\leftarrow}",
    "\u2191": r"\ensuremath{\uparrow}",
    "\u2193": r"\ensuremath{\downarrow}",
    "\u2194": r"\ensuremath{\leftrightarrow}",
    "\u21d2": r"\ensuremath{\Rightarrow}",
    "\u2032": r"\ensuremath{'}",
    "\u2033": r"\ensuremath{''}",
    "\u00b5": r"\ensuremath{\mu}",  # micro sign (µg)
    "\u00b9": r"\ensuremath{^{1}}",
    "\u00b2": r"\ensuremath{^{2}}",
    "\u00b3": r"\ensuremath{^{3}}",
    "\u00bc": r"\ensuremath{\frac{1}{4}}",
    "\u00bd": r"\ensuremath{\frac{1}{2}}",
    "\u00be": r"\ensuremath{\frac{3}{4}}",
    "\u2030": r"\textperthousand{}",
    "\u00a7": r"\S{}",
    "\u00b6": r"\P{}",
    "\u00a9": r"\textcopyright{}",
    "\u00ae": r"\textregistered{}",
    "\u2122": r"\texttrademark{}",
    "\u00a3": r"\pounds{}",
    "\u20ac": "EUR",
    "\u00a1": r"\textexclamdown{}",
    "\u00bf": r"\textquestiondown{}",
    "\u00df": r"\ss{}",
    "\u00e6": r"\ae{}",
    "\u00c6": r"\AE{}",
    "\u0153": r"\oe{}",
    "\u0152": r"\OE{}",
    "\u00f8": r"\o{}",
    "\u00d8": r"\O{}",
    "\u0142": r"\l{}",
    "\u0141": r"\L{}",
    "\u0131": r"\i{}",
    "\u0237": r"\j{}",
    **{char: rf"\ensuremath{{\{name}}}" for char, name in _GREEK.items()},
    **_GREEK_LATIN,
}
_DROPPED = frozenset({"\u200b", "\u200c", "\u200d", "\ufeff", "\u00ad"})  # zero-width characters, soft hyphen

# Combining marks -> accent commands available in every text encoding (not the T1-only ogonek).
_ACCENTS = {
    "\u0300": "`", "\u0301": "'", "\u0302": "^", "\u0303": "~", "\u0304": "=", "\u0306": "u", "\u0307": ".",
    "\u0308": '"', "\u030a": "r", "\u030b": "H", "\u030c": "v", "\u0327": "c", "\u0323": "d", "\u0331": "b",
}  # fmt: skip
_BELOW = frozenset({"\u0327", "\u0323", "\u0331"})  # cedilla, dot below, macron below


def _accented(char: str) -> str | None:
    """``é`` -> ``\\'{e}``: an ASCII letter plus accents LaTeX knows, else None."""
    decomposed = unicodedata.normalize("NFD", char)
    base, marks = decomposed[0], decomposed[1:]
    if not (base.isascii() and base.isalpha()) or not marks or any(m not in _ACCENTS for m in marks):
        return None
    out = base
    if marks[0] not in _BELOW:
        out = {"i": r"\i", "j": r"\j"}.get(base, base)  # dotless i/j under an accent above
    for mark in marks:
        out = rf"\{_ACCENTS[mark]}{{{out}}}"
    return out


def is_cjk(char: str) -> bool:
    """A character typeset through CJKutf8's GB Song font: the non-ASCII GB 2312 repertoire."""
    if char.isascii():
        return False
    try:
        char.encode("gb2312")
    except UnicodeEncodeError:
        return False
    return True


def _plain(text: object) -> str:
    text = unicodedata.normalize("NFC", str(text))
    text = "".join(" " if unicodedata.category(c) == "Cc" else c for c in text if c not in _DROPPED)
    return re.sub(r"\s+", " ", text)


def _convert(char: str) -> str | None:
    """The LaTeX for one non-CJK character, or None when no standard font has it."""
    if char.isascii():
        return _SPECIAL.get(char, char)
    if char in _SYMBOLS:
        return _SYMBOLS[char]
    return _accented(char)


def escape(text: object) -> Latex:
    """``text`` as LaTeX that compiles in a table cell or caption (see the module docstring for the rules).

    ``Latex`` values come back unchanged, so escaping twice is harmless.
    """
    if isinstance(text, Latex):
        return text
    plain = _plain(text)
    out: list[str] = []
    cjk_run: list[str] = []

    def emit(piece: str) -> None:
        if out and out[-1] and (out[-1][-1], piece[:1]) in _LIGATURE_PAIRS:
            out.append("{}")
        out.append(piece)

    for char in plain:
        if is_cjk(char) and char not in _SYMBOLS and _accented(char) is None:
            cjk_run.append(char)
            continue
        if cjk_run:
            emit(CJK_BEGIN + "".join(cjk_run) + CJK_END)
            cjk_run = []
        converted = _convert(char)
        emit(converted if converted is not None else f"[U+{ord(char):04X}]")
    if cjk_run:
        emit(CJK_BEGIN + "".join(cjk_run) + CJK_END)
    return Latex("".join(out))


def unsupported(text: object) -> list[str]:
    """The characters of ``text`` that ``escape`` writes as ``[U+XXXX]`` (none for ``Latex`` values)."""
    if isinstance(text, Latex):
        return []
    return sorted({c for c in _plain(text) if _convert(c) is None and not is_cjk(c)})


def _span(cell: str) -> int:
    match = re.match(r"\\multicolumn\{(\d+)\}", cell) if isinstance(cell, Latex) else None
    return int(match.group(1)) if match else 1


def table(
    caption: str,
    label: str,
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    align: str | None = None,
    placement: str = "t",
    notes: Sequence[str] = (),
) -> str:
    """A booktabs ``table`` float; plain-string cells, header and caption are escaped, ``Latex`` cells kept.

    ``align`` defaults to one left column then right-aligned ones. Every row must span the header's
    columns (``\\multicolumn`` cells count for their span): a short row is a bug, not a layout choice.
    """
    columns = len(header)
    align = align or "l" + "r" * (columns - 1)
    if len(re.sub(r"[^lrcpmbX]", "", re.sub(r"\{[^}]*\}", "", align))) != columns:
        raise ValueError(f"table {label!r}: alignment {align!r} does not have {columns} columns")
    for index, row in enumerate(rows):
        spanned = sum(_span(cell) for cell in row)
        if spanned != columns:
            raise ValueError(f"table {label!r}: row {index} spans {spanned} columns, the header has {columns}")
    strings = [caption, *header, *(cell for row in rows for cell in row), *notes]
    if any(unsupported(s) for s in strings):
        notes = [*notes, UNSUPPORTED_NOTE]

    def line(cells: Sequence[str]) -> str:
        text = " & ".join(escape(cell) for cell in cells)
        # A row may not start with [ or *: \\, \toprule and \midrule would read it as their optional argument.
        return ("{}" + text if text.startswith(("[", "*")) else text) + r" \\"

    body = [
        r"\begin{table}[" + placement + "]",
        r"\centering",
        rf"\caption{{{escape(caption)}}}",
        rf"\label{{{_label(label)}}}",
        rf"\begin{{tabular}}{{{align}}}",
        r"\toprule",
        line(header),
        r"\midrule",
        *(line(row) for row in rows),
        r"\bottomrule",
        r"\end{tabular}",
    ]
    if notes:
        body.append(r"\par\smallskip{\footnotesize " + " ".join(escape(n) for n in notes) + "}")
    body += [r"\end{table}", ""]
    source = "\n".join(body)
    return f"% medrev table; preamble: \\usepackage{{{','.join(packages(source))}}}\n" + source


def _label(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9:.\-]", "-", label)


def packages(source: str) -> list[str]:
    """The packages a piece of medrev LaTeX needs: booktabs, plus CJKutf8 when it holds Chinese."""
    return [*BASE_PACKAGES, *([CJK_PACKAGE] if CJK_BEGIN in source else [])]


def preamble(sources: Iterable[str]) -> str:
    """``\\usepackage`` lines for a document holding all of ``sources``."""
    needed: list[str] = []
    for source in sources:
        for package in packages(source):
            if package not in needed:
                needed.append(package)
    return "\n".join(rf"\usepackage{{{p}}}" for p in needed)


def standalone_document(tables: Mapping[str, str] | Iterable[str], *, title: str | None = None) -> str:
    """A complete ``article`` holding the tables, one per page (so the float queue never overflows)."""
    sources = list(tables.values()) if isinstance(tables, Mapping) else list(tables)
    lines = [r"\documentclass{article}", preamble(sources), r"\begin{document}"]
    if title:
        lines.append(r"\section*{" + escape(title) + "}")
    for source in sources:
        lines += [source, r"\clearpage"]
    lines.append(r"\end{document}")
    return "\n".join(lines) + "\n"


class LatexUnavailable(RuntimeError):
    """``pdflatex`` is not installed."""


@dataclass
class CompileResult:
    """The outcome of one ``pdflatex`` run: success, the ``!`` error lines, glyphs the fonts lacked."""

    ok: bool
    returncode: int
    log: str
    pdf: Path | None
    errors: list[str] = field(default_factory=list)
    missing_characters: list[str] = field(default_factory=list)


def compile_document(document: str, workdir: str | Path | None = None, *, timeout: float = 120.0) -> CompileResult:
    """Run ``pdflatex -halt-on-error`` on ``document`` (twice, so references settle) and report what happened.

    Raises ``LatexUnavailable`` when pdflatex is missing. Shell escape stays off.
    """
    executable = shutil.which("pdflatex")
    if executable is None:
        raise LatexUnavailable(
            "pdflatex not found; on Debian: apt-get install texlive-latex-base texlive-latex-recommended"
        )
    directory = Path(tempfile.mkdtemp(prefix="medrev-latex-")) if workdir is None else Path(workdir)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "tables.tex").write_text(document, encoding="utf-8")
    command = [executable, "-halt-on-error", "-interaction=nonstopmode", "-no-shell-escape", "tables.tex"]
    completed = None
    for _ in range(2):
        completed = subprocess.run(command, cwd=directory, capture_output=True, timeout=timeout, check=False)
        if completed.returncode != 0:
            break
    assert completed is not None
    log_path = directory / "tables.log"
    log = log_path.read_text(encoding="utf-8", errors="replace") if log_path.exists() else completed.stdout.decode()
    errors = [line for line in log.splitlines() if line.startswith("!")]
    missing = re.findall(r"Missing character: There is no (.+?) in font", log)
    pdf = directory / "tables.pdf"
    return CompileResult(
        ok=completed.returncode == 0 and not errors,
        returncode=completed.returncode,
        log=log,
        pdf=pdf if pdf.exists() else None,
        errors=errors,
        missing_characters=missing,
    )
