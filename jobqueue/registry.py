"""Job handlers, registered by job name.

A handler takes the parsed message and returns a dict of extra log fields
(faces, files, ...) or None. It runs inside the transaction that deletes the
message, so its row writes commit with that delete or not at all.

Maintenance that an app wants done while the queue is empty (the faces app's sweep
of objects a failed delete left) registers as an idle task with its interval.

A job may also register `on_archive(payload) -> int`: what its archive must undo
or record (unpublish, mark failed). It runs inside the archive's transaction and
returns how many rows it changed, for the log line.
"""

import time
from collections.abc import Callable
from dataclasses import dataclass

Handler = Callable[[dict], dict | None]
ArchiveHook = Callable[[dict], int]


@dataclass(frozen=True)
class JobType:
    name: str
    handler: Handler
    # The message field that names the row the job acts on ("photo_id", ...).
    id_field: str
    on_archive: ArchiveHook | None = None


_jobs: dict[str, JobType] = {}


def register(name: str, *, id_field: str, on_archive: ArchiveHook | None = None) -> Callable[[Handler], Handler]:
    def decorate(handler: Handler) -> Handler:
        _jobs[name] = JobType(name, handler, id_field, on_archive)
        return handler

    return decorate


def lookup(name: str) -> JobType | None:
    return _jobs.get(name)


@dataclass
class IdleTask:
    name: str
    run: Callable[[], object]
    # Seconds between runs, read when due (settings may change in tests); 0 or less: never.
    every_s: Callable[[], float]
    # Never run yet: due at the worker's first idle moment (after a crash, that is when leftovers go).
    last_run: float = float("-inf")

    def due(self, now: float) -> bool:
        every = self.every_s()
        return every > 0 and now - self.last_run >= every


_idle: dict[str, IdleTask] = {}


def register_idle(name: str, run: Callable[[], object], *, every_s: Callable[[], float]) -> None:
    _idle[name] = IdleTask(name, run, every_s)


def due_idle_tasks() -> list[IdleTask]:
    now = time.monotonic()
    return [task for task in _idle.values() if task.due(now)]
