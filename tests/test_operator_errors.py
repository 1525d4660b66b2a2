"""Every operator command answers bad input with one line and exit 1: no traceback, no false success."""

import subprocess
import sys
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

BAD_INPUT = [
    (["photo_report", "nope"], "is not a photo id"),
    (["photo_report", "0000abcd"], "no photo with an id starting"),
    (["event_report", str(uuid.uuid4())], "no event with an id starting"),
    (["sweep_orphans", "--event", "nope"], "must be an event id"),
    (["measure_thresholds", "/no/such/dir"], "/no/such/dir is not a folder"),
    (["requeue_archived", "--msg-id", "424242"], "no archived message"),
]


@pytest.mark.usefixtures("live_db")
@pytest.mark.parametrize(("command", "message"), BAD_INPUT, ids=[" ".join(c) for c, _ in BAD_INPUT])
def test_bad_input_is_one_line_and_exit_1(embedded_pg, tmp_path, command, message):
    env = {"DATABASE_URL": embedded_pg.uri, "MOMENTLENS_VAR_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "manage.py", *command], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip() and "level=" not in line]
    assert len(lines) == 1, done.stderr
    assert message in lines[0]
