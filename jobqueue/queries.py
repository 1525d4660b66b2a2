"""Every SQL statement of the jobqueue package, named, in one place: the consumer's, its ops commands' and its
preflight checks' (tests/unit/test_sql_home.py keeps them here).

Values always travel as parameters; the queue name is a parameter too, except
where pgmq has no function for the operation and its table is named directly:
then the statement names QUEUE_TABLE or ARCHIVE_TABLE, spelt once below.
"""

import json
from dataclasses import dataclass
from datetime import datetime

QUEUE = "jobs"
# The queue's tables (pgmq names them q_<queue> and a_<queue>) and the worker's indexes on its messages
# (deploy/queue_indexes.sql), for the statements pgmq has no function for. A table cannot travel as a parameter,
# and a statement is written out, never formatted (tests/test_sql_parameters.py): so these names are spelt here
# from QUEUE, and every statement below names only QUEUE_TABLE and ARCHIVE_TABLE (tests/unit/test_sql_home.py
# fails on any other pgmq table, or on these if QUEUE changes). SEND_UNLESS_WAITING needs WAITING_INDEX;
# READ_FIRST needs MESSAGE_INDEX.
QUEUE_TABLE = "pgmq.q_jobs"
ARCHIVE_TABLE = "pgmq.a_jobs"
WAITING_INDEX = "pgmq.q_jobs_waiting_idx"
MESSAGE_INDEX = "pgmq.q_jobs_message_idx"
# pg_advisory_lock key of reader slot 0 ("MLJQ"); slot i holds READER_LOCK_KEY + i. With one slot
# (the default) this is the one reader's lock of docs/ARCHITECTURE.md §4.
READER_LOCK_KEY = 0x4D4C4A51

TRY_READER_LOCK = "SELECT pg_try_advisory_lock(%s)"
RELEASE_READER_LOCK = "SELECT pg_advisory_unlock(%s)"
# A reader holds its slot under its count of slots (WORKER_READER_SLOTS), shown to the others as a shared session
# lock on two int4 keys, "MLRS" and the count: a worker whose count differs sees it (jobqueue/session.py).
SLOT_COUNT_LOCK = 0x4D4C5253
HOLD_SLOT_COUNT = "SELECT pg_advisory_lock_shared(%s, %s)"
RELEASE_SLOT_COUNT = "SELECT pg_advisory_unlock_shared(%s, %s)"
OTHER_SLOT_COUNTS = """
    SELECT DISTINCT objid::bigint FROM pg_locks
    WHERE locktype = 'advisory' AND granted AND objsubid = 2
      AND classid = %s::bigint::oid AND objid::bigint <> %s
    ORDER BY 1
"""
# The application_name prefix of a reader's heartbeat connection (jobqueue/heartbeat.py).
HEARTBEAT_NAME = "momentlens-worker heartbeat"
# Who holds which slot, and what its heartbeat connection says it is working on.
READER_SLOTS = """
    SELECT slot, lock.pid, beat.application_name
    FROM generate_series(0, %s - 1) AS slot
    LEFT JOIN pg_locks AS lock
      ON lock.locktype = 'advisory' AND lock.granted AND lock.objsubid = 1
     AND lock.classid = ((%s::bigint + slot) >> 32)::oid
     AND lock.objid = ((%s::bigint + slot) & x'ffffffff'::bigint)::oid
    LEFT JOIN pg_stat_activity AS beat
      ON starts_with(beat.application_name, %s || ' reader=' || lock.pid || ' ')
    ORDER BY slot
"""
# The message in flight stays hidden for another vt seconds (the heartbeat).
EXTEND_VISIBILITY = "SELECT msg_id FROM pgmq.set_vt(%s, %s::bigint, %s)"

