"""The consumer loop behind `run_worker` (docs/ARCHITECTURE.md §4).

One reader at a time (a session advisory lock), one message at a time, oldest
first. A try is a read: pgmq's read_ct counts it, and the read commits before the
handler runs, so a crash counts too. The handler's writes and the message's
delete commit in one transaction.
"""

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.db import DatabaseError, connection, transaction

from jobqueue import messages, queries, registry, reporting
from jobqueue.errors import PermanentJobError, RowGone
from jobqueue.health import WorkerState
from jobqueue.logfmt import kv
from momentlens.redaction import redact

log = logging.getLogger("jobqueue.worker")

MAX_TRIES = 3
APPLICATION_NAME = "momentlens-worker"
METRICS_REFRESH_S = 5.0
# What a message's ids are logged as.
ID_FIELDS = ("photo_id", "event_id", "reference_id")


@dataclass(frozen=True)
class WorkerConfig:
    visibility_timeout_s: int
    retry_backoff_s: float
    lock_retry_s: float
    idle_poll_s: float
    db_recovery_s: float

    @classmethod
    def from_settings(cls) -> "WorkerConfig":
        return cls(
            visibility_timeout_s=settings.WORKER_VISIBILITY_TIMEOUT_S,
            retry_backoff_s=settings.WORKER_RETRY_BACKOFF_S,
            lock_retry_s=settings.WORKER_LOCK_RETRY_S,
            idle_poll_s=settings.WORKER_IDLE_POLL_S,
            db_recovery_s=settings.WORKER_DB_RECOVERY_S,
        )

    def backoff(self, tries: int) -> float:
        return min(self.retry_backoff_s * 2 ** (tries - 1), 60.0)


class DatabaseLost(Exception):
    """The loop's connection is gone (killed backend, server restart)."""


class WorkerDied(Exception):
    """The loop cannot go on: the process exits non-zero so that systemd restarts it."""


class StopNow(BaseException):
    """A second SIGTERM/SIGINT: abandon the current job, rolling it back."""


