"""What the harness reads and sends on the job queue and the photo rows, outside Django."""

import json

from tests.chaos.services import Services


def send(conn, message) -> int:
    return conn.execute("SELECT pgmq.send('jobs', %s::jsonb)", [json.dumps(message)]).fetchone()[0]


def queue_length(services: Services) -> int:
    try:
        with services.db() as conn:
            return conn.execute("SELECT count(*) FROM pgmq.q_jobs").fetchone()[0]
    except Exception:
        return -1


def archived_count(services: Services) -> int:
    try:
        with services.db() as conn:
            return conn.execute("SELECT count(*) FROM pgmq.a_jobs").fetchone()[0]
    except Exception:
        return 0


def resend_from_archive(services: Services, count: int) -> int:
    """What an operator does with requeue_archived: a copy of an archived message, sent again."""
    with services.db() as conn:
        rows = conn.execute("SELECT msg_id, message FROM pgmq.a_jobs ORDER BY msg_id LIMIT %s", [count]).fetchall()
        for msg_id, message in rows:
            conn.execute(
                "SELECT pgmq.send('jobs', %s::jsonb, %s::jsonb)",
                [json.dumps(message), json.dumps({"requeued_from": msg_id})],
            )
    return len(rows)


def worker_holds_a_photo(services: Services) -> bool:
    """A worker's transaction holds a photo row (SELECT ... FOR UPDATE): it is mid-job."""
    try:
        with services.db(attempts=1) as conn:
            return bool(
                conn.execute(
                    "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
                    "WHERE l.relation = 'photos'::regclass AND l.mode = 'RowShareLock' "
                    "AND a.application_name = 'momentlens-worker'"
                ).fetchone()[0]
            )
    except Exception:
        return False


def event_in_flight(services: Services) -> str | None:
    """The event of a photo whose message a worker has read and not yet finished (or is backing off)."""
    try:
        with services.db(attempts=1) as conn:
            row = conn.execute(
                "SELECT p.event_id::text FROM pgmq.q_jobs q JOIN photos p ON p.id::text = q.message->>'photo_id' "
                "WHERE q.read_ct > 0 AND q.vt > now() ORDER BY q.vt DESC LIMIT 1"
            ).fetchone()
            return row[0] if row else None
    except Exception:
        return None


def application_names(services: Services) -> list[str]:
    """Every connection's application_name: a reader's heartbeat names its message and job there."""
    with services.db(attempts=1) as conn:
        return [row[0] for row in conn.execute("SELECT application_name FROM pg_stat_activity").fetchall() if row[0]]
