"""Small helpers the consumer tests share: enqueue, inspect, spawn workers."""

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from django.db import connection

from faces.models import Event
from jobqueue.context import JobContext

ROOT = Path(__file__).resolve().parents[2]


def send(payload: dict | list | str) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pgmq.send('jobs', %s::jsonb)", [json.dumps(payload)])
        return cursor.fetchone()[0]


def job(name: str, photo_id: str | None = None, **extra) -> dict:
    return {"job": name, "photo_id": photo_id or str(uuid.uuid4()), **extra}


def queue_rows() -> list[tuple[int, int]]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT msg_id, read_ct FROM pgmq.q_jobs ORDER BY msg_id")
        return cursor.fetchall()


def archived() -> dict[int, tuple[int, str]]:
    """msg_id -> (read_ct, archived_reason)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT msg_id, read_ct, headers->>'archived_reason' FROM pgmq.a_jobs")
        return {msg_id: (read_ct, reason) for msg_id, read_ct, reason in cursor.fetchall()}


def reader_lock_held() -> bool:
    from jobqueue.queries import READER_LOCK_KEY

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = %s::bigint::oid",
            [READER_LOCK_KEY],
        )
        return cursor.fetchone()[0] > 0


def sessions() -> list[tuple[int, str]]:
    """(pid, application_name) of every session on the server."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pid, coalesce(application_name, '') FROM pg_stat_activity")
        return cursor.fetchall()


def in_handler(msg_id: int) -> bool:
    """Whether message `msg_id`'s job is in its handler: a reader's heartbeat names it (jobqueue/heartbeat.py, the
    name cut at 63 characters), half a second in. No log line says so before the job ends, and the read alone comes
    before the loop's own work."""
    from jobqueue.queries import HEARTBEAT_NAME

    return any(name.startswith(HEARTBEAT_NAME) and f" msg={msg_id} " in name for _, name in sessions())


def terminate_reader_sessions() -> list[tuple[bool]]:
    """End every worker's loop session (pg_terminate_backend), as a killed connection would; one row per session."""
    from jobqueue.session import APPLICATION_NAME

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s", [APPLICATION_NAME]
        )
        return cursor.fetchall()


def worker_env(embedded_pg, tmp_path, **overrides) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("R2_", "SENTRY_"))}
    env.update(
        {
            "DATABASE_URL": embedded_pg.uri,
            "MOMENTLENS_VAR_DIR": str(tmp_path / "var"),
            "WORKER_RETRY_BACKOFF_S": "0.05",
            "WORKER_LOCK_RETRY_S": "0.2",
            "WORKER_IDLE_POLL_S": "0.1",
            "WORKER_DB_RECOVERY_S": "30",
            "WORKER_HEALTH_PORT": "0",
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update({key: str(value) for key, value in overrides.items()})
    return env


def spawn_worker(env: dict, *args: str, log_path: Path) -> subprocess.Popen:
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "support" / "worker_process.py"), *args],
        cwd=ROOT,
        env=env,
        stdout=open(log_path, "ab"),
        stderr=subprocess.STDOUT,
    )
    process.log_path = log_path
    return process


# How long a worker process may take to start (Django, the checks, the face engine): about 5 s on an idle 2-core
# machine, several times that beside the rest of the suite. A test waits this long for a start-up, and sends the
# jobs it measures only once its readers read, so what it measures has its own, short limit.
STARTUP_S = 120.0


def lock_taken(log: Path) -> bool:
    """Whether the worker writing `log` has taken a reader slot (`outcome=taken_by_other` is its wait)."""
    return "event=queue_lock outcome=taken " in log.read_text()


def lock_waited(log: Path) -> bool:
    """Whether the worker writing `log` has found every reader slot held, and waits."""
    return "event=queue_lock outcome=taken_by_other" in log.read_text()


def stop_workers(*processes: subprocess.Popen, timeout: float = 60) -> list[int]:
    """SIGTERM to each worker still running, then each one's exit code once it exited. A worker stops after the
    try in flight ends (committed or rolled back): once this returns, every run any of them had begun is over and
    its log says all it did. One that has not stopped by `timeout` fails the test with its log's end, which holds
    where each of its threads waits (run_worker dumps them on SIGUSR1)."""
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    return [exit_code(process, timeout) for process in processes]


def exit_code(process: subprocess.Popen, timeout: float) -> int:
    try:
        return process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGUSR1)
        time.sleep(2)  # the dump is written by the worker's own signal handler, at once
        process.kill()
        process.wait()
        tail = "".join(process.log_path.read_text(errors="replace").splitlines(keepends=True)[-120:])
        stuck = f"worker {process.pid} did not stop within {timeout} s of SIGTERM"
        raise AssertionError(f"{stuck}; its log ends:\n{tail}") from None


def waiting_for_lock(namespace: int) -> bool:
    """Is some transaction waiting for a transaction-scoped advisory lock of `namespace` (two-key form)?"""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
            "AND classid = %s::bigint::oid AND objsubid = 2",
            [namespace],
        )
        return cursor.fetchone()[0] > 0


def waiting_on_me() -> bool:
    """Is some other session waiting for a lock this connection's transaction holds (a row it locked, say)?"""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_locks WHERE NOT granted AND pg_backend_pid() = ANY(pg_blocking_pids(pid))"
        )
        return cursor.fetchone()[0] > 0


def done_by(pid: int) -> int:
    """How many jobs the worker process `pid` finished (the rows test_record and test_fail_then_slow write)."""
    return Event.objects.filter(name__startswith="done ", name__endswith=f"pid={pid}").count()


def by_hand(job_name: str) -> JobContext:
    """The context a worker would hand `job_name`'s handler (the faces app's engine among its resources),
    for a handler run by hand: no message, no lease."""
    from faces.engines import FACE_ENGINE, resident_engine

    return JobContext.outside_worker(job_name, **{FACE_ENGINE: resident_engine()})
