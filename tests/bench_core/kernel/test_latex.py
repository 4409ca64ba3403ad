"""The shared LaTeX helper: escaping rules, table shape checks, and (with pdflatex) that it all compiles."""

from __future__ import annotations

import contextlib
import os
import shutil

import pytest

from bench_core.kernel import latex
from bench_core.kernel.latex import Latex, escape

# CI sets MEDREV_REQUIRE_LATEX=1 (.ci/run installs texlive), so a missing pdflatex fails there instead of skipping.
needs_pdflatex = pytest.mark.skipif(
    shutil.which("pdflatex") is None and not os.environ.get("MEDREV_REQUIRE_LATEX"),
    reason="pdflatex not installed (apt-get install texlive-latex-base texlive-latex-recommended)",
)


def gb2312_characters() -> list[str]:
    """Every character of the GB 2312 repertoire (decoded from each valid two-byte code)."""
    chars = []
    for high in range(0xA1, 0xF8):
        for low in range(0xA1, 0xFF):
            with contextlib.suppress(UnicodeDecodeError):
                chars.append(bytes([high, low]).decode("gb2312"))
    return chars


def test_special_characters_are_escaped():
    assert escape(r"50% & a_b #1 $x {y} ~ ^ \ <>|") == (
        r"50\% \& a\_b \#1 \$x \{y\} \textasciitilde{} \textasciicircum{} \textbackslash{} "
        r"\textless{}\textgreater{}\textbar{}"
    )


def test_ligatures_are_broken_so_text_prints_as_written():
    assert escape("a--b") == "a-{}-b"
    assert escape("a---b") == "a-{}-{}-b"
    assert escape("''x'' ``y``") == "'{}'x'{}' `{}`y`{}`"
    assert escape("!`") == "!{}`"
    assert escape("–-") == "--{}-"  # an en dash then a hyphen, not an em dash


def test_symbols_and_accents():
    assert escape("≥5 µg ±2 α-blocker 37°C") == (
        r"\ensuremath{\geq}5 \ensuremath{\mu}g \ensuremath{\pm}2 \ensuremath{\alpha}-blocker 37\textdegree{}C"
    )
    assert escape("café naïve Ångström Dvořák façade ß") == (
        r"caf\'{e} na\"{\i}ve \r{A}ngstr\"{o}m Dvo\v{r}\'{a}k fa\c{c}ade \ss{}"
    )
    assert escape("“quoted” – dash … ‘x’") == r"``quoted'' -- dash \ldots{} `x'"


def test_chinese_runs_are_wrapped_for_cjkutf8():
    assert escape("模型 A，测试（中文）b") == (
        r"\begin{CJK}{UTF8}{gbsn}模型\end{CJK} A\begin{CJK}{UTF8}{gbsn}，测试（中文）\end{CJK}b"
    )
    assert latex.packages(escape("中文")) == ["booktabs", "CJKutf8"]
    assert latex.packages(escape("plain")) == ["booktabs"]


def test_characters_without_a_font_are_shown_as_code_points():
    assert escape("鴀 한 😀") == "[U+9D00] [U+D55C] [U+1F600]"  # Traditional-only hanzi, Hangul, emoji
    assert latex.unsupported("ok 鴀 😀") == ["鴀", "😀"]
    assert latex.unsupported(Latex("😀")) == []


def test_whitespace_and_control_characters():
    assert escape("two\n\nparagraphs\tand\x07 bell\u200b") == "two paragraphs and bell"


def test_latex_values_pass_through_and_escaping_is_idempotent():
    once = escape("a_b & c")
    assert escape(once) == once
    assert escape(Latex(r"\textbf{x}")) == r"\textbf{x}"


def test_table_shape_and_notes():
    source = latex.table(
        "Caption 100%", "tab:x y", ["Model", "Rate"], [["m_1", "5"], [Latex(r"\multicolumn{2}{l}{note}")]]
    )
    assert source.splitlines()[0] == r"% medrev table; preamble: \usepackage{booktabs}"
    assert r"\caption{Caption 100\%}" in source and r"\label{tab:x-y}" in source
    assert "m\\_1 & 5 \\\\" in source and r"\multicolumn{2}{l}{note} \\" in source
    assert r"\toprule" in source and r"\midrule" in source and r"\bottomrule" in source
    with pytest.raises(ValueError, match="row 0 spans 1 columns, the header has 2"):
        latex.table("c", "t", ["a", "b"], [["only one"]])
    with pytest.raises(ValueError, match="does not have 2 columns"):
        latex.table("c", "t", ["a", "b"], [], align="lrr")
    noted = latex.table("c", "t", ["a"], [["😀"]])
    assert "are shown as [U+XXXX]." in noted and "[U+1F600]" in noted
    assert "shown as" not in latex.table("c", "t", ["a"], [["fine"]])


def test_rows_starting_with_a_bracket_are_protected():
    source = latex.table("c", "t", ["[h]"], [["[U+1]"], ["*"]])
    assert "{}[h] \\\\" in source and "{}[U+1] \\\\" in source and "{}* \\\\" in source


def test_standalone_document_has_the_packages_and_one_table_per_page():
    tables = {"a": latex.table("a", "a", ["x"], [["中文"]]), "b": latex.table("b", "b", ["x"], [["y"]])}
    document = latex.standalone_document(tables, title="All & every")
    assert document.startswith("\\documentclass{article}\n\\usepackage{booktabs}\n\\usepackage{CJKutf8}\n")
    assert document.count(r"\clearpage") == 2 and r"\section*{All \& every}" in document


@needs_pdflatex
def test_every_escaped_character_compiles_without_missing_glyphs(tmp_path):
    """All of GB 2312, every mapped symbol and accented Latin letter, specials and ligature pairs."""
    chars = gb2312_characters()
    rows = [["".join(chars[i : i + 40])] for i in range(0, len(chars), 40)]
    symbols = list(latex._SYMBOLS) + [chr(c) for c in range(0xC0, 0x250) if latex._accented(chr(c))]
    rows += [["".join(symbols[i : i + 30])] for i in range(0, len(symbols), 30)]
    rows += [[r"\ & % $ # _ { } ~ ^ < > | -- '' `` !` ?` ,, [x] 鴀 😀"], ["[starts with a bracket"], ["*"]]
    tables = [latex.table(f"Part {i} 中文 & 100%", f"tab:{i}", ["Text"], rows[i : i + 40], align="p{12cm}")
              for i in range(0, len(rows), 40)]  # fmt: skip
    result = latex.compile_document(latex.standalone_document(tables), tmp_path)
    assert result.ok, "\n".join(result.errors) + result.log[-3000:]
    assert result.missing_characters == []
    assert result.pdf is not None and result.pdf.read_bytes()[:5] == b"%PDF-"


@needs_pdflatex
def test_a_broken_document_is_reported_not_hidden(tmp_path):
    result = latex.compile_document(
        "\\documentclass{article}\\begin{document}\\undefinedmacro\\end{document}", tmp_path
    )
    assert not result.ok and any("Undefined control sequence" in line for line in result.errors)
