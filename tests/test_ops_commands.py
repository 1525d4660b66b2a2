"""queue_status reports the queue; requeue_archived re-sends one archived message."""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from tests.support.queue_helpers import job, send

pytestmark = pytest.mark.usefixtures("live_db")


def archive(msg_id: int, reason: str) -> None:
    from jobqueue import queries

    with connection.cursor() as cursor:
        queries.archive(cursor, msg_id, reason, "details of the failure")


def test_queue_status_counts_visible_hidden_and_archived():
    send(job("test_record"))
    send(job("test_record"))
    archived_id = send(job("test_fail"))
    archive(archived_id, "failed")
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM pgmq.read('jobs', 600, 1)")  # one hidden

    out = StringIO()
    call_command("queue_status", stdout=out)
    first, *rest = out.getvalue().splitlines()
    assert "length=2 visible=1 hidden=1" in first
    assert "archived=1" in first
    assert "reader_pid=-" in first
    assert [line for line in rest if line.startswith("slot=")] == ["slot=0 reader_pid=- (free)"]
    archived_lines = [line for line in rest if line.startswith("archived ")]
    assert len(archived_lines) == 1
    assert f"msg_id={archived_id}" in archived_lines[0]
    assert "reason=failed" in archived_lines[0]


def test_queue_status_shows_privacy_jobs_renders_and_the_rest_apart():
    send(job("test_record"))
    send(job("test_record", first=True))
    send(job("test_record", first=True))
    in_flight = send({"job": "reprocess_event", "event_id": "00000000-0000-0000-0000-000000000001"})
    send({"job": "reference_process", "reference_id": "00000000-0000-0000-0000-000000000002"})
    with connection.cursor() as cursor:  # read by a reader: hidden
        cursor.execute(
            "UPDATE pgmq.q_jobs SET vt = clock_timestamp() + interval '10 minutes' WHERE msg_id = %s", [in_flight]
        )

    out = StringIO()
    call_command("queue_status", stdout=out)
    lines = {line.split()[0]: line for line in out.getvalue().splitlines() if line.startswith("class=")}
    assert lines["class=privacy"].startswith("class=privacy waiting=1 oldest_waiting=0s hidden=1 running=0")
    assert lines["class=renders"] == "class=renders waiting=2 oldest_waiting=0s hidden=0"
    assert lines["class=ordinary"] == "class=ordinary waiting=1 oldest_waiting=0s hidden=0"


def test_requeue_archived_sends_a_copy_and_keeps_the_record():
    payload = job("test_fail")
    original = send(payload)
    archive(original, "failed")

    out = StringIO()
    call_command("requeue_archived", "--msg-id", str(original), stdout=out)

    with connection.cursor() as cursor:
        cursor.execute("SELECT msg_id, message, headers FROM pgmq.q_jobs")
        rows = cursor.fetchall()
        cursor.execute("SELECT count(*) FROM pgmq.a_jobs WHERE msg_id = %s", [original])
        still_archived = cursor.fetchone()[0]
    assert len(rows) == 1
    new_id, body, headers = rows[0]
    assert new_id != original
    assert json.loads(body) == payload
    assert json.loads(headers) == {"requeued_from": original}
    assert still_archived == 1
    assert f"new_msg_id={new_id}" in out.getvalue()


def test_requeue_of_an_unknown_id_is_a_clear_error():
    with pytest.raises(CommandError, match="no archived message"):
        call_command("requeue_archived", "--msg-id", "424242")
