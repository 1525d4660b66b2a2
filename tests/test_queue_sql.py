"""The pgmq SQL and the `jobs` queue are installed in the embedded server."""

import json

import pytest
from django.db import connection

pytestmark = pytest.mark.django_db


def test_jobs_queue_exists():
    with connection.cursor() as cursor:
        cursor.execute("SELECT queue_name FROM pgmq.list_queues()")
        assert ("jobs",) in cursor.fetchall()


def test_send_then_read_returns_the_message():
    payload = {"job": "face_process", "photo_id": "6f1c7e0e-0000-4000-8000-000000000001"}
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM pgmq.send('jobs', %s::jsonb)", [json.dumps(payload)])
        msg_id = cursor.fetchone()[0]
        cursor.execute("SELECT msg_id, read_ct, message FROM pgmq.read('jobs', 30, 1)")
        rows = cursor.fetchall()
    assert len(rows) == 1
    read_id, read_ct, message = rows[0]
    assert read_id == msg_id
    assert read_ct == 1
    assert json.loads(message) == payload


def test_provisioning_twice_changes_nothing(embedded_pg):
    from momentlens.devservices.postgres import provision

    provision(embedded_pg.uri)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pgmq.list_queues() WHERE queue_name = 'jobs'")
        assert cursor.fetchone()[0] == 1
