"""Production's topology: the worker behind a real PgBouncer (tests/support/pgbouncer.py), as it runs behind
Supabase's session pooler. In session mode the whole loop works, a second worker waits, and a pooler restart moves
the lock without losing or repeating a job; in transaction mode the worker refuses to start, naming the fix."""

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from django.core.files.storage import default_storage

from faces.models import Event, Photo
from tests.support import factories
from tests.support.pgbouncer import PgBouncer
from tests.support.ports import free_port
from tests.support.queue_helpers import (
    ROOT,
    STARTUP_S,
    in_handler,
    job,
    lock_taken,
    lock_waited,
    queue_rows,
    send,
    stop_workers,
    worker_env,
)
from tests.support.waiting import wait_for
from tests.support.worker_health import health

pytestmark = pytest.mark.usefixtures("live_db")


@pytest.fixture
def pooler(embedded_pg):
    """pooler(mode): a started PgBouncer in front of the test server; all stopped at the end."""
    started = []

    def start(mode: str) -> PgBouncer:
        bouncer = PgBouncer(Path(tempfile.mkdtemp(prefix="pgbouncer-")), embedded_pg, mode).start()
        started.append(bouncer)
        return bouncer

    yield start
    for bouncer in started:
        bouncer.stop()
        shutil.rmtree(bouncer.folder, ignore_errors=True)


@pytest.fixture
def spawn(spawn_workers):
    """spawn(name, url, **settings): a run_worker process on DATABASE_URL `url` (tests/conftest.py)."""
    return lambda name, url, **overrides: spawn_workers(name, DATABASE_URL=url, **overrides)


def manage(embedded_pg, tmp_path, url: str, *args: str) -> subprocess.CompletedProcess:
    env = worker_env(embedded_pg, tmp_path, DATABASE_URL=url)
    command = [sys.executable, "manage.py", *args]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def test_worker_check_passes_through_a_session_pooler_and_fails_through_a_transaction_pooler(
    embedded_pg, tmp_path, pooler
):
    session = manage(embedded_pg, tmp_path, pooler("session").url, "worker_check")
    assert session.returncode == 0, session.stdout + session.stderr
    assert "check=session status=ok" in session.stdout

    transaction = manage(embedded_pg, tmp_path, pooler("transaction").url, "worker_check")
    assert transaction.returncode != 0
    assert transaction.stdout.splitlines()[-1] == "worker_check failed: session"
    [line] = [line for line in transaction.stdout.splitlines() if line.startswith("check=session")]
    assert "does not keep a session" in line, line
    assert "use the session pooler" in line, line


def test_run_worker_refuses_a_transaction_pooler_in_one_line_naming_the_fix(embedded_pg, tmp_path, pooler):
    """Not only worker_check (systemd's ExecStartPre): run_worker started by hand refuses too, before it reads."""
    msg_id = send(job("test_record"))
    run = manage(embedded_pg, tmp_path, pooler("transaction").url, "run_worker", "--drain")
    assert run.returncode == 1, run.stderr[-2000:]
    [died] = [line for line in run.stderr.splitlines() if "event=worker_died" in line]
    assert "does not keep a session" in died, died
    assert "use the session pooler" in died, died
    assert "event=queue_lock outcome=taken" not in run.stderr
    assert queue_rows() == [(msg_id, 0)], "the message was never read"


@pytest.mark.usefixtures("media_storage")
def test_a_whole_event_through_a_session_pooler_while_a_second_worker_waits(pooler, spawn, group, group_faces):
    event = factories.event()
    user = factories.member(event, dnp=True)
    factories.ready_reference(user, group_faces[0].embedding, group_faces[0].engine)
    photos = [factories.photo(event, group) for _ in range(3)]
    url = pooler("session").url
    (_, first_log), (_, second_log) = spawn("first", url), spawn("second", url)
    for photo in photos:
        send({"job": "face_process", "photo_id": str(photo.id)})
    wait_for(lambda: not queue_rows() and all(p.processed_at for p in Photo.objects.filter(event=event)), 180)
    # The lock holder never lets go, so the other says it waits once its own start-up is done, which can be after
    # the three jobs on a loaded machine.
    wait_for(lambda: lock_waited(first_log) or lock_waited(second_log), timeout=STARTUP_S)

    logs = {"first": first_log, "second": second_log}
    took = [name for name, log in logs.items() if lock_taken(log)]
    assert len(took) == 1, "one reader"
    waited = "second" if took == ["first"] else "first"
    assert lock_waited(logs[waited])
    assert "job=face_process" not in logs[waited].read_text()
    for photo in Photo.objects.filter(event=event):
        assert photo.faces.filter(matched_user_id=user).count() == 1
        assert default_storage.exists(photo.public_key)


