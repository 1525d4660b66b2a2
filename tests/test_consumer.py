"""The loop's guarantees, run in this process against the real embedded PostgreSQL."""

import uuid

import pytest
from django.db import connection

from faces.models import Event, Photo
from jobqueue import queries, registry
from jobqueue.health import HealthServer, WorkerState
from jobqueue.privacy_lane import PRIVACY_LANE, ReadOrder
from jobqueue.registry import register
from tests.support import factories, job_handlers
from tests.support.queue_helpers import archived, job, queue_rows, reader_lock_held, send
from tests.support.waiting import poll
from tests.support.worker_health import health

pytestmark = pytest.mark.usefixtures("live_db")


@pytest.fixture(autouse=True)
def fresh_calls():
    job_handlers.calls.clear()
    job_handlers.flaky_failures.clear()
    job_handlers.deadlocks_to_lose.clear()
    job_handlers.rivals.clear()


@pytest.fixture
def drain(fast_worker):
    def run(state: WorkerState | None = None, **kwargs):
        worker = fast_worker(state=state, drain=True, **kwargs)
        worker.run()
        return worker

    return run


def make_published_photo() -> Photo:
    from django.utils import timezone

    return factories.photo_row(Event.objects.create(name="consumer test"), processed_at=timezone.now())


def test_a_failed_try_is_read_again_before_a_newer_message(drain):
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    job_handlers.flaky_failures[first] = 2
    send(job("test_flaky", first))
    send(job("test_record", second))

    drain()

    assert job_handlers.calls == [
        ("test_flaky", first),
        ("test_flaky", first),
        ("test_flaky", first),
        ("test_record", second),
    ]
    assert queue_rows() == []
    assert archived() == {}


def test_a_try_that_loses_a_deadlock_is_read_again_uncounted(drain):
    """PostgreSQL aborts a try that deadlocks with another session (40P01): no fault of its job, so its read is
    uncounted, as an outage's, and three such losses in a row still leave the job to complete on its try 1. Counted
    as failed tries, they archived it."""
    photo_id = str(uuid.uuid4())
    events = [str(Event.objects.create(name=name).id) for name in ("mine", "theirs")]
    job_handlers.deadlocks_to_lose[photo_id] = 3
    send(job("test_deadlock", photo_id, events=events))

    drain()
    for rival in job_handlers.rivals:
        rival.join(timeout=10)

    assert job_handlers.calls == [("test_deadlock", photo_id)] * 4
    assert Event.objects.filter(name__startswith="deadlocked").get().name == f"deadlocked {photo_id} try=1"
    assert (queue_rows(), archived()) == ([], {})


def test_a_job_cannot_register_anything_while_the_worker_runs(drain, monkeypatch):
    """The loop reads the registries between messages; a registration from inside a job is refused, and the
    registries are open again once the loop has ended."""
    monkeypatch.setattr(registry, "_periodic", {})
    refused = []

    @register("test_registers_late", id_field="photo_id")
    def registers_late(payload, ctx):
        try:
            registry.register_periodic("late", lambda: None, every_s=lambda: 1.0)
        except registry.RegistrySealed as error:
            refused.append(str(error))

    send(job("test_registers_late"))
    drain()
    assert refused == ["periodic task late registered while a worker runs: register when the apps load"]
    assert queue_rows() == []
    registry.register_periodic("late", lambda: None, every_s=lambda: 1.0)
    assert list(registry._periodic) == ["late"]


def test_first_class_messages_are_read_before_older_ordinary_ones_oldest_first(drain):
    """A first-class job (registered first=True) or a message marked "first" goes before every ordinary message;
    among themselves, oldest first (docs/ARCHITECTURE.md §4)."""
    ordinary = [str(uuid.uuid4()) for _ in range(3)]
    for photo_id in ordinary:
        send(job("test_record", photo_id))
    registered, marked = str(uuid.uuid4()), str(uuid.uuid4())
    send(job("test_first", registered))
    send(job("test_record", marked, first=True))

    drain()

    assert [photo_id for name, photo_id in job_handlers.calls if name != "test_flaky"] == [
        registered,
        marked,
        *ordinary,
    ]


