"""What ``medrev app`` serves: the Streamlit app (``app.py``) plus the session-cookie routes.

``streamlit run`` finds the ``st.App`` below and serves it with uvicorn, with every
``STREAMLIT_*`` setting and ``--server.*`` flag as before; ``review_app.ui.routes`` adds
``/_medrev/session`` and ``/_medrev/signout`` on the same server, and its ``ServerRoot`` middleware
tells the frontend where the server's root is (no 404s for ``/<page>/_stcore/...`` on a page load).

Streamlit runs a full garbage collection after every script run (``runner.postScriptGC``), in
the script thread and holding the GIL, before the server can send the rest of the run's messages.
With Streamlit, pandas, pyarrow, SQLAlchemy, SciPy and the services loaded, that pass walked over
200,000 objects that live as long as the process (modules, classes, functions): ~150 ms per run,
most of a review page's submit-to-next in the browser. So the modules the pages use, and what their
libraries load on first use, are imported here, at start-up, and everything alive then is frozen
(``gc.freeze``: left out of the collector's generations, still freed by reference counting when no
longer used). ``medrev app`` also turns that pass off: the app script collects its run's young
objects itself (``session.collect_after_run``), and Python's own full collections, now rare, walk
only what was made since start-up.
"""

import contextlib
import gc
import importlib
from pathlib import Path

import streamlit as st
from starlette.middleware import Middleware

from review_app.ui import session
from review_app.ui.routes import ServerRoot, routes

# What the pages import (the score panel's module registers a browser component, so it is left to
# the first run; its own imports are here). Loaded now so their objects are frozen below;
# tests/review_app/ui/test_startup_freeze.py checks the list against the pages' imports.
PRELOAD = (
    "review_app.rubrics",
    "review_app.services.accounts",
    "review_app.services.adjudication",
    "review_app.services.assignment",
    "review_app.services.compute_workers",
    "review_app.services.export",
    "review_app.services.export.agreement_page",
    "review_app.services.export.paper",
    "review_app.services.export.study",
    "review_app.services.flags",
    "review_app.services.gold_tasks",
    "review_app.services.importing",
    "review_app.services.judge_audit",
    "review_app.services.progress",
    "review_app.services.review_queue",
    "review_app.services.reviewing",
    "review_app.services.sessions",
    "review_app.services.studies",
    "review_app.services.study_analysis",
    "review_app.analysis.harm_model",
    "review_app.analysis.sample_size",
    "review_app.analysis.reviewer_quality",
    "review_app.analysis.rubric_b",
    "review_app.ui.session",
    "review_app.ui.components.analysis_cache",
    "review_app.ui.components.accessibility",
    "review_app.ui.components.charts",
    "review_app.ui.components.database",
    "review_app.ui.components.material",
    "review_app.ui.components.paper_table",
    "review_app.ui.components.pickers",
    "review_app.ui.components.plan_units",
    "review_app.ui.components.quality",
    "review_app.ui.components.tables",
    "review_app.ui.components.task_choice",
    "review_app.ui.components.text",
)
# What the pages' libraries import on first use, not when the pages import them: plotly's figure classes
# and JSON writer, PIL (Streamlit's image helpers), narwhals' pandas backend (Streamlit's dataframes),
# Streamlit's emoji and icon tables (checked for every icon), pandas' CSV writer and Styler (jinja2), the
# GB2312 codec (the LaTeX tables). Loaded after the first lead page run they were 23,000 unfrozen objects that every
# collection walked again (tests/review_app/ui/test_startup_freeze.py runs every page and checks
# that nothing new is loaded after start-up). A library version that no longer has one of them is skipped.
ON_FIRST_USE = (
    "PIL.ExifTags",
    "PIL.Image",
    "PIL.ImageFile",
    "PIL.TiffTags",
    "encodings.gb2312",
    "narwhals._interchange.dataframe",
    "narwhals._pandas_like.dataframe",
    "narwhals._pandas_like.group_by",
    "narwhals._pandas_like.namespace",
    "narwhals._pandas_like.selectors",
    "narwhals._pandas_like.series",
    "narwhals._pandas_like.series_cat",
    "narwhals._pandas_like.series_dt",
    "narwhals._pandas_like.series_list",
    "narwhals._pandas_like.series_map",
    "narwhals._pandas_like.series_str",
    "narwhals._pandas_like.series_struct",
    "narwhals.stable.v1._namespace",
    "packaging.utils",
    "pandas.core.methods.to_dict",
    "pandas.core.reshape.reshape",
    "pandas.io.formats.csvs",
    "pandas.io.formats.style",  # the lead tables' Styler, with jinja2
    "pandas.io.formats.style_render",
    "plotly.animation",
    "plotly.graph_objs.bar",
    "plotly.graph_objs.bar._marker",
    "plotly.graph_objs.layout.legend._title",
    "plotly.graph_objs.layout.shape._line",
    "plotly.graph_objs.layout.xaxis._title",
    "plotly.graph_objs.layout.yaxis._title",
    "plotly.graph_objs.layout._legend",
    "plotly.graph_objs.layout._margin",
    "plotly.graph_objs.layout._shape",
    "plotly.graph_objs.layout._title",
    "plotly.graph_objs.layout._xaxis",
    "plotly.graph_objs.layout._yaxis",
    "plotly.graph_objs.scatter._error_x",
    "plotly.graph_objs.scatter._line",
    "plotly.graph_objs._bar",
    "plotly.graph_objs._deprecations",
    "plotly.graph_objs._figure",
    "plotly.io._json",
    "plotly.offline",
    "plotly.tools",
    "pyarrow.pandas_compat",
    "pyarrow.vendored.version",
    "streamlit.components.v2.manifest_scanner",
    "streamlit.emojis",
    "streamlit.material_icon_names",
    "streamlit.runtime.scriptrunner.magic_funcs",
)
for module in PRELOAD:
    importlib.import_module(module)
for module in ON_FIRST_USE:
    with contextlib.suppress(ImportError):
        importlib.import_module(module)

app = st.App(str(Path(__file__).with_name("app.py")), routes=routes(), middleware=[Middleware(ServerRoot)])
# The lead statistics' worker starts with the server, so the first lead page finds it ready (``medrev app``
# has opened and migrated the database already; a fault here is left to the first page run).
session.start_compute_workers(create=False)

gc.collect()
gc.freeze()
