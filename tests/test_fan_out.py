"""Deduplicated fan-outs (docs/ARCHITECTURE.md §5, reprocess_event): a `reprocess` already waiting for a
photo is not sent again; two fan-outs of one event never both send; the check probes an index, never
scans the queue or its archive.
"""

import json
import logging
import threading

import pytest
from django.db import connection, transaction

from faces.jobs.photo_jobs import reprocess_event
from jobqueue import queries
from jobqueue.context import JobContext
from jobqueue.enqueue import enqueue_unless_waiting
from tests.support import factories
from tests.support.queue_helpers import archived, send, waiting_for_lock, waiting_on_me
from tests.support.waiting import poll

pytestmark = pytest.mark.usefixtures("live_db", "fast_retries")


def queued() -> list[dict]:
    """Every message in the queue, oldest first."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT message FROM pgmq.q_jobs ORDER BY msg_id")
        return [json.loads(row[0]) for row in cursor.fetchall()]


def queued_reprocess_ids() -> list[str]:
    return [message["photo_id"] for message in queued() if message["job"] == "reprocess" and "photo_id" in message]


def fan_out(event) -> dict:
    """reprocess_event in a transaction of its own, as the worker runs it."""
    with transaction.atomic():
        return reprocess_event(
            {"job": "reprocess_event", "event_id": str(event.id)}, JobContext.outside_worker("reprocess_event")
        )


def read_once(msg_id: int) -> None:
    """What a reader's pgmq.read leaves: read_ct 1, hidden. In flight, or failed and waiting for its retry."""
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE pgmq.q_jobs SET read_ct = 1, vt = now() + interval '10 minutes' WHERE msg_id = %s", [msg_id]
        )


def test_five_dnp_toggles_on_a_200_photo_event_cost_200_renders_not_1000(fast_worker, caplog):
    """A guest toggles DNP 5 times in a minute: 5 reprocess_event, and one reprocess per photo."""
    event = factories.event()
    photos = factories.rendered_photo_rows(event, 200)
    for _ in range(5):
        send({"job": "reprocess_event", "event_id": str(event.id)})

    with caplog.at_level(logging.INFO, logger="jobqueue.worker"):
        for _ in range(5):  # the five reprocess_event, and nothing else: the reprocess messages queue behind them
            fast_worker(once=True).run()

    messages = queued()
    assert {message["job"] for message in messages} == {"reprocess"}
    assert sorted(queued_reprocess_ids()) == sorted(str(photo.id) for photo in photos), "one per photo"
    assert len(messages) == 200
    done = [record for record in caplog.records if record.getMessage() == "job_done"]
    assert [(r.job, r.enqueued, r.already_waiting) for r in done] == [("reprocess_event", 200, 0)] + [
        ("reprocess_event", 0, 200)
    ] * 4
    assert archived() == {}


def test_a_reprocess_already_read_or_archived_does_not_suppress_a_new_one():
    """Only a message never read counts: one in flight (or hidden for a retry) may have read the old DNP state."""
    event = factories.event()
    waiting, in_flight, archived_one, fresh = factories.rendered_photo_rows(event, 4)
    send({"job": "reprocess", "photo_id": str(waiting.id)})
    read_msg = send({"job": "reprocess", "photo_id": str(in_flight.id)})
    archived_msg = send({"job": "reprocess", "photo_id": str(archived_one.id)})
    # Another job for the photo, and the same job under another id field, do not count either.
    send({"job": "face_process", "photo_id": str(fresh.id)})
    send({"job": "reprocess", "reference_id": str(fresh.id)})
    read_once(read_msg)
    with connection.cursor() as cursor:
        queries.archive(cursor, archived_msg, "failed", "gone for good")

    assert fan_out(event) == {"hidden": 0, "enqueued": 3, "already_waiting": 1}
    ids = queued_reprocess_ids()
    assert ids.count(str(waiting.id)) == 1, "the waiting one was not sent again"
    assert ids.count(str(in_flight.id)) == 2, "the one in flight, and a new one"
    assert ids.count(str(archived_one.id)) == 1, "the archive is never read: a new one"
    assert ids.count(str(fresh.id)) == 1


