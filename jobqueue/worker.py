"""The consumer loop behind `run_worker` (docs/ARCHITECTURE.md §4).

One reader at a time (jobqueue/session.py; whether its session is still its own is its
lease, jobqueue/lease.py), one message at a time, in the privacy lane's read order: privacy
work, then the renders it sent first, then the oldest of the rest. Privacy work that waits on an
ordinary try stops it at its next checkpoint (jobqueue/privacy_lane.py): its message goes
back uncounted, and so does a try that met an outage of something the job depends on (jobqueue/outage.py):
the reader then reads privacy work only until the outage ends. A try that lost a deadlock to another
transaction goes back uncounted too, once the winner has had a moment to commit. A try is a read
(jobqueue/attempt.py): pgmq's read_ct counts it, and the read commits before the handler runs, so a crash counts too.
The handler's writes and the message's delete commit in one transaction. What becomes
of a message is decided first (jobqueue/outcome.py), then carried out here.
"""

import logging
import threading
import time
from collections.abc import Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from types import MappingProxyType

from django.conf import settings
from django.db import transaction

from jobqueue import outcome, queries, registry, reporting
from jobqueue.attempt import Try
from jobqueue.health import WorkerState
from jobqueue.heartbeat import HEARTBEAT, Heartbeat, HeartbeatConfig
from jobqueue.lease import DatabaseLost
from jobqueue.logfmt import redact
from jobqueue.messages import MESSAGE_LIMITS, MessageLimits
from jobqueue.outage import OUTAGE_PROBE, Dependency, OutageProbe, OutageWait
from jobqueue.outcome import RETRIES, Action, Outcome, Retries
from jobqueue.privacy_lane import PRIVACY_LANE, Preempted, Preemption, PrivacyLaneConfig, ReadOrder
from jobqueue.session import APPLICATION_NAME, READER_SESSION, ReaderSession, ReaderSessionConfig, WorkerDied

log = logging.getLogger("jobqueue.worker")

# The reader session's application_name while it waits out an outage: then "storage since=...".
WAITING_PREFIX = f"{APPLICATION_NAME} waiting_for="

__all__ = ["Worker", "WorkerConfig", "WorkerDied"]


