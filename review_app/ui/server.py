"""Start the Streamlit server for the review app with production-minded defaults.

The defaults are applied as ``STREAMLIT_*`` environment variables only when the operator has not
set them, so ``medrev app`` behaves the same from any working folder (Streamlit reads
``.streamlit/config.toml`` only from the current folder) and every setting can still be
overridden the usual Streamlit way.

The address and port are resolved here exactly as Streamlit resolves them (flags, then
``STREAMLIT_SERVER_*`` variables, then ``.streamlit/config.toml``, then its defaults) and passed on
explicitly, so what ``medrev app`` prints is where the server listens: with an explicit port,
Streamlit fails on a busy port instead of silently moving to the next one.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
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
    "STREAMLIT_RUNNER_POST_SCRIPT_GC": "false",
    "STREAMLIT_THEME_BASE": "light",
    "STREAMLIT_THEME_PRIMARY_COLOR": "#2f5bd3",
}
# The server process's own settings (not Streamlit's). glibc gives each thread that allocates its own
# malloc arena (up to 8 per core), and Streamlit runs every session's script in a thread of its own:
# memory freed there stays spread over many arenas. Two arenas kept the app process 19 MB smaller after
# the lead pages at panel scale (bench/lead_pages_speed.py runs under the same setting). The compute
# workers inherit it.
# SQLite's checkpoints run in a thread of the server rather than in whichever reviewer's submit takes the
# write-ahead log past 1,000 pages (db.engine).
PROCESS_DEFAULTS: dict[str, str] = {"MALLOC_ARENA_MAX": "2", "MEDREV_SQLITE_CHECKPOINTS": "background"}


def app_environment(database_url: str | None = None) -> dict[str, str]:
    env = dict(os.environ)
    for key, value in (DEFAULTS | PROCESS_DEFAULTS).items():
        env.setdefault(key, value)
    if database_url:
        env["MEDREV_DATABASE_URL"] = database_url
    return env


@dataclass(frozen=True)
class ListenAddress:
    host: str  # "" = every network interface
    port: int

    @property
    def url(self) -> str:
        return f"http://{self.host or '0.0.0.0'}:{self.port}"

    @property
    def local_only(self) -> bool:
        return self.host in ("127.0.0.1", "localhost", "::1")

    def describe(self) -> str:
        """Where the server listens, and who can reach it."""
        if self.local_only:
            return f"{self.url} (this computer only)"
        if not self.host or self.host in ("0.0.0.0", "::"):
            return f"{self.url} (every network interface; on this computer open http://localhost:{self.port})"
        return f"{self.url}"


LOOPBACK = "127.0.0.1"


def listen_address(host: str | None = None, port: int | None = None, *, default_host: str = "") -> ListenAddress:
    """The address Streamlit will listen on, resolved by Streamlit's own configuration rules.

    ``default_host`` stands in for Streamlit's own default (every interface) when no flag, no
    ``STREAMLIT_SERVER_ADDRESS`` and no ``.streamlit/config.toml`` names an address: ``medrev app`` gives
    ``LOOPBACK``, so a server is reached through its reverse proxy unless told otherwise (docs/deployment.md).
    """
    from streamlit import config
    from streamlit.config_option import ConfigOption

    flags: dict[str, object] = {}
    for option, value in (("server.address", host), ("server.port", port)):
        # `streamlit run` reads STREAMLIT_SERVER_* through its command-line parser, as if they were flags.
        value = value or os.environ.get("STREAMLIT_" + option.upper().replace(".", "_")) or None
        if value:
            flags[option] = value
    config.get_config_options(force_reparse=True, options_from_flags=flags)
    address = str(config.get_option("server.address") or "")
    if config.get_where_defined("server.address") == ConfigOption.DEFAULT_DEFINITION:
        address = address or default_host
    return ListenAddress(address, int(config.get_option("server.port")))


def streamlit_command(host: str | None = None, port: int | None = None) -> list[str]:
    command = [sys.executable, "-m", "streamlit", "run", str(APP_SCRIPT)]
    if host:
        command += ["--server.address", host]
    if port:
        command += ["--server.port", str(port)]
    return command


def run_app(address: ListenAddress, database_url: str | None = None) -> None:
    """Replace this process with the Streamlit server on ``address`` (Ctrl-C stops it cleanly)."""
    command = streamlit_command(address.host or None, address.port)
    sys.stdout.flush()
    os.execvpe(command[0], command, app_environment(database_url))