def test_a_failed_first_class_try_is_read_again_before_a_newer_one_of_its_class(drain):
    """Privacy jobs first, then the renders sent first, then the rest (docs/ARCHITECTURE.md §4); within each
    class a failed try is read again before anything newer."""
    ordinary, failing_render, newer_render = (str(uuid.uuid4()) for _ in range(3))
    failing_privacy, newer_privacy = str(uuid.uuid4()), str(uuid.uuid4())
    send(job("test_record", ordinary))
    job_handlers.flaky_failures[failing_render] = 1
    send(job("test_flaky", failing_render, first=True))
    send(job("test_record", newer_render, first=True))
    job_handlers.flaky_failures[failing_privacy] = 1
    send(job("test_first", failing_privacy))
    send(job("test_first", newer_privacy))

    drain()

    privacy = {failing_privacy, newer_privacy}
    order = [
        (name, photo_id) for name, photo_id in job_handlers.calls if name != "test_flaky" or photo_id not in privacy
    ]
    assert order == [
        ("test_first", failing_privacy),
        ("test_first", failing_privacy),
        ("test_first", newer_privacy),
        ("test_flaky", failing_render),
        ("test_flaky", failing_render),
        ("test_record", newer_render),
        ("test_record", ordinary),
    ]
    assert queue_rows() == []


def test_three_failures_archive_and_unpublish_in_one_transaction(drain):
    photo = make_published_photo()
    msg_id = send(job("test_fail", str(photo.id)))

    drain()

    assert [call[0] for call in job_handlers.calls] == ["test_fail"] * 3
    assert archived() == {msg_id: (3, "failed")}
    photo.refresh_from_db()
    assert photo.processed_at is None
    # Nothing a failed try wrote survives it.
    assert not Event.objects.filter(name="written by a failing try").exists()
    # The archive row and the unpublished photo row were written by the same transaction.
    with connection.cursor() as cursor:
        cursor.execute("SELECT xmin::text FROM pgmq.a_jobs WHERE msg_id = %s", [msg_id])
        archive_xid = cursor.fetchone()[0]
        cursor.execute("SELECT xmin::text FROM photos WHERE id = %s", [photo.id])
        assert cursor.fetchone()[0] == archive_xid


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("just a string", "bad_message"),
        ([1, 2, 3], "bad_message"),
        ({"photo_id": "6f1c7e0e-0000-4000-8000-000000000001"}, "bad_message"),
        ({"job": "no_such_job", "photo_id": "6f1c7e0e-0000-4000-8000-000000000001"}, "unknown_job"),
        ({"job": "test_record", "photo_id": "not-a-uuid"}, "bad_message"),
        (job("test_missing"), "missing_object"),
    ],
)
def test_archived_on_the_first_try(body, reason, drain):
    msg_id = send(body)
    drain()
    assert archived() == {msg_id: (1, reason)}
    assert queue_rows() == []


def test_missing_object_unpublishes_the_photo_it_names(drain):
    photo = make_published_photo()
    send(job("test_missing", str(photo.id)))
    drain()
    photo.refresh_from_db()
    assert photo.processed_at is None


def test_a_message_for_a_deleted_row_is_deleted_not_archived(drain):
    send(job("test_gone"))
    drain()
    assert queue_rows() == []
    assert archived() == {}


def test_a_message_read_more_than_three_times_is_archived_without_running(drain):
    msg_id = send(job("test_record"))
    with connection.cursor() as cursor:
        cursor.execute("UPDATE pgmq.q_jobs SET read_ct = 3 WHERE msg_id = %s", [msg_id])

    drain()

    assert job_handlers.calls == []
    assert archived() == {msg_id: (4, "crashed_worker")}


def test_messages_left_hidden_by_a_stopped_worker_are_made_visible_on_start(drain):
    msg_id = send(job("test_record"))
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM pgmq.read('jobs', 3600, 1)")  # a worker read it, then died
    drain()
    assert [call[0] for call in job_handlers.calls] == ["test_record"]
    assert queue_rows() == []
    assert msg_id not in archived()


