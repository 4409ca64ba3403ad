"""The study export and the tables it writes, one module per job.

* ``study``: runs an export (``export_study``, ``export_archive``) and writes its codebook and manifest;
* ``snapshot``: reads the study in one snapshot and streams its labels tables;
* ``files``: writes a table as CSV, JSON Lines or Parquet;
* ``tables``, ``labels``, ``analysis_tables``: build the tables and their column documentation;
* ``codebook``: the codebook files; ``latex``: the LaTeX tables;
* ``paper``: the lead pages' results tables, built from the same builders so that a table downloaded
  from a page is the file the export writes.
* ``agreement_page``: the Agreement page's numbers and tables, computed in a worker and cached.

The names below are imported on first use (PEP 562): a module that needs one table builder does not
load the export's writers, and ``review_app.services.reviewer_monitoring`` can use the cell rules of
``tables`` while ``study`` imports it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bench_core.kernel.lazy import lazy_exports

if TYPE_CHECKING:
    from review_app.services.export.files import (
        EXPORT_FORMATS,
        ExportedFile,
        ProgressCallback,
        parse_formats,
        write_table,
    )
    from review_app.services.export.study import (
        ExportArchive,
        ExportResult,
        check_exporter,
        export_archive,
        export_name,
        export_study,
        pending_sentence,
        pending_tasks,
    )

_EXPORTS = {
    "EXPORT_FORMATS": ("review_app.services.export.files", "EXPORT_FORMATS"),
    "ExportedFile": ("review_app.services.export.files", "ExportedFile"),
    "ProgressCallback": ("review_app.services.export.files", "ProgressCallback"),
    "parse_formats": ("review_app.services.export.files", "parse_formats"),
    "write_table": ("review_app.services.export.files", "write_table"),
    "ExportArchive": ("review_app.services.export.study", "ExportArchive"),
    "ExportResult": ("review_app.services.export.study", "ExportResult"),
    "check_exporter": ("review_app.services.export.study", "check_exporter"),
    "export_archive": ("review_app.services.export.study", "export_archive"),
    "export_name": ("review_app.services.export.study", "export_name"),
    "export_study": ("review_app.services.export.study", "export_study"),
    "pending_sentence": ("review_app.services.export.study", "pending_sentence"),
    "pending_tasks": ("review_app.services.export.study", "pending_tasks"),
}

__all__ = [
    "EXPORT_FORMATS",
    "ExportArchive",
    "ExportResult",
    "ExportedFile",
    "ProgressCallback",
    "check_exporter",
    "export_archive",
    "export_name",
    "export_study",
    "parse_formats",
    "pending_sentence",
    "pending_tasks",
    "write_table",
]

__getattr__ = lazy_exports(__name__, globals(), _EXPORTS)
