"""The one way a lead page shows a table: labels for people, one rounding rule per kind, a caption under it.

Lead tables used to reach the browser as they left pandas: column names for headers
(``done_share``), ``None`` in empty cells, each number rounded by whatever drew it (Streamlit's
printf in the browser rounds 12.5 % up, Python's ``format`` rounds it to even, so a warning said
12 % and the table 13 %), and 24 columns pushed off a laptop screen. Every lead table goes
through :func:`show` instead:

* **Labels.** A :class:`Column` gives each shown column its human label, with the unit in the
  header (``Median time (min)``, ``Done (%)``, ``Time (s)``) and a tooltip; a column without one
  is not shown.
* **One rounding rule per kind.** Cells are formatted here, in Python, by the functions below
  (:func:`percent`, :func:`whole`, :func:`decimal`, :func:`minutes`, :func:`p_value`,
  :func:`odds_ratio`); a sentence elsewhere that quotes the same figure uses the same function,
  so the two agree. Percentages come from
  :func:`review_app.analysis.formatting.format_percent`, which the services' sentences use too.
* **Missing is a dash.** An empty cell shows :data:`MISSING` (the dash the paper tables use), never
  ``None``, ``nan`` or ``<NA>``.
* **It fits.** Secondary columns (``Column.secondary``) move to an expander under the table (or,
  for a paper table whose CSV download has them, out of the page), so the main one fits a
  1366 px laptop without scrolling sideways.
* **A caption** under each table (and :func:`caption` under each chart) says what it shows and
  which tasks it counts.

The data reach the grid unchanged (a pandas Styler carries only the display text), so sorting by a
column sorts the numbers, not their text, and a test reads the page's own frame.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import pandas as pd
import streamlit as st

from review_app.analysis.formatting import MISSING, format_odds_ratio, format_p, format_percent
from review_app.services.export.paper import PaperTable
from review_app.services.priority import lead_step
from review_app.ui.components.text import plain

Kind = Literal[
    "text", "count", "number", "percent", "seconds", "minutes", "p", "odds_ratio", "log_odds", "bool", "languages"
]
UNITS: dict[str, str] = {"percent": "%", "seconds": "s", "minutes": "min"}
LANGUAGES: dict[str, str] = {"en": "English", "zh": "Chinese"}
Width = Literal["small", "medium", "large"] | int | None


# --- one formatting function per kind ----------------------------------------------------------------


def is_missing(value: object) -> bool:
    """None, NaN, pandas' NA and NaT, an infinite number, and empty text: all shown as :data:`MISSING`."""
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    if isinstance(value, str):
        return not value.strip()
    if isinstance(value, float | int) and not isinstance(value, bool):
        return not math.isfinite(value)
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):  # a list or an array: a value
        return False


def percent(share: object, digits: int = 0, *, sign: bool = True) -> str:
    """A share (0-1) as a percentage, ``0.125`` -> ``12%``: the rounding of every percentage a lead reads.

    ``sign=False`` leaves out the ``%`` for a table whose header carries the unit. Warnings and
    tables quote the same figure through this function, so they never round it two ways.
    """
    if is_missing(share):
        return MISSING
    text = format_percent(share, digits, missing=MISSING)
    return text if sign else text.removesuffix("%")


def whole(value: object) -> str:
    """A count with thousands separators: ``12345`` -> ``12,345``."""
    if is_missing(value):
        return MISSING
    return f"{round(float(value)):,}"


def decimal(value: object, digits: int = 2) -> str:
    """A number with ``digits`` decimals and thousands separators: ``1234.567`` -> ``1,234.57``."""
    if is_missing(value):
        return MISSING
    text = f"{float(value):,.{digits}f}"
    return text.removeprefix("-") if float(text.replace(",", "")) == 0 else text  # no "-0.00"


def minutes(seconds: object, digits: int = 1) -> str:
    """Seconds read as minutes: ``272`` -> ``4.5``."""
    return MISSING if is_missing(seconds) else decimal(float(seconds) / 60, digits)


def p_value(value: object) -> str:
    """A p-value as journals print it (``< 0.001``, ``0.034``, ``0.41``)."""
    return format_p(value, missing=MISSING)


def odds_ratio(value: object) -> str:
    """An odds ratio with precision that fits its size (``0.045``, ``2.35``, ``23.5``, ``> 1000``)."""
    return format_odds_ratio(value, missing=MISSING)


def languages(codes: object) -> str:
    """``"en,zh"`` -> ``English, Chinese`` (a code without a name stays as it is)."""
    if is_missing(codes):
        return MISSING
    parts = [c.strip() for c in re.split(r"[,;\s]+", str(codes)) if c.strip()]
    return ", ".join(LANGUAGES.get(c.lower(), c) for c in parts) or MISSING


