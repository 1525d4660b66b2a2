"""The reader's database session: the lock, the lease on abandoned messages, and losing it.

A reader holds one of `slots` reader slots, each a session advisory lock
(docs/ARCHITECTURE.md §4); a worker that finds every slot taken waits. With one slot
(the default) taking it also takes over what a stopped reader left hidden
(`make_abandoned_visible`); with more, another reader may be running those messages,
so they come back by their visibility timeout instead (jobqueue/heartbeat.py). The
lock lives as long as the backend that took it: whether it is still this reader's is
its `lease` (jobqueue/lease.py). Every statement of the loop goes through `cursor`, the
loop's own cursor on that backend.
"""

import logging
import threading
import time
from dataclasses import dataclass

from django.db import DatabaseError, connection

from jobqueue import checks, queries
from jobqueue.health import WorkerState
from jobqueue.lease import Lease

log = logging.getLogger("jobqueue.worker")

APPLICATION_NAME = "momentlens-worker"


@dataclass(frozen=True)
class ReaderSessionConfig:
    # The first wait after the database could not be reached: short, a blip is over by the next try.
    reconnect_first_s: float = 0.5
    # Doubled after each failure up to this: the reader is back within seconds of the database's return.
    reconnect_max_s: float = 5.0
    # A few messages can wait on a live socket (a NOTICE): more reads than this means it is not closed (lease.py).
    hang_up_reads: int = 3


READER_SESSION = ReaderSessionConfig()


@dataclass(frozen=True)
class Waiting:
    """Why a reader waits for a slot: its log line's level and fields (one line each time the reason changes)."""

    level: int
    fields: dict

    @property
    def outcome(self) -> str:
        return self.fields["outcome"]

    @classmethod
    def taken_by_other(cls, slots: int, holders: str) -> "Waiting":
        return cls(logging.INFO, {"outcome": "taken_by_other", "holder_backend_pid": holders, "slots": slots})

    @classmethod
    def slots_differ(cls, slots: int, theirs: list[int]) -> "Waiting":
        fields = {
            "outcome": "slots_differ",
            "slots": slots,
            "readers_slots": ",".join(map(str, theirs)),
            "fix": "set the same WORKER_READER_SLOTS on every worker",
        }
        return cls(logging.ERROR, fields)


class WorkerDied(Exception):
    """The loop cannot go on: the process exits non-zero so that systemd restarts it."""


class ReaderSession:
    def __init__(
        self,
        state: WorkerState,
        stop: threading.Event,
        lock_retry_s: float,
        slots: int = 1,
        config: ReaderSessionConfig = READER_SESSION,
    ):
        self.state = state
        self._stop = stop
        self._lock_retry_s = lock_retry_s
        self.slots = slots
        self._config = config
        # The slot this reader holds, once it holds one.
        self.slot: int | None = None
        self.lease = Lease(config.hang_up_reads)
        # The loop's own cursor on that backend: every statement of the loop (reads, deletes, archives, metrics).
        self.cursor = None

    def take(self, deadline: float) -> bool:
        """Connect, take the reader lock (waiting while another worker holds it), reset abandoned messages.

        False when asked to stop first; WorkerDied when the database stays unreachable past deadline.
        """
        announced, probed = None, False
        delay = self._config.reconnect_first_s
        self.state.update(phase="waiting_for_lock")
        while not self._stop.is_set():
            try:
                probed = probed or self._session_kept()
                waiting = self._try_take()
            except DatabaseError as error:
                connection.close()
                if time.monotonic() > deadline:
                    raise WorkerDied(f"database unreachable: {error}") from error
                log.warning("db_unreachable", extra={"error": str(error).strip(), "retry_s": delay})
                self._stop.wait(delay)
                delay = min(delay * 2, self._config.reconnect_max_s)
                continue
            if waiting is None:
                return True
            if waiting.outcome != announced:
                log.log(waiting.level, "queue_lock", extra={**waiting.fields, "retry_s": self._lock_retry_s})
                announced = waiting.outcome
            self._stop.wait(self._lock_retry_s)
        return False

    def _session_kept(self) -> bool:
        """True when connections keep their session; WorkerDied when they do not (a transaction pooler): the
        lock would be silently lost at the next transaction. Asked on every take, not only by worker_check:
        `run_worker` started by hand, or a pooler switched to transaction mode, must refuse too."""
        if problem := checks.lost_session(connection.alias):
            raise WorkerDied(f"{problem[1]}: {checks.SESSION_FIX}")
        return True

    def _try_take(self) -> "Waiting | None":
        """None once a slot is ours; else why this reader waits."""
        with connection.cursor() as cursor:
            queries.set_application_name(cursor, APPLICATION_NAME)
            if theirs := queries.other_slot_counts(cursor, self.slots):
                # One slot's reader takes over every hidden message, and vt and preemption follow the count: a
                # worker set otherwise than the readers already there would run their messages beside them.
                return Waiting.slots_differ(self.slots, theirs)
            slot = next((slot for slot in range(self.slots) if queries.try_reader_lock(cursor, slot)), None)
            if slot is None:
                held = queries.reader_slots(cursor, self.slots)
                return Waiting.taken_by_other(self.slots, ",".join(str(one.pid) for one in held if one.pid))
            queries.hold_slot_count(cursor, self.slots)
            # With one slot, a message hidden by a read is a stopped reader's; with more, it may be running.
            reset = queries.make_abandoned_visible(cursor) if self.slots == 1 else None
        self.slot = slot
        self.lease.hold(connection.connection.info.backend_pid)
        self.cursor = connection.cursor()
        self.state.update(lock_held=True, slot=slot)
        log.info(
            "queue_lock",
            extra={
                "outcome": "taken",
                "backend_pid": self.lease.backend_pid,
                "slot": slot if self.slots > 1 else None,
                "made_visible": reset,
            },
        )
        return None

    def drop(self) -> None:
        """After a loss: forget the lock and the connection, so that `take` starts afresh."""
        self.state.update(lock_held=False, slot=None)
        self.lease.forget()
        self.slot = None
        connection.close()

    def release(self) -> None:
        self.state.update(lock_held=False, slot=None)
        if connection.connection is None:
            return
        if self.slot is not None:
            try:
                with connection.cursor() as cursor:
                    queries.release_reader_lock(cursor, self.slot)
                    queries.release_slot_count(cursor, self.slots)
            except DatabaseError:
                pass  # a dead session holds no lock
        connection.close()