def test_a_pooler_restart_mid_job_hands_the_lock_on_and_loses_nothing(embedded_pg, tmp_path, pooler, spawn):
    """One slot: the reader's session dies with the pooler, and with it the lock. Whichever worker reconnects
    first takes the lock and makes the cut-off message visible again; the other waits. The job is done once,
    and each worker's /health says which of the two it is."""
    bouncer = pooler("session")
    ports = {"first": free_port(), "second": free_port()}
    first, first_log = spawn("first", bouncer.url, WORKER_HEALTH_PORT=ports["first"])
    wait_for(lambda: lock_taken(first_log), timeout=STARTUP_S)
    second, second_log = spawn("second", bouncer.url, WORKER_HEALTH_PORT=ports["second"])
    wait_for(lambda: lock_waited(second_log), timeout=STARTUP_S)
    # Long enough that the restart lands inside it.
    msg_id = send(job("test_long", seconds=8.0))
    wait_for(lambda: health(ports["first"])[1].get("working_on"))

    bouncer.restart()

    log_paths = {"first": first_log, "second": second_log}

    def logs() -> str:
        return first_log.read_text() + second_log.read_text()

    def holder() -> str | None:
        """The one worker running the message again, once it took the lock anew: the one that made it visible (the
        other's /health may still name its cut-off try for a moment)."""
        working = [name for name, port in ports.items() if f"msg={msg_id}" in (health(port)[1].get("working_on") or "")]
        return working[0] if len(working) == 1 and "made_visible=1" in log_paths[working[0]].read_text() else None

    took = wait_for(holder, 30)
    other = "second" if took == "first" else "first"
    running, waiting = health(ports[took])[1], health(ports[other])[1]
    assert (running["phase"], running["lock_held"]) == ("running", True)
    assert (waiting["phase"], waiting["lock_held"], waiting["working_on"]) == ("waiting_for_lock", False, None)
    wait_for(lambda: not queue_rows(), 30)
    # Both stopped: every line is written, and a run still going (the message read twice) ended too.
    assert stop_workers(first, second) == [0, 0]
    assert Event.objects.filter(name__startswith="long done").count() == 1, "done once"
    assert logs().count("made_visible=1") == 1, "the cut-off message made visible again, once"
    assert "try=3" not in logs()


def test_two_readers_keep_a_running_message_hidden_across_a_pooler_restart(embedded_pg, tmp_path, pooler, spawn):
    """Two slots, a 2 s visibility timeout: the try the restart cuts off comes back by its timeout, and the
    try that runs it again is kept hidden by its heartbeat, on a connection made after the restart: no other
    reader reads it meanwhile."""
    bouncer = pooler("session")
    settings = {"WORKER_READER_SLOTS": 2, "WORKER_VISIBILITY_TIMEOUT_S": 2}
    (first, first_log), (second, second_log) = (
        spawn("first", bouncer.url, **settings),
        spawn("second", bouncer.url, **settings),
    )
    wait_for(lambda: lock_taken(first_log) and lock_taken(second_log), timeout=STARTUP_S)
    msg_id = send(job("test_long", seconds=6.0))
    wait_for(lambda: in_handler(msg_id))

    bouncer.restart()

    wait_for(lambda: Event.objects.filter(name__startswith="long done").exists(), 60)
    wait_for(lambda: not queue_rows(), 30)
    # The message is gone, so no read is to come; both readers stopped, a second run still going ended too.
    assert stop_workers(first, second) == [0, 0]
    assert Event.objects.filter(name__startswith="long done").count() == 1, "done once"