def text(value: object) -> str:
    """Any other value as text; a list as ``a, b``."""
    if is_missing(value):
        return MISSING
    if isinstance(value, list | tuple | set):
        return ", ".join(str(v) for v in value) or MISSING
    return str(value)


# --- columns ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    """How one column of a frame is shown: its label, kind of number, tooltip and place.

    ``kind`` picks the formatting function (``digits`` where it takes one: one rule per kind unless
    a column needs another); ``values`` maps codes to the words shown (a role, a judge label).
    Secondary columns of one ``group`` share a table in the expander, so no table there is wider
    than the page either; ``anchor`` columns (who or what a row is) are repeated in each of those
    tables so every row still says whose it is.
    """

    label: str
    kind: Kind = "text"
    digits: int | None = None  # None: the kind's own (percent 0, minutes 1, number 2)
    help: str | None = None
    secondary: bool = False
    group: str = ""  # secondary columns: the table of the expander they go to (one per group)
    anchor: bool = False
    width: Width = None
    values: Mapping[Any, str] = field(default_factory=dict)

    @property
    def header(self) -> str:
        """The label with its unit in brackets (``Done (%)``), unless the label already names it."""
        unit = UNITS.get(self.kind)
        if unit is None or f"({unit})" in self.label or f"({unit}," in self.label:
            return self.label
        return f"{self.label} ({unit})"

    def format(self, value: object) -> str:
        """The cell's text."""
        if self.values and not is_missing(value):
            try:
                return self.values[value]
            except (KeyError, TypeError):  # not a code of the mapping, or unhashable
                pass
        return FORMATTERS[self.kind](value, DIGITS.get(self.kind, 2) if self.digits is None else self.digits)


FORMATTERS: dict[str, Callable[[object, int], str]] = {
    "text": lambda v, _d: text(v),
    "count": lambda v, _d: whole(v),
    "number": decimal,
    "percent": lambda v, d: percent(v, d, sign=False),
    "seconds": lambda v, _d: whole(v),
    "minutes": minutes,
    "p": lambda v, _d: p_value(v),
    "odds_ratio": lambda v, _d: odds_ratio(v),
    "log_odds": lambda v, _d: MISSING if is_missing(v) else odds_ratio(math.exp(float(v))),
    "bool": lambda v, _d: MISSING if is_missing(v) else ("yes" if bool(v) else "no"),
    "languages": lambda v, _d: languages(v),
}
DIGITS: dict[str, int] = {"percent": 0, "minutes": 1, "number": 2}
_NUMERIC: frozenset[str] = frozenset(FORMATTERS) - {"text", "bool", "languages"}


def _config(column: Column) -> Any:
    """The grid's column: its header and tooltip; the text comes from the Styler (no format here, which
    would take precedence and round in the browser)."""
    if column.kind == "bool":
        return st.column_config.CheckboxColumn(column.header, help=column.help, width=column.width)
    if column.kind in _NUMERIC:
        return st.column_config.NumberColumn(column.header, help=column.help, width=column.width)
    return st.column_config.TextColumn(column.header, help=column.help, width=column.width)


def styled(frame: pd.DataFrame, columns: Mapping[str, Column]) -> Any:
    """``frame`` with each column's display text (a pandas Styler: the values themselves are unchanged)."""
    shown = {c: spec for c, spec in columns.items() if c in frame.columns}
    formatters = {c: spec.format for c, spec in shown.items()}
    return frame.style.format(formatters, subset=list(shown), na_rep=MISSING)


def legend(columns: Mapping[str, Column]) -> str:
    """``- **Label**: what it is`` for every column with a tooltip, for a "What each column means" expander."""
    return "\n".join(f"- **{plain(c.header)}**: {plain(c.help)}" for c in columns.values() if c.help)


def caption(what: str) -> None:
    """The sentence under a table or a chart: what it shows and which tasks it counts."""
    st.caption(plain(what))


STYLED_CELLS = 20_000
"""Above this many cells a table is sent as its text rather than values plus a Styler: pandas builds the
Styler's display text cell by cell (about 8 ms per 1,000 cells, Python time reviewers' requests wait
for) and refuses beyond its own limit; the text is the same, only sorting then sorts it as text."""