def test_enqueue_unless_waiting_is_one_generic_statement():
    """Any job and id field: in the ids' order, each id once; nothing to send is not an error."""
    send({"job": "ping", "target_id": "a"})
    with transaction.atomic():
        assert enqueue_unless_waiting("ping", "target_id", ["a", "b", "c", "b"]) == 2
        assert enqueue_unless_waiting("ping", "target_id", ["c", "a", "b"]) == 0, "every one waiting"
        assert enqueue_unless_waiting("ping", "target_id", []) == 0
        assert enqueue_unless_waiting("pong", "target_id", ["a"]) == 1, "another job: its own messages"
    assert queued() == [
        {"job": "ping", "target_id": "a"},
        {"job": "ping", "target_id": "b"},
        {"job": "ping", "target_id": "c"},
        {"job": "pong", "target_id": "a"},
    ]


def test_two_fan_outs_of_one_event_at_once_send_each_photo_once():
    """Two readers run reprocess_event for one event at once: the second waits for the first's commit."""
    event = factories.event()
    photos = factories.rendered_photo_rows(event, 20)
    results, errors = {}, []
    first_sent = threading.Event()

    def first():
        try:
            with transaction.atomic():
                results["first"] = reprocess_event(
                    {"job": "reprocess_event", "event_id": str(event.id)}, JobContext.outside_worker("reprocess_event")
                )
                first_sent.set()
                # Not committed yet: the second fan-out must be waiting for the lock, not reading.
                results["second_waited"] = poll(
                    lambda: waiting_for_lock(queries.FAN_OUT_LOCK), timeout=20, interval=0.01
                )
        except Exception as error:
            errors.append(error)
        finally:
            first_sent.set()
            connection.close()

    def second():
        try:
            assert first_sent.wait(30)
            results["second"] = fan_out(event)
        except Exception as error:
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert results["second_waited"], "the second fan-out waited for the first's lock"
    assert results["first"] == {"hidden": 0, "enqueued": 20, "already_waiting": 0}
    assert results["second"] == {"hidden": 0, "enqueued": 0, "already_waiting": 20}
    assert sorted(queued_reprocess_ids()) == sorted(str(photo.id) for photo in photos)


