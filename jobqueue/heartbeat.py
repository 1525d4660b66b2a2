"""The heartbeat: the message in flight stays hidden while its job runs, however long.

A message is read hidden for the visibility timeout (vt; a privacy job for a shorter one,
jobqueue/privacy_lane.py). A side thread, on a
connection of its own, sends `pgmq.set_vt(msg, vt)` every vt / beats_per_vt (3) while the main
thread runs the job (inference holds no database round trip), so a job may run far
longer than vt and no other reader takes its message; a reader that dies stops
beating, and its message is visible again at most vt later. That is what keeps vt
short with several readers (docs/ARCHITECTURE.md §4, "More than one reader").

The same connection names what the reader works on in its application_name
(`momentlens-worker heartbeat reader=<lock pid> msg=<id> job=<name>`), which
`queue_status` shows beside each reader slot, once a job has run `name_after_s`: a
short job costs no round trip here.

And while an ordinary try runs, the same thread watches for privacy work that waits on it, and asks the try to
stop for it (`Preemption.watch`, jobqueue/privacy_lane.py).
"""

import logging
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass

from django.db import DatabaseError, connections

from jobqueue import queries
from jobqueue.privacy_lane import Preemption

log = logging.getLogger("jobqueue.worker")


@dataclass(frozen=True)
class HeartbeatConfig:
    # A job running this long gets its name on the heartbeat connection (what queue_status shows): a short job
    # costs no round trip from here.
    name_after_s: float = 0.5
    # Beats per visibility timeout: a beat that fails (a blip on the heartbeat's connection) leaves the next one
    # time to land before the message shows again.
    beats_per_vt: int = 3
    # Never a beat more often than this: a visibility timeout near 0 must not spin the thread.
    shortest_beat_s: float = 0.05


HEARTBEAT = HeartbeatConfig()


