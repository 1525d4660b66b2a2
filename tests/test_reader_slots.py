"""Several readers on one queue (WORKER_READER_SLOTS=N): real run_worker processes on the embedded PostgreSQL.

Each reader holds one slot; one beyond N waits. A message in flight stays hidden however long
its job runs (the heartbeat); a reader that dies leaves its message to the others after the
visibility timeout (a privacy job's after PRIVACY_LANE.vt_s); one that loses only its session gives its message back
when it has one again; jobs on one photo never overlap (its row lock).
"""

import itertools
import signal
import time
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection

from faces.models import Event
from jobqueue.privacy_lane import PRIVACY_LANE
from tests.support import factories
from tests.support.log_helpers import parse
from tests.support.queue_helpers import (
    STARTUP_S,
    done_by,
    in_handler,
    job,
    lock_taken,
    lock_waited,
    queue_rows,
    send,
    sessions,
    stop_workers,
    terminate_reader_sessions,
)
from tests.support.waiting import poll, wait_for

pytestmark = pytest.mark.usefixtures("live_db")


@pytest.fixture
def spawn(spawn_workers):
    """spawn(name, *args, **settings): a run_worker process with two reader slots (tests/conftest.py)."""
    return lambda name, *args, **overrides: spawn_workers(name, *args, **{"WORKER_READER_SLOTS": 2, **overrides})


def test_two_slots_two_readers_share_the_queue_and_a_third_waits(spawn, settings):
    settings.WORKER_READER_SLOTS = 2
    (first, first_log), (second, second_log) = spawn("first"), spawn("second")
    # Both read before the jobs come: one started seconds before the other would run them all.
    wait_for(lambda: lock_taken(first_log) and lock_taken(second_log), timeout=STARTUP_S)
    for _ in range(30):
        send(job("test_record", seconds=0.2))
    wait_for(lambda: done_by(first.pid) > 0 and done_by(second.pid) > 0)
    third, third_log = spawn("third")
    wait_for(lambda: lock_waited(third_log), timeout=STARTUP_S)
    out = StringIO()
    call_command("queue_status", stdout=out)
    slots = [line for line in out.getvalue().splitlines() if line.startswith("slot=")]
    assert len(slots) == 2
    assert all("(free)" not in line for line in slots), slots
    wait_for(lambda: not queue_rows(), timeout=60)

    assert done_by(third.pid) == 0
    assert done_by(first.pid) + done_by(second.pid) == 30
    assert Event.objects.filter(name__startswith="done ").count() == 30, "every job ran exactly once"
    assert "slot=0" in first_log.read_text() + second_log.read_text()
    assert "slot=1" in first_log.read_text() + second_log.read_text()


def test_queue_status_shows_what_each_reader_works_on(spawn, settings):
    settings.WORKER_READER_SLOTS = 2
    _, log = spawn("first")
    wait_for(lambda: lock_taken(log), timeout=STARTUP_S)
    msg_id = send(job("test_record", seconds=3))
    out = StringIO()

    def working() -> bool:
        out.seek(0)
        out.truncate()
        call_command("queue_status", stdout=out)
        return f"working_on=msg={msg_id} job=test_record" in out.getvalue()

    wait_for(working, timeout=20)


def test_a_heartbeat_that_lost_its_connection_names_the_job_again(spawn, settings):
    """The heartbeat reconnects at its next beat; the new connection says what the reader works on too."""
    settings.WORKER_READER_SLOTS = 2
    _, log = spawn("first", WORKER_VISIBILITY_TIMEOUT_S=1)
    wait_for(lambda: lock_taken(log), timeout=STARTUP_S)
    msg_id = send(job("test_record", seconds=6))
    naming = f"msg={msg_id} job=test_record"

    def beats() -> list[int]:
        return [pid for pid, name in sessions() if name.endswith(naming)]

    killed = wait_for(beats, timeout=20)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", killed)
    wait_for(lambda: beats() and beats() != killed, timeout=5)