# pgmq.read: the oldest visible message; counts the read (read_ct) and hides it for vt seconds.
READ = "SELECT msg_id, read_ct, message FROM pgmq.read(%s, %s, 1)"
# pgmq.read's statement, for the oldest visible message that contains one of the jsonb objects given (a
# first-class job's name, or the "first" mark): read before any ordinary message (docs/ARCHITECTURE.md
# §4). Written out: Supabase's pgmq (1.4.4) has no conditional read, and one containment per call would
# take a round trip per class. The GIN index on messages (deploy/queue_indexes.sql) finds the few such
# messages, whatever the length of the queue.
READ_FIRST = """
    WITH next AS (
        SELECT msg_id FROM pgmq.q_jobs
        WHERE message @> ANY(%s::jsonb[]) AND vt <= clock_timestamp()
        ORDER BY msg_id
        LIMIT 1
        FOR UPDATE SKIP LOCKED
    )
    UPDATE pgmq.q_jobs AS queued
    SET vt = clock_timestamp() + make_interval(secs => %s),
        read_ct = queued.read_ct + 1,
        last_read_at = clock_timestamp()
    FROM next
    WHERE queued.msg_id = next.msg_id
    RETURNING queued.msg_id, queued.read_ct, queued.message
"""
# The statement pgmq.delete() builds with dynamic SQL, written out: the function
# re-plans its EXECUTE on every call, and this runs once per job inside the job's
# transaction (bench/queue_overhead.py measures the difference).
DELETE = "DELETE FROM pgmq.q_jobs WHERE msg_id = %s"
ARCHIVE = "SELECT pgmq.archive(%s, %s::bigint)"
# A preempted try's message (jobqueue/privacy_lane.py) given back: visible now, and its read uncounted (no failed
# try), unless a reader has read it since.
GIVE_BACK = """
    UPDATE pgmq.q_jobs SET vt = clock_timestamp() + make_interval(secs => %s), read_ct = read_ct - 1
    WHERE msg_id = %s AND read_ct = %s
"""
# Privacy work that waits on a reader (jobqueue/privacy_lane.py), asked on its heartbeat connection: a privacy
# job (one of the jsonb objects given) visible and unread for at least a grace (seconds), or a privacy job
# another reader runs (its transaction's application_name) that waits for a lock the reader's backend holds.
PRIVACY_WAITING = """
    SELECT
        EXISTS (
            SELECT 1 FROM pgmq.q_jobs
            WHERE message @> ANY(%s::jsonb[]) AND vt <= clock_timestamp()
              AND enqueued_at <= clock_timestamp() - make_interval(secs => %s)
        ),
        EXISTS (
            SELECT 1 FROM pg_stat_activity AS waiting
            WHERE waiting.application_name = %s AND %s = ANY(pg_blocking_pids(waiting.pid))
        )
"""
# What a privacy job's transaction calls itself (reset at its end), so that a reader it waits on can tell.
PRIVACY_APPLICATION_NAME = "momentlens-worker privacy"
MARK_PRIVACY_TRY = "SELECT set_config('application_name', %s, true)"
# A failed try's message, visible again, unless a reader has read it since (read_ct moved on): with several
# readers a backoff longer than vt lets another reader take it, and that reader's run must stay its own.
MAKE_VISIBLE = "UPDATE pgmq.q_jobs SET vt = clock_timestamp() WHERE msg_id = %s AND read_ct = %s"
# The archive keeps the message's headers: the reason travels there.
RECORD_ARCHIVE_REASON = """
    UPDATE pgmq.q_jobs
    SET headers = coalesce(headers, '{}'::jsonb) || jsonb_build_object('archived_reason', %s::text, 'error', %s::text)
    WHERE msg_id = %s
"""
# Messages a stopped worker read and left hidden. pgmq has no bulk function for this.
MAKE_ABANDONED_VISIBLE = """
    UPDATE pgmq.q_jobs SET vt = clock_timestamp()
    WHERE read_ct > 0 AND vt > clock_timestamp()
"""
METRICS = "SELECT queue_length, queue_visible_length, oldest_msg_age_sec FROM pgmq.metrics(%s)"
# Whether any message is visible, by the queue's vt index: what idle-only maintenance stops for.
MESSAGE_WAITING = "SELECT EXISTS (SELECT 1 FROM pgmq.q_jobs WHERE vt <= clock_timestamp())"
# The queue by class, for queue_status: privacy jobs (one of the jsonb objects (1)), the renders they sent
# first (containing (2)), the rest; each class's waiting (visible) messages, the oldest one's age in seconds,
# and how many are hidden (in flight or waiting for a retry). pgmq has no function for this: its table is named.
QUEUE_CLASSES = """
    SELECT class, count(*) FILTER (WHERE vt <= clock_timestamp()),
           extract(epoch FROM clock_timestamp() - min(enqueued_at) FILTER (WHERE vt <= clock_timestamp()))::int,
           count(*) FILTER (WHERE vt > clock_timestamp())
    FROM (
        SELECT vt, enqueued_at,
               CASE WHEN message @> ANY(%s::jsonb[]) THEN 'privacy' WHEN message @> %s::jsonb THEN 'renders'
                    ELSE 'ordinary' END AS class
        FROM pgmq.q_jobs
    ) AS queued
    GROUP BY class
"""
# How many privacy jobs run now, and how many of those wait for a lock (a photo a reader's try holds).
PRIVACY_RUNNING = """
    SELECT count(*), count(*) FILTER (WHERE cardinality(pg_blocking_pids(pid)) > 0)
    FROM pg_stat_activity WHERE application_name = %s
"""
ARCHIVE_COUNT = "SELECT count(*) FROM pgmq.a_jobs"
RECENT_ARCHIVED = """
    SELECT msg_id, archived_at, read_ct, message, headers->>'archived_reason', headers->>'error'
    FROM pgmq.a_jobs ORDER BY archived_at DESC LIMIT %s
"""
ARCHIVED_MESSAGE = "SELECT message, headers FROM pgmq.a_jobs WHERE msg_id = %s"
# The archived messages one of whose top-level fields (1) holds one of the ids (2), newest first: an event's
# archived jobs, for event_report (jobqueue.api.archived_jobs_naming). The archive has no index on its messages:
# this scans it, so only ops commands run it, never a job.
ARCHIVED_NAMING = """
    SELECT msg_id, archived_at, read_ct, message->>'job', headers->>'archived_reason', headers->>'error'
    FROM pgmq.a_jobs AS archived
    WHERE EXISTS (SELECT 1 FROM unnest(%s::text[]) AS field WHERE archived.message->>field = ANY(%s))
    ORDER BY archived_at DESC
"""
SEND = "SELECT pgmq.send(%s, %s::jsonb, %s::jsonb)"
# One message {"job": job, id_field: id} (with the "first" mark: `mark` {"first": true}, else {}) per id
# that has none WAITING (never read: read_ct = 0), in the ids' order, in one statement. A message already
# read (in flight, or hidden for a retry) does not count: its handler may have read the state before the
# change this fan-out is for. The archive is
# never read. WAITING_INDEX (deploy/queue_indexes.sql) serves each check, so it does not grow with the
# queue. pgmq has no function for "is such a message waiting": its table is named directly. Its
# send_batch refuses an empty array: the last line skips it when every id has a message waiting.
SEND_UNLESS_WAITING = """
    WITH wanted AS (
        SELECT jsonb_build_object('job', %s::text, %s::text, ids.id) || %s::jsonb AS message, ids.position
        FROM unnest(%s::text[]) WITH ORDINALITY AS ids (id, position)
    ),
    missing AS (
        SELECT ARRAY(
            SELECT wanted.message FROM wanted
            WHERE NOT EXISTS (
                SELECT 1 FROM pgmq.q_jobs AS waiting
                WHERE waiting.read_ct = 0 AND waiting.message @> wanted.message
            )
            ORDER BY wanted.position
        ) AS messages
    )
    SELECT count(*) FROM missing, LATERAL pgmq.send_batch(%s, missing.messages)
    WHERE cardinality(missing.messages) > 0
"""
# Whether an index (WAITING_INDEX, MESSAGE_INDEX) exists.
INDEX_EXISTS = "SELECT to_regclass(%s) IS NOT NULL"

