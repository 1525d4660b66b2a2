"""The pgmq SQL and the `jobs` queue are installed in the embedded server."""

import pytest
from django.db import connection

pytestmark = pytest.mark.django_db


def test_jobs_queue_exists():
    with connection.cursor() as cursor:
        cursor.execute("SELECT queue_name FROM pgmq.list_queues()")
        assert ("jobs",) in cursor.fetchall()


def test_provisioning_twice_changes_nothing(embedded_pg):
    from momentlens.devservices.postgres import provision

    provision(embedded_pg.uri)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pgmq.list_queues() WHERE queue_name = 'jobs'")
        assert cursor.fetchone()[0] == 1
