"""The real services a chaos run starts: PostgreSQL, SeaweedFS, and the worker processes."""

import os
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.chaos.config import ChaosConfig

ROOT = Path(__file__).resolve().parents[2]
BUCKET, ACCESS_KEY, SECRET_KEY = "chaos", "chaos-access-key", "chaos-secret-key"


def wall_clock() -> str:
    """The workers' log timestamp format, to read the harness's logs next to theirs."""
    now = time.time()
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now)) + f",{int(now % 1 * 1000):03d}"


@dataclass
class Services:
    """PostgreSQL and S3 in the run's folder; `s3_down` is set while a fault has S3 stopped."""

    config: ChaosConfig
    folder: Path
    pg: object = None
    s3: object = None
    s3_down: threading.Event = field(default_factory=threading.Event)

    def start(self) -> None:
        from momentlens.devservices.postgres import EmbeddedPostgres
        from momentlens.devservices.seaweedfs import SeaweedS3

        self.pg = EmbeddedPostgres(self.folder / "pgdata").ensure_ready()
        self.s3 = SeaweedS3(self.folder / "s3", bucket=BUCKET, access_key=ACCESS_KEY, secret_key=SECRET_KEY).start()

    def stop(self) -> None:
        if self.s3 is not None:
            self.s3.stop()
        if self.pg is not None:
            self.pg.stop()

    def env(self) -> dict:
        """The environment of every process the run starts: its services, and short retry and sweep intervals."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "R2_", "SENTRY_"))}
        env.update(
            {
                "DATABASE_URL": self.pg.uri,
                "R2_ENDPOINT_URL": self.s3.endpoint_url,
                "R2_BUCKET": BUCKET,
                "R2_ACCESS_KEY_ID": ACCESS_KEY,
                "R2_SECRET_ACCESS_KEY": SECRET_KEY,
                "MOMENTLENS_VAR_DIR": str(self.folder / "var"),
                "WORKER_RETRY_BACKOFF_S": "0.3",
                "WORKER_LOCK_RETRY_S": "0.5",
                "WORKER_IDLE_POLL_S": "0.2",
                "WORKER_DB_RECOVERY_S": "120",
                "WORKER_SWEEP_RETRY_S": str(self.config.sweep_retry_s),
                "WORKER_FULL_SWEEP_S": str(self.config.full_sweep_s),
                "WORKER_HEALTH_PORT": "0",
                "ORT_INTRA_OP_THREADS": str(self.config.threads),
                "PYTHONUNBUFFERED": "1",
            }
        )
        if self.config.readers > 1:
            env["WORKER_READER_SLOTS"] = str(self.config.readers)
            env["WORKER_VISIBILITY_TIMEOUT_S"] = str(self.config.visibility_s)
        return env

    def configure_django(self) -> None:
        """This process reads the same database and bucket as the workers, through Django."""
        os.environ.update({k: v for k, v in self.env().items() if k.startswith(("DATABASE_URL", "R2_"))})
        os.environ["MOMENTLENS_VAR_DIR"] = str(self.folder / "var")
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "momentlens.settings")
        import logging

        import django

        django.setup()
        logging.disable(logging.INFO)

    def manage(self, log: Path, *command: str) -> subprocess.Popen:
        """`manage.py COMMAND` against the run's services, its output in `log`."""
        return subprocess.Popen(
            [sys.executable, "manage.py", *command],
            cwd=ROOT,
            env=self.env(),
            stdout=open(log, "ab"),
            stderr=subprocess.STDOUT,
        )

    def log(self, line: str) -> None:
        """A line in faults.log, stamped like the workers' lines."""
        with open(self.folder / "faults.log", "a") as out:
            out.write(f"{wall_clock()} {line}\n")

    @contextmanager
    def db(self, attempts: int = 60):
        """A connection outside Django, retried while a fault has PostgreSQL down."""
        import psycopg

        for attempt in range(attempts):
            try:
                conn = psycopg.connect(self.pg.uri, autocommit=True)
                break
            except psycopg.OperationalError:
                time.sleep(0.5 if attempt < attempts - 1 else 0)
        else:
            raise RuntimeError("the chaos database did not come back")
        with conn:
            yield conn