# Transaction-scoped advisory locks: two int4 keys, a namespace and the hash of a scope (an id). The
# reader lock is one bigint key, a separate key space (pg_locks: objsubid 1; two keys: objsubid 2), so
# no namespace here can ever meet it. A hash collision only makes two scopes wait for each other.
XACT_LOCK = "SELECT pg_advisory_xact_lock(%s, hashtext(%s))"
# The namespace of fan-outs (jobqueue.enqueue.lock_fan_out): "MLFO".
FAN_OUT_LOCK = 0x4D4C464F
SET_APPLICATION_NAME = "SELECT set_config('application_name', %s, false)"
# Readers waiting out an outage (jobqueue/outage.py): their sessions' application_name, past a prefix (1), says
# what for and since when (queue_status).
WAITING_READERS = """
    SELECT pid, substr(application_name, length(%s) + 1) FROM pg_stat_activity
    WHERE starts_with(application_name, %s) ORDER BY pid
"""

# The preflight (jobqueue/checks.py): the server, the session probe, pgmq and the queue.
SERVER_VERSION = "SELECT current_setting('server_version')"
# The session probe (jobqueue.checks.probe_session): a setting made for the session (not the transaction), read
# back in a later transaction (missing_ok: NULL where the session never made it), each with the backend answering.
REMEMBER_SETTING = "SELECT set_config(%s, %s, false), pg_backend_pid()"
RECALL_SETTING = "SELECT current_setting(%s, true), pg_backend_pid()"
BACKEND_PID = "SELECT pg_backend_pid()"
# One row per function signature given (pgmq's, for the queue check): true where it does not resolve.
FUNCTIONS_MISSING = "SELECT to_regprocedure(name) IS NULL FROM unnest(%s::text[]) AS name"
QUEUE_EXISTS = "SELECT 1 FROM pgmq.list_queues() WHERE queue_name = %s"


