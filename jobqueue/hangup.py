"""Noticing, without a round trip, that the server has closed the job's session.

A job whose session is killed (`pg_terminate_backend`, a server restart) has lost its row
locks and its reader slot: another reader may already be taking its message. Until the job
touches the database again it cannot know, and a clip's decoding and encoding can run for
seconds with no query. `ensure_session()` looks at the socket instead: the server's hang-up
makes it readable with nothing asked of it, and reading it hits its end. Long jobs call it
between frames and before they write to storage, so a cut-off try stops within a frame,
before its files are written, instead of finishing beside its successor.
"""

import select

import psycopg
from django.db import connection

from jobqueue.session import DatabaseLost

# A few messages can wait on a live socket (a NOTICE): more reads than that means it is not closed.
MOST_READS = 3


def hung_up() -> bool:
    """Whether the server has closed this thread's connection (only a closed one reads to its end)."""
    if connection.connection is None:
        return False  # not connected yet: the next query connects
    pgconn = connection.connection.pgconn
    try:
        for _ in range(MOST_READS):
            if not select.select([pgconn.socket], [], [], 0)[0]:
                return False
            pgconn.consume_input()
    except psycopg.OperationalError:
        return True
    return False


def ensure_session() -> None:
    """DatabaseLost when the job's session is gone: the try stops here, and the loop recovers."""
    if hung_up():
        raise DatabaseLost("the database closed the session while the job ran")
