"""A small panel through the documented deployment, and a replica lost under it (``bench/panel_load.py``).

The load generator drives real servers the way browsers do (Streamlit's websocket protocol, the score
panel's events, reconnection after a dropped websocket): nginx with the shipped ``deploy/nginx.conf``
in front of two ``medrev app`` replicas on one PostgreSQL database, every reviewer from 127.0.0.1.
Reviewers score and submit as fast as the pages answer; the first replica is killed halfway. Its
reviewers must reconnect to the other replica still signed in and find their drafts, and the database
must hold exactly one annotation per submit a reviewer saw accepted.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.postgres]
ROOT = Path(__file__).resolve().parents[3]
BENCH = ROOT / "bench" / "panel_load.py"


def _panel(*args: str, timeout: float = 420) -> dict:
    """Run the generator; its last line is the run's figures (JSON)."""
    done = subprocess.run(
        [sys.executable, str(BENCH), *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT, check=False
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_two_replicas_share_a_panel_from_one_address_and_lose_one_without_losing_work():
    if not (shutil.which("nginx") or Path("/usr/sbin/nginx").exists()):
        pytest.fail("Debian's nginx is not installed (apt-get install -y nginx-light)")
    run = _panel(
        "--reviewers", "8", "--replicas", "2", "--db", "postgresql", "--pace", "stress",
        "--ramp", "10", "--minutes", "1.25", "--kill-replica-after", "40",
    )  # fmt: skip
    assert run["signed_in"] == 8
    # One address, both replicas: each browser's routing cookie, not its address, picks the replica.
    assert all(n > 0 for n in run["sessions_at_kill"]), run["sessions_at_kill"]
    # Every reviewer of the lost replica reconnected to the live one, still signed in, and found its draft.
    assert run["sessions_at_end"] == [0, 8], run["sessions_at_end"]
    assert run["reconnects"] >= run["sessions_at_kill"][0]
    assert run["signed_out_after_reconnect"] == 0
    assert run["drafts_checked"] > 0 and run["drafts_missing"] == 0
    # Work went on after the loss: submits on the live replica after the kill.
    assert run["submits_accepted"] > 40
    # Exactly one annotation per submit a reviewer saw accepted: none lost, none stored twice or unseen.
    assert run["lost"] == 0 and run["duplicates"] == 0 and run["stored_not_seen"] == 0
    assert run["annotations_stored"] == run["submits_accepted"]
    assert run["errors"] == 0, run["error_samples"]