@dataclass(frozen=True)
class Message:
    msg_id: int
    read_ct: int
    body: str


@dataclass(frozen=True)
class QueueMetrics:
    length: int
    visible: int
    oldest_age_s: int | None


def try_reader_lock(cursor, slot: int = 0) -> bool:
    cursor.execute(TRY_READER_LOCK, [READER_LOCK_KEY + slot])
    return cursor.fetchone()[0]


def release_reader_lock(cursor, slot: int = 0) -> bool:
    cursor.execute(RELEASE_READER_LOCK, [READER_LOCK_KEY + slot])
    return cursor.fetchone()[0]


def hold_slot_count(cursor, slots: int) -> None:
    cursor.execute(HOLD_SLOT_COUNT, [SLOT_COUNT_LOCK, slots])


def release_slot_count(cursor, slots: int) -> None:
    cursor.execute(RELEASE_SLOT_COUNT, [SLOT_COUNT_LOCK, slots])


def other_slot_counts(cursor, slots: int) -> list[int]:
    """The counts of slots that readers holding a slot now read with, other than `slots`."""
    cursor.execute(OTHER_SLOT_COUNTS, [SLOT_COUNT_LOCK, slots])
    return [count for (count,) in cursor.fetchall()]


@dataclass(frozen=True)
class ReaderSlot:
    slot: int
    pid: int | None
    working_on: str | None  # the heartbeat's application_name, past its prefix


def reader_slots(cursor, slots: int) -> list[ReaderSlot]:
    cursor.execute(READER_SLOTS, [slots, READER_LOCK_KEY, READER_LOCK_KEY, HEARTBEAT_NAME])
    return [ReaderSlot(slot, pid, _working_on(name)) for slot, pid, name in cursor.fetchall()]


def _working_on(application_name: str | None) -> str | None:
    if not application_name:
        return None
    return application_name.split(" ", 3)[3] if application_name.count(" ") >= 3 else None


def extend_visibility(cursor, msg_id: int, vt_s: int) -> bool:
    cursor.execute(EXTEND_VISIBILITY, [QUEUE, msg_id, vt_s])
    return cursor.fetchone() is not None


def read(cursor, visibility_timeout_s: int) -> Message | None:
    cursor.execute(READ, [QUEUE, visibility_timeout_s])
    row = cursor.fetchone()
    return Message(row[0], row[1], row[2]) if row else None


def read_first(cursor, visibility_timeout_s: int, first: list[dict]) -> Message | None:
    cursor.execute(READ_FIRST, [[json.dumps(item) for item in first], visibility_timeout_s])
    row = cursor.fetchone()
    return Message(row[0], row[1], row[2]) if row else None


def delete(cursor, msg_id: int) -> bool:
    cursor.execute(DELETE, [msg_id])
    return cursor.rowcount == 1


def archive(cursor, msg_id: int, reason: str, error: str) -> bool:
    cursor.execute(RECORD_ARCHIVE_REASON, [reason, error, msg_id])
    cursor.execute(ARCHIVE, [QUEUE, msg_id])
    return cursor.fetchone()[0]


def make_visible(cursor, msg_id: int, read_ct: int) -> bool:
    cursor.execute(MAKE_VISIBLE, [msg_id, read_ct])
    return cursor.rowcount == 1


def give_back(cursor, msg_id: int, read_ct: int, delay_s: float = 0.0) -> bool:
    """The message visible again after `delay_s`, its read uncounted."""
    cursor.execute(GIVE_BACK, [delay_s, msg_id, read_ct])
    return cursor.rowcount == 1


def privacy_waiting(cursor, privacy_jobs: list[dict], grace_s: float, reader_pid: int | None) -> str | None:
    """Why privacy work waits on the reader whose backend is `reader_pid` ("queued", "blocked"), or None."""
    cursor.execute(
        PRIVACY_WAITING, [[json.dumps(job) for job in privacy_jobs], grace_s, PRIVACY_APPLICATION_NAME, reader_pid]
    )
    queued, blocked = cursor.fetchone()
    return "blocked" if blocked else "queued" if queued else None


def mark_privacy_try(cursor) -> None:
    """The transaction of a privacy job calls itself so until it ends (PRIVACY_WAITING's second half)."""
    cursor.execute(MARK_PRIVACY_TRY, [PRIVACY_APPLICATION_NAME])


def make_abandoned_visible(cursor) -> int:
    cursor.execute(MAKE_ABANDONED_VISIBLE)
    return cursor.rowcount


def message_waiting(cursor) -> bool:
    cursor.execute(MESSAGE_WAITING)
    return cursor.fetchone()[0]