def test_a_worker_set_to_another_count_of_slots_waits_while_the_readers_there_read(spawn):
    """One slot's reader takes over every hidden message as a stopped reader's: beside a reader of two slots it would
    run that reader's message again. A worker whose WORKER_READER_SLOTS differs from the readers' waits, saying so,
    and reads once they are gone."""
    first, first_log = spawn("two_slots")
    wait_for(lambda: lock_taken(first_log), timeout=STARTUP_S)
    second, second_log = spawn("one_slot", WORKER_READER_SLOTS=1)
    wait_for(lambda: "outcome=slots_differ" in second_log.read_text(), timeout=STARTUP_S)
    line = next(line for line in second_log.read_text().splitlines() if "outcome=slots_differ" in line)
    assert "level=ERROR" in line
    assert "slots=1 readers_slots=2" in line
    send(job("test_record", seconds=0.1))
    wait_for(lambda: not queue_rows())
    # Its row commits with the message's delete; the job_done line comes only after that commit.
    assert done_by(first.pid) == 1, "the reader there ran it"
    assert not lock_taken(second_log), "the reader there reads alone"
    assert stop_workers(first) == [0]
    wait_for(lambda: lock_taken(second_log), timeout=30)
    third, third_log = spawn("two_slots_again")
    wait_for(lambda: "outcome=slots_differ" in third_log.read_text(), timeout=STARTUP_S)
    assert "slots=2 readers_slots=1" in third_log.read_text()
    assert stop_workers(second, third) == [0, 0]


@pytest.mark.parametrize(
    ("name", "seconds", "vt", "done"),
    [("test_record", 6.5, 2, "done "), ("test_first", 9.5, 600, "first done ")],
    ids=["ordinary", "privacy"],
)
def test_a_job_three_times_longer_than_its_visibility_timeout_is_never_read_twice(spawn, name, seconds, vt, done):
    """The heartbeat keeps it hidden: an ordinary job WORKER_VISIBILITY_TIMEOUT_S at a time, a privacy job
    PRIVACY_LANE.vt_s (3 s) at a time, whatever the setting."""
    first, first_log = spawn("first", WORKER_VISIBILITY_TIMEOUT_S=vt)
    second, second_log = spawn("second", WORKER_VISIBILITY_TIMEOUT_S=vt)
    # Both read while it runs: sent before, it could end before the second reader had started.
    wait_for(lambda: lock_taken(first_log) and lock_taken(second_log), timeout=STARTUP_S)
    msg_id = send(job(name, seconds=seconds))
    reads = set()

    def finished() -> bool:
        rows = queue_rows()
        reads.update(read_ct for _, read_ct in rows)
        return not rows

    wait_for(finished, timeout=40, interval=0.1)
    assert max(reads) == 1, "read once: the other reader never took it while it ran"
    # Both stopped: their job_done lines are written, and a second run, had one begun, has ended.
    assert stop_workers(first, second) == [0, 0]
    logs = first_log.read_text() + second_log.read_text()
    assert f"msg_id={msg_id} try=1" in logs
    assert "try=2" not in logs
    assert Event.objects.filter(name__startswith=done).count() == 1


@pytest.mark.parametrize(
    ("name", "vt", "within"),
    [("test_crash", 2, 2 + 1.5), ("test_first_crash", 600, PRIVACY_LANE.vt_s + 2)],
    ids=["ordinary", "privacy"],
)
def test_a_reader_killed_mid_job_leaves_its_message_to_another_within_the_timeout(spawn, tmp_path, name, vt, within):
    """An ordinary job comes back after the visibility timeout; a privacy job after PRIVACY_LANE.vt_s, whatever the
    setting (600 s here): a reader killed in the middle of a hide leaves it to another within seconds."""
    (first, first_log), (second, second_log) = (
        spawn("first", WORKER_VISIBILITY_TIMEOUT_S=vt),
        spawn("second", WORKER_VISIBILITY_TIMEOUT_S=vt),
    )
    wait_for(lambda: lock_taken(first_log) and lock_taken(second_log), timeout=STARTUP_S)
    send(job(name, once_marker=str(tmp_path / "crashed-once")))
    wait_for(lambda: first.poll() is not None or second.poll() is not None)
    died_at = time.monotonic()
    assert -signal.SIGKILL in (first.poll(), second.poll())
    survived = poll(lambda: Event.objects.filter(name__startswith="survived").exists(), timeout=within + 10)
    assert survived, f"not taken over: {queue_and_sessions()}"
    waited = time.monotonic() - died_at
    assert waited < within, f"taken over after {waited:.1f}s"
    assert not queue_rows()