def test_the_lock_is_released_when_the_loop_ends(drain):
    send(job("test_record"))
    drain()
    assert not reader_lock_held()


def test_health_is_503_before_the_loop_200_while_it_runs_503_after(drain, monkeypatch):
    from jobqueue import registry
    from jobqueue.management.commands.run_worker import run_startup_work

    state = WorkerState()
    server = HealthServer(state, 0).start()
    seen = {}
    try:
        seen["before"] = health(server.port)

        @register("test_health_probe", id_field="photo_id")
        def probe(payload, ctx):
            seen["during"] = health(server.port)

        send(job("test_health_probe"))
        # As run_worker does: the apps' startup work (here only a probe of /health), then the loop.
        monkeypatch.setattr(registry, "_startup", {"probe": lambda: seen.setdefault("startup", health(server.port))})
        run_startup_work()
        drain(state)
        seen["after"] = health(server.port)
    finally:
        server.stop()
        job_handlers.calls.clear()

    assert seen["before"][0] == 503
    assert seen["startup"][0] == 503
    assert seen["during"][0] == 200
    assert seen["during"][1]["lock_held"] is True
    assert seen["after"][0] == 503
    assert seen["after"][1]["phase"] == "stopped"


def test_health_says_waiting_for_lock_while_another_worker_reads(embedded_pg, fast_worker):
    import threading

    import psycopg

    from jobqueue.queries import READER_LOCK_KEY

    state = WorkerState()
    server = HealthServer(state, 0).start()
    worker = fast_worker(state=state)
    with psycopg.connect(embedded_pg.uri, autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(%s)", [READER_LOCK_KEY])
        thread = threading.Thread(target=lambda: (worker.run(), connection.close()))
        thread.start()
        try:
            poll(lambda: state.phase == "waiting_for_lock", timeout=10, interval=0.02)
            status, body = health(server.port)
        finally:
            worker.request_stop()
            thread.join(10)
            server.stop()
    assert (status, body["phase"], body["lock_held"]) == (503, "waiting_for_lock", False)


def test_what_the_startup_work_built_reaches_every_job_through_its_context(fast_worker, monkeypatch):
    """As the faces app's engine does: built once before the loop, handed to each job, and not theirs to change."""
    from jobqueue.management.commands.run_worker import run_startup_work

    built, seen = object(), []

    @register("test_resource_probe", id_field="photo_id")
    def probe(payload, ctx):
        seen.append(ctx.resources["probe_resource"])
        with pytest.raises(TypeError):
            ctx.resources["probe_resource"] = None

    calls = []
    monkeypatch.setattr(registry, "_startup", {"probe_resource": lambda: calls.append(1) or built})
    send(job("test_resource_probe"))
    send(job("test_resource_probe"))
    fast_worker(drain=True).run(run_startup_work())

    assert (len(calls), seen) == (1, [built, built])
    assert queue_rows() == []
    assert archived() == {}


def test_a_privacy_job_read_as_the_oldest_message_is_hidden_for_the_lanes_timeout_only(monkeypatch):
    """A privacy job sent between a poll's first read (privacy work) and its last (the oldest message) was read
    hidden for the visibility timeout: a reader killed before its first heartbeat left the change unread for it
    (600 s in tests/test_reader_slots.py's take-over, which failed so once in a few dozen runs)."""
    msg_id = send(job("test_first"))
    order = ReadOrder(PRIVACY_LANE, vt_s=600)
    # The lane's read ran just before the privacy job was sent.
    monkeypatch.setattr(queries, "read_first", lambda cursor, vt_s, first: None)
    with connection.cursor() as cursor:
        assert order.read(cursor, outage_over=lambda: True).msg_id == msg_id
        cursor.execute("SELECT extract(epoch FROM vt - clock_timestamp()) FROM pgmq.q_jobs WHERE msg_id = %s", [msg_id])
        (hidden_s,) = cursor.fetchone()
    assert 0 < hidden_s <= order.privacy_vt_s, f"hidden {hidden_s:.0f} s"
