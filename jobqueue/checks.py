"""The consumer's preflight, as Django system checks: the database, its session, the queue, the reader settings.

Every worker check is tagged WORKER and registered with deploy=True, so it runs only
when asked for: `manage.py worker_check` (systemd's ExecStartPre) or
`manage.py check --deploy --tag worker`, never before every management command.
The checks `run_worker` runs in its own process before the loop are also tagged
WORKER_START: those that need no network (the reader settings; the faces app's models
and thresholds).

Each check returns one message whose `obj` is its name: Info with what it found,
Error with the problem and `hint` with the fix. A check that needs the database
starts with `skip_without_database(name)`: one Warning, SKIPPED, when it is unreachable
(the `database` check reports why). The ids are listed in docs/OPERATIONS.md.
"""

import secrets

from django.conf import settings
from django.core.checks import CheckMessage, Error, Info
from django.core.checks import Warning as CheckWarning
from django.db import connection, connections

from jobqueue import queries
from jobqueue.heartbeat import HEARTBEAT

# Every check of the worker's preflight.
WORKER = "worker"
# The subset run_worker runs in its own process before the loop (no network needed).
WORKER_START = "worker_start"

# The id of "skipped: the database is unreachable" (worker_check prints it as SKIP).
SKIPPED = "jobqueue.W001"
# The id of "the queue's waiting index is missing" (a warning: the worker runs, fan-outs scan the queue).
NO_WAITING_INDEX = "jobqueue.W002"
# The id of "a dependency the running worker waits out is down" (storage: jobqueue/outage.py): a failure for
# `worker_check`, a warning for the preflight of a start (`worker_check --start`), since a worker kept from starting
# would not read the privacy work that needs no such dependency meanwhile.
DEPENDENCY_DOWN = "jobqueue.E100"
# The worker's part of the database (pgmq, the queue, the worker's columns, the queue's indexes) is one
# idempotent file, applied as the tables' owner: the worker's own role may not create any of it.
DATABASE_SQL_FIX = (
    'as the tables\' owner: psql "$ADMIN_DATABASE_URL" -X -v ON_ERROR_STOP=1 -f deploy/database.sql '
    "(docs/OPERATIONS.md, step 4)"
)

PGMQ_FUNCTIONS = ("pgmq.read(text,integer,integer,jsonb)", "pgmq.archive(text,bigint)", "pgmq.send(text,jsonb)")
# Supabase's transaction pooler (Supavisor, transaction mode).
TRANSACTION_POOLER_PORT = 6543
SESSION_FIX = (
    "use the session pooler (Supabase: port 5432) or a direct connection in DATABASE_URL: "
    "the reader lock is a session advisory lock"
)
# A custom setting the session probe writes in one transaction and reads in the next.
SESSION_SETTING = "momentlens.session_probe"


def _one_line(error: BaseException) -> str:
    return f"{type(error).__name__}: {' '.join(str(error).split())}"


def failed(check: str, id: str, problem: str, *, hint: str) -> list[CheckMessage]:
    """The one Error a failing check returns: what is wrong, and in `hint` the fix."""
    return [Error(problem, hint=hint, obj=check, id=id)]


def skip_without_database(check: str) -> list[CheckMessage]:
    """[SKIPPED] when the database cannot be reached (the `database` check says why), else []."""
    try:
        connection.ensure_connection()
    except Exception:
        return [
            CheckWarning("skipped: the database is unreachable", hint="see the database check", obj=check, id=SKIPPED)
        ]
    return []


def database(app_configs=None, **kwargs) -> list[CheckMessage]:
    try:
        with connection.cursor() as cursor:
            version = queries.server_version(cursor)
    except Exception as error:
        return failed(
            "database",
            "jobqueue.E001",
            f"cannot connect: {_one_line(error)}",
            hint="check DATABASE_URL (the session pooler, port 5432) and that the database is up",
        )
    return [Info(f"PostgreSQL {version}", obj="database", id="jobqueue.I001")]


def remember(cursor) -> tuple[str, int]:
    """Set a session-level setting to a fresh token (one statement: its own transaction in autocommit).

    Returns (token, backend pid)."""
    return queries.remember_setting(cursor, SESSION_SETTING, secrets.token_hex(8))


def recall(cursor) -> tuple[str | None, int]:
    """The setting `remember` made, as this session sees it now, and the backend pid."""
    return queries.recall_setting(cursor, SESSION_SETTING)


def session_lost(remembered: tuple[str, int], recalled: tuple[str | None, int], other_pid: int) -> str | None:
    """Why these readings show a connection that does not keep its session, or None when it does."""
    (token, pid), (token_now, pid_now) = remembered, recalled
    if pid_now != pid:
        return f"the next transaction ran on another backend (pid {pid}, then {pid_now})"
    if token_now != token:
        return "a session setting made in one transaction was gone in the next (the session was reset)"
    if other_pid == pid:
        return f"a second connection was handed the first one's backend (pid {pid}) while it was open"
    return None


