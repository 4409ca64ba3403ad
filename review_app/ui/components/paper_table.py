"""Show a results table as a paper prints it: title, table, one-sentence caption, CSV and LaTeX downloads.

The table goes through the lead pages' one formatting layer (:func:`review_app.ui.components.tables.show_paper`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from review_app.services.export.paper import PaperTable
from review_app.services.priority import lead_step
from review_app.ui.components import tables


@lead_step
def show(
    table: PaperTable,
    study: str,
    *,
    heading: str = "#####",
    secondary: Sequence[str] = (),
    labels: Mapping[str, str] | None = None,
    values: Mapping[str, Mapping[Any, str]] | None = None,
) -> None:
    """Render ``table`` with its caption under it and a download button per file it has (see ``show_paper``)."""
    tables.show_paper(table, study, secondary=secondary, labels=labels, values=values, heading=heading)