def queue_and_sessions() -> str:
    """What a take-over that did not come shows: the queue's rows (hidden how much longer) and the database's other
    sessions (what each waits on)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT msg_id, read_ct, extract(epoch FROM vt - clock_timestamp())::int FROM pgmq.q_jobs")
        rows = cursor.fetchall()
        cursor.execute(
            "SELECT pid, application_name, state, wait_event, left(query, 60) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return f"queue (msg_id, read_ct, hidden s) {rows}; sessions {cursor.fetchall()}"


def test_a_try_cut_short_by_its_lost_session_is_read_again_at_once(spawn):
    """A terminated backend rolls the try back; its message is visible again as soon as the reader has a session
    again, not after the visibility timeout (600 s here): a privacy job whose try met a database restart waited
    for it (a minute with the default settings, and 6.5 s in a chaos run)."""
    _, log = spawn("first", WORKER_VISIBILITY_TIMEOUT_S=600)
    wait_for(lambda: lock_taken(log), timeout=STARTUP_S)
    # Long enough that the cut lands inside it (the heartbeat names it half a second in).
    msg_id = send(job("test_record", seconds=6))
    wait_for(lambda: in_handler(msg_id), timeout=30)
    assert terminate_reader_sessions() == [(True,)]
    cut_at = time.monotonic()
    wait_for(lambda: any(line.get("event") == "cut_short_visible" for line in log_lines(log, msg_id)), timeout=30)
    assert time.monotonic() - cut_at < 10, "visible again at once, not after the visibility timeout"
    # The job_done line comes just after the commit: wait for the line, not the row.
    wait_for(lambda: any(line.get("event") == "job_done" for line in log_lines(log, msg_id)), timeout=30)
    ends = [(line.get("event"), line.get("try"), line.get("outcome")) for line in log_lines(log, msg_id)]
    # The database's outage is no failed try: read again as try 1.
    assert ends == [("db_lost", "1", None), ("cut_short_visible", "1", "visible"), ("job_done", "1", "completed")]
    assert Event.objects.filter(name__startswith="done ").count() == 1, "the cut-short try wrote nothing"


def log_lines(log, msg_id: int) -> list[dict]:
    return [line for line in map(parse, log.read_text().splitlines()) if line.get("msg_id") == str(msg_id)]


def test_a_retry_whose_backoff_outlasts_the_timeout_is_not_run_twice_at_once(spawn, tmp_path):
    """A failed try waits its backoff with no heartbeat: past the timeout another reader reads the message
    and runs it. The first reader's "visible again now", when its backoff ends, must not hand that running
    message to a third read."""
    settings = {"WORKER_VISIBILITY_TIMEOUT_S": 1, "WORKER_RETRY_BACKOFF_S": 2}
    (first, first_log), (second, second_log) = spawn("first", **settings), spawn("second", **settings)
    wait_for(lambda: lock_taken(first_log) and lock_taken(second_log), timeout=STARTUP_S)
    send(job("test_fail_then_slow", once_marker=str(tmp_path / "failed-once"), seconds=3))
    wait_for(lambda: Event.objects.filter(name__startswith="done ").exists(), timeout=30)
    wait_for(lambda: not queue_rows(), timeout=30)
    # The message is gone, so no read is to come; both readers stopped, a run still going (a third read) ended too.
    assert stop_workers(first, second) == [0, 0]
    logs = first_log.read_text() + second_log.read_text()
    assert Event.objects.filter(name__startswith="done ").count() == 1, "the retried job ran once"
    assert "try=2" in logs
    assert "try=3" not in logs


def test_jobs_on_one_photo_never_overlap_across_readers(spawn, group):
    photo = factories.photo(factories.event(), group)
    (_, first_log), (_, second_log) = spawn("first"), spawn("second")
    # Both read before the jobs come: one started seconds before the other would run them all.
    wait_for(lambda: lock_taken(first_log) and lock_taken(second_log), timeout=STARTUP_S)
    for _ in range(6):
        send({"job": "test_photo_span", "photo_id": str(photo.id), "seconds": 0.3})
    for _ in range(6):  # other photos' jobs keep both readers busy meanwhile
        send(job("test_record", seconds=0.1))
    wait_for(lambda: not queue_rows(), timeout=60)

    spans = sorted(
        tuple(float(value) for value in name.split()[2:4])
        for name in Event.objects.filter(name__startswith=f"span {photo.id}").values_list("name", flat=True)
    )
    names = Event.objects.filter(name__startswith="span ").values_list("name", flat=True)
    pids = {name.rsplit("pid=", 1)[1] for name in names}
    assert len(spans) == 6
    assert len(pids) == 2, "both readers ran jobs of the photo"
    assert all(earlier[1] <= later[0] for earlier, later in itertools.pairwise(spans)), spans