@dataclass(frozen=True)
class WorkerConfig:
    """Every knob of the consumer: the settings' (`from_settings`, once per run_worker) and each part's own config,
    handed by the Worker to the part it tunes."""

    # A read hides a message this long, renewed while its job runs: how soon a dead reader's message comes back.
    visibility_timeout_s: int
    # A failed try's first wait before it is read again, doubled after each try (outcome.backoff).
    retry_backoff_s: float
    # How often a worker that found every reader slot taken asks again.
    lock_retry_s: float
    # How long an idle reader waits before it reads an empty queue again.
    idle_poll_s: float
    # How long a lost database is waited for before the worker exits 1, for systemd to restart it.
    db_recovery_s: float
    # How many readers may read the queue at once, one slot each (1: the one reader of §4).
    reader_slots: int = 1
    # /health's queue length is counted at most this often: the count reads the queue.
    metrics_refresh_s: float = 5.0
    # How many tries a message gets, and the longest wait between two (jobqueue/outcome.py).
    retries: Retries = RETRIES
    # The privacy lane's read order, watch and stop (jobqueue/privacy_lane.py).
    privacy: PrivacyLaneConfig = PRIVACY_LANE
    # The heartbeat's rhythm (jobqueue/heartbeat.py).
    heartbeat: HeartbeatConfig = HEARTBEAT
    # How the reader regains a lost database and notices a hang-up (jobqueue/session.py, jobqueue/lease.py).
    session: ReaderSessionConfig = READER_SESSION
    # How a dependency's outage is probed (jobqueue/outage.py).
    outage_probe: OutageProbe = OUTAGE_PROBE
    # What a message may be (jobqueue/messages.py).
    message_limits: MessageLimits = MESSAGE_LIMITS

    @classmethod
    def from_settings(cls) -> "WorkerConfig":
        return cls(
            visibility_timeout_s=settings.WORKER_VISIBILITY_TIMEOUT_S,
            retry_backoff_s=settings.WORKER_RETRY_BACKOFF_S,
            lock_retry_s=settings.WORKER_LOCK_RETRY_S,
            idle_poll_s=settings.WORKER_IDLE_POLL_S,
            db_recovery_s=settings.WORKER_DB_RECOVERY_S,
            reader_slots=settings.WORKER_READER_SLOTS,
        )


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
    ):
        self.config = config
        self.state = state or WorkerState()
        self.drain = drain
        self.once = once
        self._stop = threading.Event()
        self._metrics_at = 0.0
        self.session = ReaderSession(self.state, self._stop, config.lock_retry_s, config.reader_slots, config.session)
        self.read_order = ReadOrder(config.privacy, config.visibility_timeout_s)
        self.preemption = Preemption(config.privacy, slots=config.reader_slots)
        self.heartbeat = Heartbeat(config.visibility_timeout_s, self.preemption, config.heartbeat)
        # The message whose try (or its outcome) a lost session cut short, until the next read gives it back.
        self._cut_short: Try | None = None
        self._resources: Mapping[str, object] = MappingProxyType({})
        self.outage = OutageWait(self.state, self._name_the_wait, config.outage_probe)
        self.state.update(slots=config.reader_slots)

    # -- control ---------------------------------------------------------

    def request_stop(self) -> None:
        if self._stop.is_set():
            raise StopNow
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    # -- the loop --------------------------------------------------------

    def run(self, resources: Mapping[str, object] | None = None) -> None:
        """Run until drained, stopped or dead, every job given `resources` (what the startup work built:
        run_worker's run_startup_work) in its context. Raises WorkerDied when the loop cannot go on."""
        self._resources = MappingProxyType(dict(resources or {}))
        self.heartbeat.start()
        try:
            with registry.sealed():
                self._loop()
        except StopNow:
            log.warning("worker_abandon", extra={"outcome": "rolled_back"})
        finally:
            self.state.update(phase="stopped")
            self.heartbeat.close()
            self.session.release()
            log.info("worker_stopped")

    def _loop(self) -> None:
        if not self.session.take(deadline=time.monotonic() + self.config.db_recovery_s):
            return
        self.state.update(phase="running")
        log.info("worker_running", extra={"drain": self.drain, "once": self.once})
        while not self.stopping:
            try:
                worked = self._step()
            except DatabaseLost as lost:
                self._recover(lost)
                continue
            if self.once or (self.drain and not worked and not self.outage.active):
                break
            self._run_periodic_tasks(idle=not worked)
            if not worked:
                self._stop.wait(self.config.idle_poll_s)

    def _step(self) -> bool:
        """Read and handle one message; False when none is visible."""
        if self.session.lease.gone():
            # Never read on a connection that does not hold the lock.
            raise DatabaseLost("the connection holding the reader lock is gone")
        with self.session.lease.guard():
            self._give_back_cut_short()
            message = self.read_order.read(self.session.cursor, self.outage.over)
            self._refresh_metrics()
        if message is None:
            return False
        attempt = Try(message, self.session.lease, self.preemption, self._resources, self.config.message_limits)
        try:
            self._handle(attempt)
        except DatabaseLost:
            # Whatever the loss cut short (the try, its retry, its archive) rolled back with the session.
            self._cut_short = attempt
            raise
        return True

    def _recover(self, lost: DatabaseLost) -> None:
        log.warning("db_lost", extra={"error": str(lost), **lost.in_flight})
        self.session.drop()
        if self.session.take(deadline=time.monotonic() + self.config.db_recovery_s):
            self.state.update(phase="running")  # /health: 200 again, as the loop is
            log.info("db_recovered")

    def _run_periodic_tasks(self, *, idle: bool) -> None:
        """Each due maintenance task, once; a failing one is logged and retried when next due. Idle-only work stops
        for a message (`_message_waiting`) and goes on at the next idle moment."""
        for task in registry.due_periodic_tasks(idle=idle):
            task.last_run = time.monotonic()
            try:
                finished = task.run(self._message_waiting) if task.idle_only else task.run()
            except Exception as error:  # maintenance never stops the loop; a lost database shows on the next read
                log.warning("periodic_task_failed", extra={"task": task.name, "error": _summary(error)})
                continue
            if finished is False:
                task.last_run = float("-inf")

    def _message_waiting(self) -> bool:
        """Whether a message waits to be read: what idle-only work stops for, between its units."""
        with self.session.lease.guard():
            return queries.message_waiting(self.session.cursor)

    # -- one message -----------------------------------------------------

    def _handle(self, attempt: Try) -> None:
        decided = outcome.before_running(attempt.number, attempt.problem, self.config.retries)
        if decided.action is not Action.RUN:
            self._carry_out(decided, attempt)
            return
        attempt.runs()
        privacy = attempt.job.type.first
        try:
            with self._running(attempt, privacy=privacy), self.session.lease.guard(), transaction.atomic():
                if privacy:
                    queries.mark_privacy_try(self.session.cursor)
                result = attempt.job.type.handler(attempt.job.payload, attempt.context()) or {}
                queries.delete(self.session.cursor, attempt.msg_id)
        except DatabaseLost as lost:
            lost.in_flight = {**attempt.fields, "ms": attempt.ms()}  # db_lost names the try it cut short
            raise
        except Preempted as preempted:
            self._give_back(attempt, str(preempted))
        except Exception as error:
            attempt.error = error
            decided = outcome.after_error(error, attempt.number, self.config.retry_backoff_s, self.config.retries)
            self._carry_out(decided, attempt)
        else:
            self.state.update(last_job_at=time.time(), jobs_done=self.state.jobs_done + 1)
            log.info("job_done", extra={**attempt.fields, "outcome": "completed", "ms": attempt.ms(), **result})

    @contextmanager
    def _running(self, attempt: Try, *, privacy: bool):
        """While the job runs: its message kept hidden (the heartbeat, for the visibility timeout it was read with;
        the heartbeat also watches for privacy work that waits on an ordinary try), and /health saying what runs."""
        self.state.update(working_on=f"msg={attempt.msg_id} job={attempt.job.name}")
        pid = self.session.lease.backend_pid
        vt_s = self.read_order.privacy_vt_s if privacy else None
        try:
            with self.heartbeat.beating(attempt.msg_id, attempt.job.name, pid, preemptible=not privacy, vt_s=vt_s):
                yield
        finally:
            self.state.update(working_on=None)

    def _give_back(self, attempt: Try, why: str) -> None:
        """A preempted try, rolled back: its message visible again at once and its read uncounted."""
        with self.session.lease.guard():
            queries.give_back(self.session.cursor, attempt.msg_id, attempt.number)
        self.state.update(preemptions=self.state.preemptions + 1, last_preemption_at=time.time())
        log.info("job_preempted", extra={**attempt.fields, "outcome": "given_back", "detail": why, "ms": attempt.ms()})

    def _settle_conflict(self, attempt: Try, decided: Outcome) -> None:
        """A try PostgreSQL aborted to settle a conflict with another transaction (a deadlock), rolled back: once
        the transaction that won has had `delay_s` to commit, its message is visible again, the oldest, and its read
        uncounted (the conflict is not the job's failure)."""
        self._stop.wait(decided.delay_s)
        with self.session.lease.guard():
            queries.give_back(self.session.cursor, attempt.msg_id, attempt.number)
        log.info(
            "job_given_back",
            extra={**attempt.fields, "outcome": decided.reason, "detail": decided.detail, "ms": attempt.ms()},
        )

    def _wait_out(self, attempt: Try, dependency: Dependency) -> None:
        """A try that met an outage, rolled back: its read uncounted (the outage is not the job's failure), its
        message visible again at the next probe (a privacy job, read even during the wait, is not tried in a tight
        loop); the reader waits the outage out (jobqueue/outage.py)."""
        self.outage.begin(dependency, attempt.error, attempt.fields)
        with self.session.lease.guard():
            queries.give_back(self.session.cursor, attempt.msg_id, attempt.number, self.outage.probe_in_s)
        log.info(
            "job_given_back",
            extra={**attempt.fields, "outcome": "outage", "waiting_for": dependency.name, "ms": attempt.ms()},
        )

    def _name_the_wait(self, waiting: str | None) -> None:
        """The reader's session names the outage it waits out, for queue_status (its application_name)."""
        name = f"{WAITING_PREFIX}{waiting}" if waiting else APPLICATION_NAME
        with self.session.lease.guard():
            queries.set_application_name(self.session.cursor, name)

    def _give_back_cut_short(self) -> None:
        """The try a lost session cut short was rolled back with it: its message is visible again now and its read
        uncounted (the database's outage is not the job's failure), unless another reader read it meanwhile. Left
        hidden, it came back only after the visibility timeout (a minute with several readers), and a privacy job
        whose try met a database restart waited that long to hide anything."""
        attempt = self._cut_short
        if attempt is None:
            return
        visible = queries.give_back(self.session.cursor, attempt.msg_id, attempt.number)
        self._cut_short = None
        # Not visible: another reader read it meanwhile, or a commit whose answer the loss swallowed deleted it.
        log.info("cut_short_visible", extra={**attempt.fields, "outcome": "visible" if visible else "gone_or_read"})

    def _carry_out(self, decided: Outcome, attempt: Try) -> None:
        if decided.action is Action.ARCHIVE:
            self._archive(decided, attempt)
        elif decided.action is Action.WAIT_OUT:
            self._wait_out(attempt, decided.waiting_for)
        elif decided.action is Action.GIVE_BACK:
            self._settle_conflict(attempt, decided)
        elif decided.action is Action.DELETE:
            with self.session.lease.guard():
                queries.delete(self.session.cursor, attempt.msg_id)
            log.info(
                "job_done",
                extra={**attempt.fields, "outcome": decided.reason, "detail": decided.detail, "ms": attempt.ms()},
            )
        elif decided.action is Action.RETRY:
            log.warning(
                "job_retry",
                extra={
                    **attempt.fields,
                    "outcome": decided.reason,
                    "error": decided.detail,
                    "backoff_s": decided.delay_s,
                    "ms": attempt.ms(),
                },
            )
            self._retry_after(decided.delay_s, attempt)

    def _retry_after(self, delay_s: float, attempt: Try) -> None:
        self._stop.wait(delay_s)
        if self.stopping:
            return  # left hidden: visible again when the next reader takes a slot (one slot), or after vt
        with self.session.lease.guard():
            # Visible again now: it is the oldest, so the next read takes it before any newer one. Unless
            # another reader read it meanwhile (the backoff outlasted vt): then it is that reader's.
            queries.make_visible(self.session.cursor, attempt.msg_id, attempt.number)

    def _archive(self, decided: Outcome, attempt: Try) -> None:
        """Archive with its reason and run the archive hooks (the job's own, and the apps'), in one transaction."""
        with self.session.lease.guard(), transaction.atomic():
            # The archive is read by people (queue_status): it gets the same masking as the logs.
            queries.archive(self.session.cursor, attempt.msg_id, decided.reason, redact(decided.detail)[:500])
            hooked = registry.run_archive_hooks(attempt.payload, attempt.job)
        log.error(
            "job_archived",
            extra={
                **attempt.fields,
                "outcome": "archived",
                "reason": decided.reason,
                "error": decided.detail,
                **hooked,
                "ms": attempt.ms(),
            },
        )
        if decided.final:
            reporting.report_final_failure(
                attempt.error or decided.detail,
                job=attempt.fields.get("job"),
                context={**attempt.fields, "tries": attempt.number, "reason": decided.reason},
            )

    def _refresh_metrics(self) -> None:
        """Queue length for /health, at most every few seconds: it counts the queue."""
        now = time.monotonic()
        if now - self._metrics_at < self.config.metrics_refresh_s:
            return
        self._metrics_at = now
        self.state.update(queue_length=queries.metrics(self.session.cursor).length)


def _summary(error: Exception) -> str:
    return f"{type(error).__name__}: {error}"
