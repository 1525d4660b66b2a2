"""The `session` check: a DATABASE_URL whose connections do not keep a session fails, naming the fix.

The reader lock is a session advisory lock; behind a transaction pooler (Supabase's
port 6543, PgBouncer in transaction mode) it is silently lost. These are the decision's
tests: a pooler's reset between transactions simulated with `DISCARD ALL` (what
PgBouncer's server_reset_query runs) on the probe's own session, and the transaction
pooler's port on the settings a URL becomes. A real PgBouncer in both modes, in front of
the test server: tests/test_pooler.py.
"""

from pathlib import Path

import pytest
from django.db import connection, connections

from jobqueue import checks
from momentlens.database_url import database_settings

SUPABASE = "postgresql://worker:s3cret@aws-0-eu-central-1.pooler.supabase.com:{port}/postgres"


@pytest.mark.parametrize(("port", "pooled"), [(6543, True), (5432, False)])
def test_the_transaction_pooler_port_is_recognised_on_a_url(port, pooled):
    entry = database_settings(SUPABASE.format(port=port), Path("/unused"))
    assert checks.transaction_pooler_port(entry) is pooled


def test_port_6543_fails_naming_the_session_pooler(monkeypatch):
    """Decided from the settings alone: no connection is made."""
    monkeypatch.setitem(connection.settings_dict, "PORT", "6543")
    [message] = checks.session()
    assert message.is_serious()
    assert message.id == "jobqueue.E002"
    assert message.obj == "session"
    assert "transaction pooler" in message.msg
    assert "session pooler" in message.hint
    assert "5432" in message.hint


@pytest.mark.django_db
def test_a_direct_connection_keeps_its_session():
    atomic_before = connection.in_atomic_block
    [message] = checks.session()
    assert message.id == "jobqueue.I002", message
    assert not message.is_serious()
    # The probe used connections of its own: Django's is as it was, and usable.
    assert connection.in_atomic_block == atomic_before
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting(%s, true)", [checks.SESSION_SETTING])
        assert cursor.fetchone()[0] in (None, "")


@pytest.fixture
def probe_connection(django_db_blocker):
    with django_db_blocker.unblock():
        own = connections.create_connection("default")
        yield own
        own.close()


def test_a_reset_session_forgets_what_was_remembered(probe_connection):
    with probe_connection.cursor() as cursor:
        remembered = checks.remember(cursor)
        assert checks.recall(cursor) == remembered
        assert checks.session_lost(remembered, checks.recall(cursor), other_pid=-1) is None
        cursor.execute("DISCARD ALL")  # what PgBouncer runs on a server connection before handing it on
        recalled = checks.recall(cursor)
    assert recalled[0] != remembered[0]
    assert "the session was reset" in checks.session_lost(remembered, recalled, other_pid=-1)


def test_another_backend_or_a_shared_one_is_a_lost_session():
    assert "another backend (pid 11, then 12)" in checks.session_lost(("t", 11), ("t", 12), other_pid=13)
    assert "handed the first one's backend" in checks.session_lost(("t", 11), ("t", 11), other_pid=11)
    assert checks.session_lost(("t", 11), ("t", 11), other_pid=12) is None


@pytest.mark.django_db
def test_a_connection_reset_between_transactions_fails_the_check(monkeypatch):
    """As behind a transaction pooler: the probe's second transaction lands on a reset session."""
    real_recall = checks.recall

    def recall_after_a_reset(cursor):
        cursor.execute("DISCARD ALL")
        return real_recall(cursor)

    monkeypatch.setattr(checks, "recall", recall_after_a_reset)
    [message] = checks.session()
    assert message.is_serious()
    assert message.id == "jobqueue.E003"
    assert "does not keep a session" in message.msg
    assert "session pooler" in message.hint
    with connection.cursor() as cursor:  # Django's own connection is untouched
        cursor.execute("SELECT 1")
        assert cursor.fetchone() == (1,)
