"""Start the Streamlit server for the review app with production-minded defaults.

The defaults are applied as ``STREAMLIT_*`` environment variables only when the operator has not
set them, so ``medrev app`` behaves the same from any working folder (Streamlit reads
``.streamlit/config.toml`` only from the current folder) and every setting can still be
overridden the usual Streamlit way.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

APP_SCRIPT = Path(__file__).with_name("medrev_asgi.py")  # app.py plus the session-cookie routes

DEFAULTS: dict[str, str] = {
    "STREAMLIT_SERVER_HEADLESS": "true",
    "STREAMLIT_SERVER_ENABLE_XSRF_PROTECTION": "true",
    "STREAMLIT_SERVER_ENABLE_CORS": "true",
    "STREAMLIT_SERVER_MAX_UPLOAD_SIZE": "50",
    "STREAMLIT_SERVER_FILE_WATCHER_TYPE": "none",
    "STREAMLIT_SERVER_RUN_ON_SAVE": "false",
    "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false",
    "STREAMLIT_CLIENT_SHOW_ERROR_DETAILS": "none",
    "STREAMLIT_CLIENT_TOOLBAR_MODE": "minimal",
    "STREAMLIT_GLOBAL_DEVELOPMENT_MODE": "false",
    "STREAMLIT_THEME_BASE": "light",
    "STREAMLIT_THEME_PRIMARY_COLOR": "#2f5bd3",
}


def app_environment(database_url: str | None = None) -> dict[str, str]:
    env = dict(os.environ)
    for key, value in DEFAULTS.items():
        env.setdefault(key, value)
    if database_url:
        env["MEDREV_DATABASE_URL"] = database_url
    return env


def streamlit_command(host: str | None = None, port: int | None = None) -> list[str]:
    command = [sys.executable, "-m", "streamlit", "run", str(APP_SCRIPT)]
    if host:
        command += ["--server.address", host]
    if port:
        command += ["--server.port", str(port)]
    return command


def run_app(host: str | None = None, port: int | None = None, database_url: str | None = None) -> None:
    """Replace this process with the Streamlit server (Ctrl-C stops it cleanly)."""
    command = streamlit_command(host, port)
    sys.stdout.flush()
    os.execvpe(command[0], command, app_environment(database_url))