class Worker:
    def __init__(
        self,
        config: WorkerConfig,
        state: WorkerState | None = None,
        *,
        drain: bool = False,
        once: bool = False,
        startup: Callable[[], None] | None = None,
    ):
        self.config = config
        self.state = state or WorkerState()
        self.drain = drain
        self.once = once
        self.startup = startup
        self._stop = threading.Event()
        self._metrics_at = 0.0
        # The backend that holds the reader lock; any other backend holds nothing.
        self._lock_pid: int | None = None
        # The loop's own cursor on that backend, reused for every read and delete.
        self._cursor = None

    # -- control ---------------------------------------------------------

    def request_stop(self) -> None:
        if self._stop.is_set():
            raise StopNow
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def _sleep(self, seconds: float) -> None:
        self._stop.wait(seconds)

    # -- the loop --------------------------------------------------------

    def run(self) -> None:
        """Run until drained, stopped or dead. Raises WorkerDied when the loop cannot go on."""
        try:
            if self.startup:
                self.startup()
            if not self._take_queue(deadline=time.monotonic() + self.config.db_recovery_s):
                return
            self.state.update(phase="running")
            log.info(kv("worker_running", drain=self.drain, once=self.once))
            while not self.stopping:
                try:
                    worked = self._step()
                except DatabaseLost as lost:
                    self._recover(lost)
                    continue
                if self.once or (self.drain and not worked):
                    break
                self._run_periodic_tasks(idle=not worked)
                if not worked:
                    self._sleep(self.config.idle_poll_s)
        except StopNow:
            log.warning(kv("worker_abandon", outcome="rolled_back"))
        finally:
            self.state.update(phase="stopped", lock_held=False)
            self._release_queue()
            log.info(kv("worker_stopped"))

    def _step(self) -> bool:
        """Read and handle one message; False when none is visible."""
        if self._lock_session_gone():
            # Never read on a connection that does not hold the lock.
            raise DatabaseLost("the connection holding the reader lock is gone")
        try:
            message = queries.read(self._cursor, self.config.visibility_timeout_s)
        except DatabaseError as error:
            raise self._lost(error) from error
        self._refresh_metrics()
        if message is None:
            return False
        self._handle(message)
        return True

    def _run_periodic_tasks(self, *, idle: bool) -> None:
        """Each due maintenance task, once; a failing one is logged and retried when next due."""
        for task in registry.due_periodic_tasks(idle=idle):
            task.last_run = time.monotonic()
            try:
                task.run()
            except Exception as error:  # maintenance never stops the loop; a lost database shows on the next read
                log.warning(kv("periodic_task_failed", task=task.name, error=f"{type(error).__name__}: {error}"))

    # -- one message -----------------------------------------------------

    def _handle(self, message: queries.Message) -> None:
        started = time.monotonic()
        fields = {"msg_id": message.msg_id, "try": message.read_ct}
        try:
            payload, unreadable = messages.decode(message.body), None
        except PermanentJobError as error:
            payload, unreadable = None, error
        fields.update(_ids_of(payload or {}))
        if message.read_ct > MAX_TRIES:
            # Read more often than it could have failed: it crashed the worker. Checked before
            # anything else about the message, so nothing in it can crash the worker again.
            detail = f"read {message.read_ct} times"
            self._archive(message, payload, "crashed_worker", detail, fields, final=True, job=_job_or_none(payload))
            return
        if unreadable is not None:
            self._archive(message, None, unreadable.reason, str(unreadable), fields, final=False)
            return
        try:
            job = messages.job_of(payload)
        except PermanentJobError as error:
            self._archive(message, payload, error.reason, str(error), fields, final=False)
            return
        fields["job"] = job.name
        try:
            with transaction.atomic():
                result = job.type.handler(job.payload) or {}
                queries.delete(self._cursor, message.msg_id)
        except RowGone as gone:
            self._delete(message)
            log.info(kv("job_done", **fields, outcome="row_gone", detail=str(gone), ms=_ms(started)))
        except PermanentJobError as error:
            self._archive(message, payload, error.reason, str(error), fields, final=False, error=error, job=job)
        except DatabaseError as error:
            if self._connection_lost():
                raise DatabaseLost(str(error)) from error
            self._failed_try(message, job, error, fields, started)
        except Exception as error:
            self._failed_try(message, job, error, fields, started)
        else:
            self.state.update(last_job_at=time.time(), jobs_done=self.state.jobs_done + 1)
            log.info(kv("job_done", **fields, outcome="completed", ms=_ms(started), **result))

    def _failed_try(self, message, job: messages.Job, error: Exception, fields: dict, started: float) -> None:
        summary = f"{type(error).__name__}: {error}"
        if message.read_ct >= MAX_TRIES:
            self._archive(message, job.payload, "failed", summary, fields, final=True, error=error, job=job)
            return
        delay = self.config.backoff(message.read_ct)
        log.warning(kv("job_retry", **fields, outcome="failed_try", error=summary, backoff_s=delay, ms=_ms(started)))
        self._sleep(delay)
        if self.stopping:
            return  # left hidden; the next worker makes it visible when it takes the lock
        try:
            with connection.cursor() as cursor:
                # Visible again now: it is the oldest, so the next read takes it before any newer one.
                queries.make_visible(cursor, message.msg_id)
        except DatabaseError as db_error:
            raise self._lost(db_error) from db_error

    def _archive(
        self, message, payload, reason: str, detail: str, fields: dict, *, final: bool, error=None, job=None
    ) -> None:
        """Archive with its reason, unpublish the photo it names and run the job's archive hook, in one transaction."""
        photo_id = messages.photo_id_of(payload)
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                # The archive is read by people (queue_status): it gets the same masking as the logs.
                queries.archive(cursor, message.msg_id, reason, redact(detail)[:500])
                unpublished = queries.unpublish_photo(cursor, photo_id) if photo_id else 0
                hooked = job.type.on_archive(job.payload) if job is not None and job.type.on_archive else 0
        except DatabaseError as db_error:
            raise self._lost(db_error) from db_error
        log.error(
            kv(
                "job_archived",
                **fields,
                outcome="archived",
                reason=reason,
                error=detail,
                unpublished=unpublished,
                on_archive_rows=hooked,
            )
        )
        if final:
            reporting.report_final_failure(
                error or detail,
                job=fields.get("job"),
                context={**fields, "tries": message.read_ct, "reason": reason},
            )

    def _delete(self, message) -> None:
        try:
            with connection.cursor() as cursor:
                queries.delete(cursor, message.msg_id)
        except DatabaseError as error:
            raise self._lost(error) from error

    # -- the lock, and losing the database -----------------------------------

    def _take_queue(self, deadline: float) -> bool:
        """Connect, take the reader lock (waiting while another worker holds it), reset abandoned messages.

        False when asked to stop first; WorkerDied when the database stays unreachable past deadline.
        """
        announced = False
        delay = 0.5
        self.state.update(phase="waiting_for_lock")
        while not self.stopping:
            try:
                with connection.cursor() as cursor:
                    queries.set_application_name(cursor, APPLICATION_NAME)
                    if queries.try_reader_lock(cursor):
                        reset = queries.make_abandoned_visible(cursor)
                        self._lock_pid = connection.connection.info.backend_pid
                        self._cursor = connection.cursor()
                        self.state.update(lock_held=True)
                        log.info(
                            kv(
                                "queue_lock",
                                outcome="taken",
                                backend_pid=self._lock_pid,
                                made_visible=reset,
                            )
                        )
                        return True
                    holder = queries.reader_lock_holder(cursor)
            except DatabaseError as error:
                connection.close()
                if time.monotonic() > deadline:
                    raise WorkerDied(f"database unreachable: {error}") from error
                log.warning(kv("db_unreachable", error=str(error).strip(), retry_s=delay))
                self._sleep(delay)
                delay = min(delay * 2, 5.0)
                continue
            if not announced:
                log.info(
                    kv(
                        "queue_lock",
                        outcome="taken_by_other",
                        holder_backend_pid=holder,
                        retry_s=self.config.lock_retry_s,
                    )
                )
                announced = True
            self._sleep(self.config.lock_retry_s)
        return False

    def _recover(self, lost: DatabaseLost) -> None:
        self.state.update(lock_held=False)
        self._lock_pid = None
        log.warning(kv("db_lost", error=str(lost).strip()))
        connection.close()
        if not self._take_queue(deadline=time.monotonic() + self.config.db_recovery_s):
            return
        log.info(kv("db_recovered"))

    def _release_queue(self) -> None:
        if connection.connection is None:
            return
        try:
            with connection.cursor() as cursor:
                queries.release_reader_lock(cursor)
        except DatabaseError:
            pass  # a dead session holds no lock
        connection.close()

    def _lost(self, error: DatabaseError) -> Exception:
        return DatabaseLost(str(error)) if self._connection_lost() else error

    def _lock_session_gone(self) -> bool:
        """The session that took the reader lock is gone, even if Django has since reconnected. No round trip."""
        if connection.connection is None or connection.connection.closed:
            return True
        return connection.connection.info.backend_pid != self._lock_pid

    def _connection_lost(self) -> bool:
        return self._lock_session_gone() or not connection.is_usable()

    def _refresh_metrics(self) -> None:
        """Queue length for /health, at most every few seconds: it counts the queue."""
        now = time.monotonic()
        if now - self._metrics_at < METRICS_REFRESH_S:
            return
        self._metrics_at = now
        try:
            with connection.cursor() as cursor:
                self.state.update(queue_length=queries.metrics(cursor).length)
        except DatabaseError as error:
            raise self._lost(error) from error


def _job_or_none(payload: dict | None) -> messages.Job | None:
    try:
        return messages.job_of(payload) if payload is not None else None
    except PermanentJobError:
        return None


def _ids_of(payload: dict) -> dict:
    return {key: str(payload[key])[:64] for key in ID_FIELDS if key in payload}


def _ms(started: float) -> int:
    return round((time.monotonic() - started) * 1000)
