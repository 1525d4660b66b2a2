"""What an app may use of the queue (the layer test holds every app to this module).

What an app registers (jobs, archive hooks, periodic tasks, startup work, /health fields, the dependencies whose
outages are waited out), the context a handler runs with, the errors that say how a try ended, sending jobs from a
job, the locks a handler holds until its commit, the system-check helpers an app's own checks use, and what an app's
ops commands may read of the queue's archive.
"""

from django.db import connection

from jobqueue import queries
from jobqueue.checks import DATABASE_SQL_FIX, DEPENDENCY_DOWN, WORKER, WORKER_START, failed, skip_without_database
from jobqueue.context import JobContext, hold_until_commit
from jobqueue.enqueue import enqueue, enqueue_unless_waiting, lock_fan_out
from jobqueue.errors import MissingObject, PermanentJobError, RowGone
from jobqueue.messages import is_uuid
from jobqueue.outage import register_dependency
from jobqueue.registry import (
    register,
    register_archive_hook,
    register_health_field,
    register_periodic,
    register_startup,
)


def archived_jobs_naming(ids: list[str], fields: list[str]) -> list[queries.ArchivedJob]:
    """The archived jobs whose message holds one of `ids` in one of `fields` ("event_id", "photo_id"), newest first.

    It scans the archive (pgmq has no index on the archived messages): for an ops command, never a job."""
    with connection.cursor() as cursor:
        return queries.archived_naming(cursor, list(fields), list(ids))


__all__ = [
    "DATABASE_SQL_FIX",
    "DEPENDENCY_DOWN",
    "WORKER",
    "WORKER_START",
    "JobContext",
    "MissingObject",
    "PermanentJobError",
    "RowGone",
    "archived_jobs_naming",
    "enqueue",
    "enqueue_unless_waiting",
    "failed",
    "hold_until_commit",
    "is_uuid",
    "lock_fan_out",
    "register",
    "register_archive_hook",
    "register_dependency",
    "register_health_field",
    "register_periodic",
    "register_startup",
    "skip_without_database",
]
