"""What a lead sees in a page's tables, read from the AppTest element tree as the browser draws them.

A table (``st.dataframe`` or ``st.table``) is sent as Arrow data plus, optionally, a column
configuration (labels, hidden columns, an order), a placeholder for missing values and a pandas
Styler's display values. The grid shows a column's configured label (else its name), and in a cell
the placeholder when the value is missing (Streamlit's default placeholder is the text ``None``),
else the Styler's display text, else the value itself. :func:`shown_tables` rebuilds that view, so a
test can ask what a lead reads rather than what the page passed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import pandas as pd
from streamlit import dataframe_util

INDEX = "_index"
POSITION = "_pos:"
DEFAULT_PLACEHOLDER = "None"  # what the grid draws for a missing value without a placeholder
# A cell that reads as a missing-value marker of Python or pandas rather than a value.
RAW_MISSING = re.compile(r"^(None|nan|NaN|<NA>|NaT)$|(?<![A-Za-z])(nan|NaN|<NA>|NaT)(?![A-Za-z])")
# A header that is a column name rather than a label: an identifier with an underscore, a lowercase
# word (username, role, languages), or a bare position.
RAW_HEADER = re.compile(r"_|^[a-z][a-z0-9]+$|^\d+$")


@dataclass(frozen=True)
class ShownTable:
    """One table as the lead reads it: where it is, its headers and its cells as text."""

    kind: str  # "dataframe" or "table"
    headers: list[str]
    rows: list[list[str]]

    def raw_headers(self) -> list[str]:
        return [h for h in self.headers if RAW_HEADER.search(h)]

    def raw_cells(self) -> list[str]:
        return sorted({c for row in self.rows for c in row if RAW_MISSING.search(c)})


def _missing(value: object) -> bool:
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):  # a list or array cell
        return False


def _config(proto, data: pd.DataFrame) -> dict[str, dict]:
    """Column name -> its configuration (labels keyed by name or by position)."""
    raw = json.loads(proto.columns) if getattr(proto, "columns", "") else {}
    out: dict[str, dict] = {}
    for key, value in raw.items():
        if key.startswith(POSITION):
            position = int(key.removeprefix(POSITION))
            if position < len(data.columns):
                out[str(data.columns[position])] = value
        else:
            out[key] = value
    return out


def shown(element, kind: str) -> ShownTable:
    """The table ``element`` (an AppTest Dataframe or Table) as the browser shows it."""
    proto = element.proto
    data = element.value
    display = None
    if proto.arrow_data.styler.display_values:
        display = dataframe_util.convert_arrow_bytes_to_pandas_df(proto.arrow_data.styler.display_values)
    config = _config(proto, data)
    placeholder = proto.placeholder if kind == "dataframe" and proto.HasField("placeholder") else DEFAULT_PLACEHOLDER
    order = list(getattr(proto, "column_order", []) or [])
    names = [str(c) for c in data.columns]
    visible = [n for n in (order or names) if n in names and not config.get(n, {}).get("hidden")]
    headers = [config.get(n, {}).get("label") or n for n in visible]
    if not config.get(INDEX, {}).get("hidden", False) and not isinstance(data.index, pd.RangeIndex):
        headers = [config.get(INDEX, {}).get("label") or str(data.index.name or ""), *headers]
    rows = []
    for i in range(len(data)):
        row = []
        for name in visible:
            j = names.index(name)
            value = data.iat[i, j]
            if _missing(value):
                row.append(placeholder)
            elif display is not None:
                row.append(str(display.iat[i, j]))
            else:
                row.append(str(value))
        rows.append(row)
    return ShownTable(kind, headers, rows)


def shown_tables(at) -> list[ShownTable]:
    """Every table of the page (expanders included: AppTest renders their contents)."""
    return [shown(e, "dataframe") for e in at.dataframe] + [shown(e, "table") for e in at.get("table")]


def prepare_lead_pages(engine, studies: dict[str, str]) -> None:
    """Give every lead page of the demo studies something to show in each of its tables.

    In each study one task nobody has rated becomes gold (expected scores all at the scale's top)
    and one of its reviewers rates it, so the Reviewers' quality page has its gold columns; then a
    reviewer flags their first open task, so the Flags page lists a flag.
    """
    from sqlmodel import select

    from review_app.db.engine import read_session
    from review_app.db.models import Assignment, Study
    from review_app.rubrics import get_rubric
    from review_app.services import gold_tasks, reviewing
    from review_app.services.accounts import get_user
    from tests.review_app.factories import rate

    lead = get_user(engine, "lead01")
    for study in studies.values():
        task_id, _unit, rubric_key = gold_tasks.unrated_tasks(engine, lead, study, limit=1)[0]
        top = {d.key: max(d.values) for d in get_rubric(rubric_key).dimensions}
        gold_tasks.mark_gold(engine, lead, study, task_id, expected_scores=top)
        with read_session(engine) as session:
            slot = session.exec(select(Assignment).where(Assignment.task_id == task_id)).first()
            aid, reviewer_id = session.exec(
                select(Assignment.id, Assignment.reviewer_id)
                .join(Study, Study.id == Assignment.study_id)
                .where(Study.name == study, Assignment.status != "submitted", Assignment.task_id != task_id)
                .order_by(Assignment.id)
            ).first()
        rate(engine, slot, {key: min(get_rubric(rubric_key).dimension(key).values) for key in top})
        reviewing.set_flag(engine, aid, reviewer_id, True, "The key looks wrong to me.", kind="item")
