"""Job handlers, registered by job name.

A handler takes the parsed message and its context (jobqueue/context.py: the try, the log
fields, `checkpoint()`) and returns a dict of extra log fields
(faces, files, ...) or None. It runs inside the transaction that deletes the
message, so its row writes commit with that delete or not at all.

Maintenance an app wants done now and then (the faces app's sweeps of objects a
failed delete left) registers as a periodic task with its interval: run between
messages when due, or only while the queue is empty (`idle_only`), and then stopped
for the first message that comes (a privacy job waits on no maintenance).

A job registered `first=True` is a privacy job, read before ordinary messages (jobqueue/privacy_lane.py).

Work a worker does once per start, in its own process after its start checks and before its
loop, registers as startup work (the faces app: building the resident engine, so that no job
pays for it and the engine is built once per start).

A job may also register `on_archive(payload) -> int`: what its archive must undo
or record (mark failed, unpublish an event). It runs inside the archive's transaction
and returns how many rows it changed, for the log line. An app may register an
archive hook for every archived message, valid job or not (the faces app: unpublish
the photo a message names); it gets the decoded payload, or None.

Every registry is filled when the apps load and read-only while a worker's loop runs (`sealed`, in
any thread): what the loop, the heartbeat and /health read never changes under them.
"""

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from jobqueue.context import JobContext

Handler = Callable[[dict, JobContext], dict | None]
ArchiveHook = Callable[[dict], int]


@dataclass(frozen=True)
class JobType:
    name: str
    handler: Handler
    # The message field that names the row the job acts on ("photo_id", ...).
    id_field: str
    on_archive: ArchiveHook | None = None
    # Read before ordinary messages (oldest first among them).
    first: bool = False


class RegistrySealed(RuntimeError):
    """A registration while a worker runs: register when the apps load (AppConfig.ready), never later."""


_running = 0  # worker loops running now, in any thread
_running_lock = threading.Lock()


@contextlib.contextmanager
def sealed() -> Iterator[None]:
    """While this lasts (a worker's loop), every registration raises RegistrySealed."""
    global _running
    with _running_lock:
        _running += 1
    try:
        yield
    finally:
        with _running_lock:
            _running -= 1


def _open_for(what: str) -> None:
    if _running:
        raise RegistrySealed(f"{what} registered while a worker runs: register when the apps load")


_jobs: dict[str, JobType] = {}
# Every id field a registered job names, in log order: kept at registration, read per message.
_id_fields: list[str] = []


def register(
    name: str, *, id_field: str, on_archive: ArchiveHook | None = None, first: bool = False
) -> Callable[[Handler], Handler]:
    def decorate(handler: Handler) -> Handler:
        _open_for(f"job {name}")
        _jobs[name] = JobType(name, handler, id_field, on_archive, first)
        _id_fields[:] = sorted({*_id_fields, id_field})
        return handler

    return decorate


def lookup(name: str) -> JobType | None:
    return _jobs.get(name)


def job_types() -> list[JobType]:
    """Every registered job, by name (the privacy lane picks its privacy jobs: jobqueue/privacy_lane.py)."""
    return [job for _, job in sorted(_jobs.items())]


def ids_of(payload: dict | None) -> dict:
    """The ids a message is logged by: every id field a registered job names, that it carries."""
    if not isinstance(payload, dict):
        return {}
    return {field: str(payload[field])[:64] for field in _id_fields if field in payload}


AnyArchiveHook = Callable[[dict | None], int]
_archive_hooks: dict[str, AnyArchiveHook] = {}


def register_archive_hook(field: str, hook: AnyArchiveHook) -> None:
    """`hook(payload)` runs in every archive's transaction; its row count is logged as `field`."""
    _open_for(f"archive hook {field}")
    _archive_hooks[field] = hook


def run_archive_hooks(payload: dict | None, job) -> dict:
    """The apps' hooks, then the job's own; {log field: rows changed}."""
    rows = {field: hook(payload) for field, hook in _archive_hooks.items()}
    if job is not None and job.type.on_archive is not None:
        rows["on_archive_rows"] = job.type.on_archive(job.payload)
    return rows


@dataclass
class PeriodicTask:
    name: str
    # Light work: run(). Idle-only work: run(message_waiting), asking between its units whether a message waits, and
    # returning False where it stopped for one: it goes on at the next idle moment, not a period later.
    run: Callable[..., object]
    # Seconds between runs, read when due (settings may change in tests); 0 or less: never.
    every_s: Callable[[], float]
    # Heavy work waits for an empty queue; light work also runs between messages.
    idle_only: bool
    # Never run yet: due at the first chance (after a crash, that is when leftovers go).
    last_run: float = float("-inf")

    def due(self, now: float, idle: bool) -> bool:
        every = self.every_s()
        return (idle or not self.idle_only) and every > 0 and now - self.last_run >= every


_periodic: dict[str, PeriodicTask] = {}


def register_periodic(
    name: str, run: Callable[..., object], *, every_s: Callable[[], float], idle_only: bool = False
) -> None:
    _open_for(f"periodic task {name}")
    _periodic[name] = PeriodicTask(name, run, every_s, idle_only)


def due_periodic_tasks(*, idle: bool) -> list[PeriodicTask]:
    now = time.monotonic()
    return [task for task in _periodic.values() if task.due(now, idle)]


# What /health shows beside the loop's own state: {field: a function returning its value}.
_health_fields: dict[str, Callable[[], object]] = {}


def register_health_field(name: str, value: Callable[[], object]) -> None:
    """`value()` appears in /health as `name` (the faces app: the engine and its provider)."""
    _open_for(f"health field {name}")
    _health_fields[name] = value


def health_fields() -> dict:
    return {name: value() for name, value in _health_fields.items()}


# Work run_worker does once, before its loop: {name: work}, in registration order. What a work returns is
# handed to every job of the worker as ctx.resources[name] (jobqueue/context.py).
_startup: dict[str, Callable[[], object]] = {}


def register_startup(name: str, work: Callable[[], object]) -> None:
    """`work()` runs once per worker start, after the start checks pass and before the first read; its result
    is every job's `ctx.resources[name]`."""
    _open_for(f"startup work {name}")
    _startup[name] = work


def startup_work() -> list[tuple[str, Callable[[], object]]]:
    return list(_startup.items())