class Heartbeat:
    def __init__(self, vt_s: int, preemption: Preemption, config: HeartbeatConfig = HEARTBEAT):
        # The message's visibility timeout, unless the job was read with another (`beating`).
        self.vt_s = vt_s
        self._config = config
        # What the watch asks the try in flight to stop with.
        self.preemption = preemption
        self._changed = threading.Condition()
        # The job in flight, (msg_id, label, vt_s), or None between jobs; whether privacy work may stop it.
        self._job: tuple[int, str, int] | None = None
        self._preemptible = False
        self._reader_pid: int | None = None
        self._closed = False
        # Held while a beat is sent: a job's end waits for it, so that no beat lands after
        # the message was made visible again for a retry.
        self._sending = threading.Lock()
        self._connection = None
        self._thread = threading.Thread(target=self._run, name="heartbeat", daemon=True)

    def start(self) -> "Heartbeat":
        self._thread.start()
        return self

    def close(self) -> None:
        with self._changed:
            self._closed = True
            self._changed.notify()
        self._thread.join(timeout=5)

    @contextmanager
    def beating(
        self, msg_id: int, label: str, reader_pid: int | None, *, preemptible: bool = False, vt_s: int | None = None
    ):
        """Keep `msg_id` hidden until the block ends, `vt_s` at a time (read with it; default: the heartbeat's);
        `preemptible`: watch for privacy work that waits on it."""
        self.preemption.clear()
        with self._changed:
            self._job, self._reader_pid, self._preemptible = (msg_id, label, vt_s or self.vt_s), reader_pid, preemptible
            self._changed.notify()
        try:
            yield
        finally:
            with self._changed:
                self._job, self._preemptible = None, False
                self._changed.notify()
            self._wait_for_the_beat_in_flight()

    def _wait_for_the_beat_in_flight(self) -> None:
        """Return once no beat is being sent. A beat that read the job before it ended may still be on
        its way; waiting for it here means none lands after the loop made the message visible again
        for a retry (a late set_vt would hide it for another vt). Beats that start later see no job."""
        with self._sending:
            pass

    def _run(self) -> None:
        current = named = None  # the job in flight as last seen; the job the connection's name shows
        name_due = beat_due = watch_due = None
        while True:
            with self._changed:
                if self._job != current:
                    current, now = self._job, time.monotonic()
                    # Jobs of less than name_after_s never touch the database from here: the
                    # loop's own round trips are all a short job costs.
                    name_due = now + self._config.name_after_s if current else (now if named else None)
                    beat_due = now + self._every(current) if current else None
                    watch_due = now + self.preemption.watch_every_s if current and self._preemptible else None
                if self._closed:
                    break
                due = min((at for at in (name_due, beat_due, watch_due) if at is not None), default=None)
                if due is None or due > time.monotonic():
                    self._changed.wait(None if due is None else max(0.0, due - time.monotonic()))
                    continue
                reader_pid = self._reader_pid
            with self._sending:
                if not self._still(current):
                    continue
                now = time.monotonic()
                if name_due is not None and now >= name_due:
                    self._name(current, reader_pid)
                    named, name_due = current, None
                if beat_due is not None and now >= beat_due:
                    self._beat(current, reader_pid)
                    beat_due = now + self._every(current)
                if watch_due is not None and now >= watch_due:
                    # Once the try is asked to stop, nothing more to watch for.
                    watch_due = None if self._watch(current, reader_pid) else now + self.preemption.watch_every_s
        self._close_connection()

    def _still(self, job: tuple[int, str, int] | None) -> bool:
        """No other job began (or this one ended) since `job` was read."""
        with self._changed:
            return self._job == job

    def _every(self, job: tuple[int, str, int]) -> float:
        """How often a beat keeps the job's message hidden: `beats_per_vt` beats to its visibility timeout."""
        return max(job[2] / self._config.beats_per_vt, self._config.shortest_beat_s)

    def _beat(self, job: tuple[int, str, int], reader_pid: int | None) -> None:
        with self._guard("heartbeat_failed"), self._cursor(job, reader_pid) as cursor:
            queries.extend_visibility(cursor, job[0], job[2])

    def _watch(self, job: tuple[int, str, int], reader_pid: int | None) -> bool:
        """Ask the try to stop when privacy work waits on it; whether it was asked."""
        with self._guard("heartbeat_failed"), self._cursor(job, reader_pid) as cursor:
            if self.preemption.watch(cursor, reader_pid):
                # What queue_status shows of this reader until its try stops.
                queries.set_application_name(cursor, f"{_label(job, reader_pid)} stopping_for=privacy")
                return True
        return False

    def _name(self, job: tuple[int, str, int] | None, reader_pid: int | None) -> None:
        with self._guard("heartbeat_failed"), self._cursor(job, reader_pid) as cursor:
            queries.set_application_name(cursor, _label(job, reader_pid))

    def _cursor(self, job: tuple[int, str, int] | None, reader_pid: int | None):
        """The thread's own connection (Django's are per thread). After a failure it is new: whichever
        call reconnects (a beat, a watch), the new connection says what runs before anything else."""
        if self._connection is None:
            self._connection = connections.create_connection("default")
            with self._connection.cursor() as cursor:
                queries.set_application_name(cursor, _label(job, reader_pid))
        return self._connection.cursor()

    @contextmanager
    def _guard(self, event: str):
        """A failed beat is logged and the connection dropped; the next beat reconnects. The loop's own
        connection is unaffected: a message whose beats keep failing is read again after vt."""
        try:
            yield
        except DatabaseError as error:
            log.warning(event, extra={"error": f"{type(error).__name__}: {error}".strip()})
            self._close_connection()

    def _close_connection(self) -> None:
        if self._connection is not None:
            try:
                self._connection.close()
            except DatabaseError:
                pass
            self._connection = None


def _label(job: tuple[int, str, int] | None, reader_pid: int | None) -> str:
    doing = f"msg={job[0]} job={job[1]}" if job else "idle"
    return f"{queries.HEARTBEAT_NAME} reader={reader_pid} {doing}"[:63]
