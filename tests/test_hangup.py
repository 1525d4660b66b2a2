"""A job notices that the server closed its session without asking it anything (jobqueue/lease.py)."""

import pytest
from django.db import connection, connections

from jobqueue.lease import DatabaseLost, Lease
from jobqueue.session import READER_SESSION
from tests.support.waiting import poll

pytestmark = pytest.mark.usefixtures("live_db")


def test_a_live_session_is_not_hung_up_and_a_terminated_one_is():
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    lease = Lease(READER_SESSION.hang_up_reads)
    assert not lease.hung_up(), "a live session, idle: nothing to read"
    lease.checkpoint()
    killer = connections.create_connection("default")
    try:
        with killer.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
        poll(lease.hung_up, timeout=5, interval=0.01)
        assert lease.hung_up(), "the server's hang-up is seen on the socket"
        with pytest.raises(DatabaseLost, match="closed the session"):
            lease.checkpoint()
    finally:
        killer.close()
        connection.close()


def test_a_long_still_detection_stops_between_its_tiles(group):
    """A 12 MP photo is searched in many detector passes; the check runs before each, and stops it."""
    import cv2

    from faces.engines import resident_engine

    photo = cv2.resize(group, (4000, 3000))
    calls = []
    resident_engine().detect(photo, checkpoint=lambda: calls.append(1))
    assert len(calls) >= 10, f"{len(calls)} checks in a 12 MP detection"

    def cut_off():
        if len(calls) >= 3:
            raise DatabaseLost("cut off")
        calls.append(1)

    calls.clear()
    with pytest.raises(DatabaseLost):
        resident_engine().analyze(photo, checkpoint=cut_off)
    assert len(calls) == 3, "stopped at the first check after the cut, not at the end"
