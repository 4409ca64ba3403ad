"""What ``medrev app`` serves: the Streamlit app (``app.py``) plus the session-cookie routes.

``streamlit run`` finds the ``st.App`` below and serves it with uvicorn, with every
``STREAMLIT_*`` setting and ``--server.*`` flag as before; ``review_app.ui.routes`` adds
``/_medrev/session`` and ``/_medrev/signout`` on the same server.
"""

from pathlib import Path

import streamlit as st

from review_app.ui.routes import routes

app = st.App(str(Path(__file__).with_name("app.py")), routes=routes())