def metrics(cursor) -> QueueMetrics:
    cursor.execute(METRICS, [QUEUE])
    length, visible, oldest = cursor.fetchone()
    return QueueMetrics(length, visible, oldest)


@dataclass(frozen=True)
class QueueClass:
    name: str  # privacy, renders, ordinary
    waiting: int
    oldest_waiting_s: int | None
    hidden: int


def queue_classes(cursor, privacy_jobs: list[dict], render_mark: dict) -> list[QueueClass]:
    """The queue by class, every class listed (empty ones with zeros)."""
    cursor.execute(QUEUE_CLASSES, [[json.dumps(job) for job in privacy_jobs], json.dumps(render_mark)])
    found = {row[0]: QueueClass(*row) for row in cursor.fetchall()}
    return [found.get(name, QueueClass(name, 0, None, 0)) for name in ("privacy", "renders", "ordinary")]


def privacy_running(cursor) -> tuple[int, int]:
    """(privacy jobs running now, how many of them wait for a lock)."""
    cursor.execute(PRIVACY_RUNNING, [PRIVACY_APPLICATION_NAME])
    return cursor.fetchone()


def archive_count(cursor) -> int:
    cursor.execute(ARCHIVE_COUNT)
    return cursor.fetchone()[0]


@dataclass(frozen=True)
class ArchivedMessage:
    msg_id: int
    archived_at: datetime
    read_ct: int
    body: str
    reason: str | None
    error: str | None


def recent_archived(cursor, limit: int) -> list[ArchivedMessage]:
    cursor.execute(RECENT_ARCHIVED, [limit])
    return [ArchivedMessage(*row) for row in cursor.fetchall()]


def archived_message(cursor, msg_id: int) -> tuple[str, str | None] | None:
    cursor.execute(ARCHIVED_MESSAGE, [msg_id])
    return cursor.fetchone()


@dataclass(frozen=True)
class ArchivedJob:
    msg_id: int
    archived_at: datetime
    read_ct: int
    job: str | None  # the message's "job"
    reason: str | None
    error: str | None


def archived_naming(cursor, fields: list[str], ids: list[str]) -> list[ArchivedJob]:
    """The archived messages one of whose `fields` holds one of `ids`, newest first (a scan of the archive)."""
    cursor.execute(ARCHIVED_NAMING, [fields, ids])
    return [ArchivedJob(*row) for row in cursor.fetchall()]


def send(cursor, body: str, headers: str = "{}") -> int:
    cursor.execute(SEND, [QUEUE, body, headers])
    return cursor.fetchone()[0]


def send_unless_waiting(cursor, job: str, id_field: str, ids: list[str], mark: dict) -> int:
    """Send {"job": job, id_field: id, **mark} for each id with no such message waiting; how many were sent."""
    cursor.execute(SEND_UNLESS_WAITING, [job, id_field, json.dumps(mark), ids, QUEUE])
    return cursor.fetchone()[0]


def index_exists(cursor, name: str) -> bool:
    cursor.execute(INDEX_EXISTS, [name])
    return cursor.fetchone()[0]


def set_application_name(cursor, name: str) -> None:
    cursor.execute(SET_APPLICATION_NAME, [name])


def waiting_readers(cursor, prefix: str) -> list[tuple[int, str]]:
    """(backend pid, "storage since=...") of each reader session whose application_name starts with `prefix`."""
    cursor.execute(WAITING_READERS, [prefix, prefix])
    return cursor.fetchall()


def server_version(cursor) -> str:
    cursor.execute(SERVER_VERSION)
    return cursor.fetchone()[0]


def remember_setting(cursor, name: str, value: str) -> tuple[str, int]:
    """Set a session-level setting; (its value, the backend pid)."""
    cursor.execute(REMEMBER_SETTING, [name, value])
    return cursor.fetchone()


def recall_setting(cursor, name: str) -> tuple[str | None, int]:
    """A session-level setting as this session sees it now (None where never set); (it, the backend pid)."""
    cursor.execute(RECALL_SETTING, [name])
    return cursor.fetchone()


def backend_pid(cursor) -> int:
    cursor.execute(BACKEND_PID)
    return cursor.fetchone()[0]


def functions_missing(cursor, signatures: list[str]) -> bool:
    """Whether any of these function signatures ("pgmq.read(text,integer,integer,jsonb)") does not resolve."""
    cursor.execute(FUNCTIONS_MISSING, [signatures])
    return any(missing for (missing,) in cursor.fetchall())


def queue_exists(cursor) -> bool:
    cursor.execute(QUEUE_EXISTS, [QUEUE])
    return cursor.fetchone() is not None