def _grid(frame: pd.DataFrame, columns: Mapping[str, Column], order: list[str]) -> None:
    shown = {c: spec for c, spec in columns.items() if c in frame.columns}
    config = {c: _config(spec) for c, spec in shown.items()}
    if not len(frame.columns):
        data: Any = frame
    elif frame.size <= STYLED_CELLS:
        data = styled(frame, shown)
    else:
        data = pd.DataFrame({c: frame[c].map(shown[c].format) for c in order})
        config = {c: st.column_config.TextColumn(shown[c].header, help=shown[c].help) for c in order}
    st.dataframe(
        data,
        hide_index=True,
        width="stretch",
        column_order=order,
        column_config=config,
        placeholder=MISSING,
    )


@lead_step
def show(
    frame: pd.DataFrame,
    columns: Mapping[str, Column],
    *,
    what: str,
    more: str | None = "More columns",
    more_what: Mapping[str, str] | str | None = None,
) -> None:
    """Show ``frame`` with ``columns`` (in their order; other columns are not shown), ``what`` under it,
    and its secondary columns in an expander titled ``more``, or, with ``more=None``, not at all
    (``what`` should then say where they are).

    In the expander, each group of secondary columns is a table of its own, with the anchor columns
    first and ``more_what[group]`` (or ``more_what``, or ``what``) under it. The frame is sent whole:
    the grid shows the listed columns with their labels and text; sorting a column sorts its values.
    """
    if not frame.index.is_unique:
        frame = frame.reset_index(drop=True)
    present = [c for c in columns if c in frame.columns]
    primary = [c for c in present if not columns[c].secondary]
    groups: dict[str, list[str]] = {}
    for c in present:
        if columns[c].secondary:
            groups.setdefault(columns[c].group, []).append(c)
    _grid(frame, columns, primary)
    caption(what)
    if groups and more is not None:
        anchors = [c for c in primary if columns[c].anchor]
        with st.expander(more):
            for group, names in groups.items():
                said = more_what.get(group, what) if isinstance(more_what, Mapping) else more_what or what
                _more(frame, columns, [*anchors, *names], said, group)


@lead_step
def _more(frame: pd.DataFrame, columns: Mapping[str, Column], order: list[str], what: str, group: str) -> None:
    if group:
        st.markdown(f"**{plain(group)}**")
    _grid(frame, columns, order)
    caption(what)


def text_columns(
    names: Sequence[str],
    *,
    secondary: Sequence[str] = (),
    labels: Mapping[str, str] | None = None,
    values: Mapping[str, Mapping[Any, str]] | None = None,
    anchor: Sequence[str] = (),
) -> dict[str, Column]:
    """Columns of a table whose cells are text already (a paper table): labels, and which ones go below."""
    labels, values = labels or {}, values or {}
    return {
        n: Column(
            labels.get(n, n),
            secondary=n in secondary,
            anchor=n in anchor,
            values=values.get(n, {}),
        )
        for n in names
    }


def _stem(study: str, key: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "_", f"{study}_{key}").strip("_").lower()


def show_paper(
    table: PaperTable,
    study: str,
    *,
    secondary: Sequence[str] = (),
    labels: Mapping[str, str] | None = None,
    values: Mapping[str, Mapping[Any, str]] | None = None,
    heading: str = "#####",
) -> None:
    """A results table as a paper prints it, through :func:`show`: title, table, caption, CSV and LaTeX.

    ``secondary`` columns (by their label) are left out of the page's table, which then fits a laptop
    screen; the caption says they are in the CSV, whose file has every column. ``labels`` and
    ``values`` relabel headers and cells the paper table left as codes (a judge label).
    """
    st.markdown(f"{heading} {plain(table.title)}")
    names = [str(c) for c in table.frame.columns]
    columns = text_columns(names, secondary=secondary, labels=labels, values=values, anchor=names[:1])
    left_out = [columns[n].header for n in names if columns[n].secondary]
    where = f" Also in the CSV download: {', '.join(left_out)}." if left_out and table.csv is not None else ""
    show(table.frame, columns, what=table.caption + where, more=None if where else "Further columns")
    stem = _stem(study, table.key)
    csv = table.csv_bytes()
    left, right, _ = st.columns([1, 1, 4])
    if csv is not None:
        left.download_button(
            "CSV",
            csv,
            file_name=f"{stem}.csv",
            mime="text/csv",
            key=f"csv:{stem}",
            help="The export's table: full precision, codebook column names.",
            icon=":material/download:",
        )
    if table.latex is not None:
        right.download_button(
            "LaTeX",
            table.latex.encode("utf-8"),
            file_name=f"{stem}.tex",
            mime="application/x-tex",
            key=f"tex:{stem}",
            help="The export's booktabs table, ready to paste into a paper.",
            icon=":material/download:",
        )