def test_the_waiting_check_probes_its_index_not_the_queue():
    """EXPLAIN of the statement on a realistic queue: the partial GIN index, no Seq Scan, never the archive.

    Thousands of unrelated messages, some read; the table analyzed, as autovacuum keeps a busy queue.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pgmq.send_batch('jobs', ARRAY(SELECT jsonb_build_object("
            "'job', (ARRAY['face_process', 'thumbnail_dims', 'reprocess'])[1 + i %% 3], "
            "'photo_id', gen_random_uuid()::text) FROM generate_series(1, %s) AS i))",
            [6000],
        )
        cursor.execute("UPDATE pgmq.q_jobs SET read_ct = 1 WHERE msg_id %% 5 = 0", [])
        cursor.execute("SELECT pgmq.archive('jobs', msg_id) FROM pgmq.q_jobs WHERE msg_id %% 7 = 0", [])
        cursor.execute("ANALYZE pgmq.q_jobs")
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE schemaname = 'pgmq' AND indexname = 'q_jobs_waiting_idx'")
        (definition,) = cursor.fetchone()
        ids = [str(photo.id) for photo in factories.rendered_photo_rows(factories.event(), 200)]
        cursor.execute("EXPLAIN " + queries.SEND_UNLESS_WAITING, ["reprocess", "photo_id", "{}", ids, queries.QUEUE])
        plan = "\n".join(row[0] for row in cursor.fetchall())

    assert "USING gin (message jsonb_path_ops)" in definition
    assert "WHERE (read_ct = 0)" in definition
    assert "Index Scan on q_jobs_waiting_idx" in plan, plan
    assert "Seq Scan on q_jobs" not in plan, plan
    assert "a_jobs" not in plan, plan


def test_the_database_file_can_be_applied_twice(embedded_pg):
    """deploy/database.sql through psql, as the operator applies it: a second run changes nothing."""
    from momentlens.devservices.postgres import DATABASE_SQL, apply_sql_file

    apply_sql_file(embedded_pg.uri, DATABASE_SQL)
    apply_sql_file(embedded_pg.uri, DATABASE_SQL)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_indexes WHERE schemaname = 'pgmq' AND tablename = 'q_jobs'")
        assert cursor.fetchone()[0] == 4, "the primary key, pgmq's vt index, the waiting and the message index"
        cursor.execute("SELECT count(*) FROM pgmq.list_queues() WHERE queue_name = 'jobs'")
        assert cursor.fetchone()[0] == 1
    assert queries.WAITING_INDEX == "pgmq.q_jobs_waiting_idx"
    assert queries.MESSAGE_INDEX == "pgmq.q_jobs_message_idx"


@pytest.mark.parametrize("read", ["privacy_jobs", "renders_sent_first"])
def test_the_first_class_read_probes_its_index_not_the_queue(read):
    """EXPLAIN of each first-class read the worker makes (jobqueue.privacy_lane.ReadOrder.read: privacy jobs, then the
    renders they sent first) on a long queue of ordinary messages: the message index, no Seq Scan."""
    from jobqueue.privacy_lane import PRIVACY_RENDER_MARK, privacy_jobs

    containments = privacy_jobs() if read == "privacy_jobs" else [PRIVACY_RENDER_MARK]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pgmq.send_batch('jobs', ARRAY(SELECT jsonb_build_object('job', 'face_process', "
            "'photo_id', gen_random_uuid()::text) FROM generate_series(1, %s)))",
            [6000],
        )
        cursor.execute("ANALYZE pgmq.q_jobs")
        first = [json.dumps(item) for item in containments]
        cursor.execute("EXPLAIN " + queries.READ_FIRST, [first, 30])
        plan = "\n".join(row[0] for row in cursor.fetchall())

    assert first, "the worker reads these containments first"
    assert "q_jobs_message_idx" in plan, plan
    assert "Seq Scan on q_jobs" not in plan, plan


def test_a_photo_job_in_flight_on_another_reader_is_reprocessed_after_it_commits():
    """Reader A runs a photo's first job (its row locked, not yet rendered: variant_version 0) with the
    members it read before a DNP change; reader B runs that change's reprocess_event meanwhile. B waits for
    A's commit and then sends a reprocess for the photo A just rendered with the old members."""
    from faces.models import Photo

    event = factories.event()
    photo = factories.rendered_photo_rows(event, 1)[0]
    Photo.objects.filter(id=photo.id).update(variant_version=0, processed_at=None)
    locked, errors, results = threading.Event(), [], {}

    def reader_a():
        try:
            with transaction.atomic():
                Photo.objects.select_for_update().get(id=photo.id)
                locked.set()
                # Detect, match, render... until B's fan-out waits for this photo's lock: it must not read around it.
                results["b_waited"] = poll(waiting_on_me, timeout=30, interval=0.01)
                Photo.objects.filter(id=photo.id).update(variant_version=1)
        except Exception as error:
            errors.append(error)
        finally:
            locked.set()
            connection.close()

    thread = threading.Thread(target=reader_a)
    thread.start()
    assert locked.wait(30)
    result = fan_out(event)
    thread.join(60)
    assert errors == []
    assert results["b_waited"], "B's fan-out waited for A's row lock"
    assert result == {"hidden": 0, "enqueued": 1, "already_waiting": 0}
    assert queued_reprocess_ids() == [str(photo.id)]