def probe_session(alias: str = "default") -> str | None:
    """Does a connection to `alias` keep one session from one transaction to the next?

    The reader lock is a session advisory lock (jobqueue/worker.py): behind a pooler in
    transaction mode (Supabase's on port 6543, PgBouncer pool_mode=transaction) the next
    transaction may run on another backend, or on a reset one, and the lock is silently
    someone else's. The probe opens two connections of its own (autocommit, outside any
    atomic block of the caller's connection, closed afterwards, leaving Django's connection
    as it was): it `remember`s a token on the first, asks the second for its backend, then
    `recall`s on the first. A direct connection or a session pooler keeps the token and the
    backend, and never hands the first connection's backend to the second while the first
    is open. A transaction pooler shows one of the three, except when it happens to give
    the first connection its backend back unreset with nobody else asking for it: that is
    why the port check comes first.

    Returns None when the session is kept, else what went wrong.
    """
    first, other = connections.create_connection(alias), connections.create_connection(alias)
    try:
        with first.cursor() as cursor:
            remembered = remember(cursor)
        with other.cursor() as cursor:
            other_pid = queries.backend_pid(cursor)
        with first.cursor() as cursor:
            recalled = recall(cursor)
    finally:
        first.close()
        other.close()
    return session_lost(remembered, recalled, other_pid)


def transaction_pooler_port(settings_dict: dict) -> bool:
    return str(settings_dict.get("PORT") or "").strip() == str(TRANSACTION_POOLER_PORT)


def lost_session(alias: str = "default") -> tuple[str, str] | None:
    """(check id, why) when connections to `alias` cannot hold the reader lock, else None. The port is read
    first (no connection needed), then the probe runs."""
    if transaction_pooler_port(connections[alias].settings_dict):
        return (
            "jobqueue.E002",
            f"DATABASE_URL is on port {TRANSACTION_POOLER_PORT}, Supabase's transaction pooler: "
            "the session advisory lock that keeps one reader would be silently lost",
        )
    lost = probe_session(alias)
    return lost and ("jobqueue.E003", f"the connection does not keep a session: {lost}")


def session(app_configs=None, **kwargs) -> list[CheckMessage]:
    """The connection keeps one session: the reader lock depends on it."""
    if not transaction_pooler_port(connection.settings_dict) and (skipped := skip_without_database("session")):
        return skipped
    try:
        problem = lost_session(connection.alias)
    except Exception as error:
        problem = ("jobqueue.E003", f"the session probe failed: {_one_line(error)}")
    if problem:
        return failed("session", *problem, hint=SESSION_FIX)
    return [Info("one session per connection (the reader lock holds)", obj="session", id="jobqueue.I002")]


def queue(app_configs=None, **kwargs) -> list[CheckMessage]:
    if skipped := skip_without_database("queue"):
        return skipped
    with connection.cursor() as cursor:
        if queries.functions_missing(cursor, list(PGMQ_FUNCTIONS)):
            return failed(
                "queue",
                "jobqueue.E004",
                "pgmq functions are missing",
                hint=DATABASE_SQL_FIX,
            )
        if not queries.queue_exists(cursor):
            return failed(
                "queue",
                "jobqueue.E005",
                f"the queue '{queries.QUEUE}' does not exist",
                hint=DATABASE_SQL_FIX,
            )
        length = queries.metrics(cursor).length
        missing = [
            index for index in (queries.WAITING_INDEX, queries.MESSAGE_INDEX) if not queries.index_exists(cursor, index)
        ]
    if missing:
        return [
            CheckWarning(
                f"queue {queries.QUEUE} exists, {length} messages, but the index {' and '.join(missing)} is missing: "
                "every fan-out and every read of first-class messages scans the queue",
                hint=DATABASE_SQL_FIX,
                obj="queue",
                id=NO_WAITING_INDEX,
            )
        ]
    return [Info(f"queue {queries.QUEUE} exists, {length} messages", obj="queue", id="jobqueue.I003")]


def reader_settings(app_configs=None, **kwargs) -> list[CheckMessage]:
    """The reader slots and the visibility timeout the heartbeat renews (docs/OPERATIONS.md, "Adding a machine")."""
    slots, vt = settings.WORKER_READER_SLOTS, settings.WORKER_VISIBILITY_TIMEOUT_S
    if slots < 1:
        return failed(
            "reader_settings",
            "jobqueue.E006",
            f"WORKER_READER_SLOTS is {slots}: no worker could ever read the queue",
            hint="1 (one reader), or the number of workers that may read at once, the same on every worker",
        )
    if vt < 1:
        return failed(
            "reader_settings",
            "jobqueue.E007",
            f"WORKER_VISIBILITY_TIMEOUT_S is {vt}: a message would be visible again as soon as it is read",
            hint="at least 1 second (defaults: 600 with one reader slot, 60 with more)",
        )
    every = vt / HEARTBEAT.beats_per_vt
    return [
        Info(
            f"{slots} reader slot(s); a read hides a message {vt} s, renewed every {every:g} s while its job runs",
            obj="reader_settings",
            id="jobqueue.I004",
        )
    ]
