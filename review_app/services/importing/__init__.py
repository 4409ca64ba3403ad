"""Import benchmark items, model responses, bench run directories and reviewer rosters into the review database.

One module per kind of input (``items``, ``responses``, ``runs``, ``roster``); ``dispatch`` tells a path's
kind and routes it; ``common`` holds what they share (reading rows, refusing or skipping bad rows, the one
transaction, and the batch, insert and audit records every import ends with). The names below are the
package's interface to the command line, the Import page and the tests.
"""

from review_app.services.errors import InvalidInput
from review_app.services.importing.common import (
    SKIP_HINT,
    ImportRefused,
    ImportSummary,
    content_hash,
    file_sha256,
    read_rows,
)
from review_app.services.importing.dispatch import (
    KINDS,
    UPLOAD_KINDS,
    StudyImport,
    detect_kind,
    import_into_study,
    import_path,
    import_upload,
    preview_upload,
)
from review_app.services.importing.items import import_items, item_row, prepare_items
from review_app.services.importing.responses import import_responses
from review_app.services.importing.roster import ROSTER_COLUMNS, import_roster, prepare_roster
from review_app.services.importing.runs import JUDGE_SUBSET, import_run, run_file_issues

__all__ = [
    "JUDGE_SUBSET",
    "KINDS",
    "ROSTER_COLUMNS",
    "SKIP_HINT",
    "UPLOAD_KINDS",
    "ImportRefused",
    "ImportSummary",
    "InvalidInput",
    "StudyImport",
    "content_hash",
    "detect_kind",
    "file_sha256",
    "import_into_study",
    "import_items",
    "import_path",
    "import_responses",
    "import_roster",
    "import_run",
    "import_upload",
    "item_row",
    "prepare_items",
    "prepare_roster",
    "preview_upload",
    "read_rows",
    "run_file_issues",
]
