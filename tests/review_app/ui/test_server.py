"""`medrev app` applies the same production settings as `.streamlit/config.toml`, from any folder."""

import re
import tomllib
from pathlib import Path

from review_app.ui import server

CONFIG = Path(__file__).resolve().parents[3] / ".streamlit" / "config.toml"


def _env_name(section: str, option: str) -> str:
    return "STREAMLIT_" + section.upper() + "_" + re.sub(r"(?<=[a-z])(?=[A-Z])", "_", option).upper()


def test_config_file_and_server_defaults_agree():
    config = tomllib.loads(CONFIG.read_text())
    from_file = {
        _env_name(section, option): str(value).lower() if isinstance(value, bool) else str(value)
        for section, options in config.items()
        for option, value in options.items()
    }
    assert from_file == server.DEFAULTS


def test_operator_settings_win_and_the_database_url_is_passed(monkeypatch):
    monkeypatch.setenv("STREAMLIT_SERVER_MAX_UPLOAD_SIZE", "5")
    env = server.app_environment("sqlite:////tmp/x.db")
    assert env["STREAMLIT_SERVER_MAX_UPLOAD_SIZE"] == "5"
    assert env["STREAMLIT_SERVER_ENABLE_XSRF_PROTECTION"] == "true"
    assert env["STREAMLIT_CLIENT_SHOW_ERROR_DETAILS"] == "none"
    assert env["MEDREV_DATABASE_URL"] == "sqlite:////tmp/x.db"
    assert env["MALLOC_ARENA_MAX"] == "2"  # the server process's own memory setting
    assert env["MEDREV_SQLITE_CHECKPOINTS"] == "background"  # no reviewer's submit runs a checkpoint
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert server.app_environment()["MALLOC_ARENA_MAX"] == "4"
    command = server.streamlit_command("127.0.0.1", 9000)
    assert command[-4:] == ["--server.address", "127.0.0.1", "--server.port", "9000"]
