"""The reader's lease: is the session that took the reader slot still this reader's?

A reader slot is a session advisory lock (jobqueue/session.py), so it lives exactly as long
as the backend that took it. A killed backend or a server restart takes the slot and the
job's row locks with it, and another reader may take the message at once; Django may even
reconnect transparently, onto a backend that holds nothing. `Lease` is the one place that
answers "is the lease still mine?", three ways:

- `gone()`: before a read, with no round trip: the connection is not the one that took the lock.
- `guard()`: after a statement failed: a DatabaseError on a lost session becomes DatabaseLost
  (the loop reconnects and takes a slot again); an error of one statement is raised as it is.
- `checkpoint()`: while a job runs with no query (a clip's decoding and encoding run for
  seconds): the server's hang-up makes the socket readable with nothing asked of it, and
  reading it hits its end. Long jobs call it (`ctx.checkpoint()`) between frames and before
  they write to storage, so a cut-off try stops within a frame instead of finishing beside
  its successor.

Django's connections are per thread: a Lease speaks of the calling thread's connection (the loop's).
"""

import select
from contextlib import contextmanager

import psycopg
from django.db import DatabaseError, connection


class DatabaseLost(Exception):
    """The loop's connection is gone (killed backend, server restart)."""

    def __init__(self, message: str):
        super().__init__(message)
        # The try it cut short, if any: its log fields and how long it ran (the db_lost line names it).
        self.in_flight: dict = {}


class Lease:
    def __init__(self, most_reads: int):
        # The backend that holds the reader lock; any other backend holds nothing.
        self.backend_pid: int | None = None
        # How many reads of a readable socket `hung_up` makes before it calls the socket open.
        self._most_reads = most_reads

    def hold(self, backend_pid: int) -> None:
        self.backend_pid = backend_pid

    def forget(self) -> None:
        self.backend_pid = None

    def gone(self) -> bool:
        """The session that took the reader lock is gone, even if Django has since reconnected. No round trip."""
        if connection.connection is None or connection.connection.closed:
            return True
        return connection.connection.info.backend_pid != self.backend_pid

    def lost(self) -> bool:
        return self.gone() or not connection.is_usable()

    @contextmanager
    def guard(self):
        """A DatabaseError on a lost session becomes DatabaseLost; any other one is raised as it is."""
        try:
            yield
        except DatabaseError as error:
            if self.lost():
                raise DatabaseLost(str(error).strip()) from error
            raise

    def hung_up(self) -> bool:
        """Whether the server has closed this thread's connection (only a closed one reads to its end)."""
        if connection.connection is None:
            return False  # not connected yet: the next query connects
        pgconn = connection.connection.pgconn
        try:
            for _ in range(self._most_reads):
                if not select.select([pgconn.socket], [], [], 0)[0]:
                    return False
                pgconn.consume_input()
        except psycopg.OperationalError:
            return True
        return False

    def checkpoint(self) -> None:
        """DatabaseLost when the job's session is gone: the try stops here, and the loop recovers."""
        if self.hung_up():
            raise DatabaseLost("the database closed the session while the job ran")
