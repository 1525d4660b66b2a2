"""A real PgBouncer (Debian's `pgbouncer` package) in front of the embedded PostgreSQL, on loopback: production's
topology (Supabase's session pooler is a PgBouncer-like pooler in front of the database).

`.ci/run` installs the package; where it is missing the tests that need it skip with the command that installs it,
except under CI, where they fail: CI never skips them.
"""

import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from tests.support.ports import free_port, listening
from tests.support.waiting import poll

INSTALL = "apt-get update && apt-get install -y pgbouncer"


def binary() -> str:
    """The pgbouncer binary; skips (fails under CI) when it is not installed."""
    found = shutil.which("pgbouncer") or next(
        (path for path in ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer") if os.access(path, os.X_OK)), None
    )
    if found:
        return found
    message = f"PgBouncer is not installed: {INSTALL} (as root), then run the tests again"
    if os.environ.get("CI"):
        pytest.fail(message + " (CI must install it: .ci/run)")
    pytest.skip(message)


class PgBouncer:
    """One pgbouncer process, in `mode` ("session" or "transaction"), in front of an EmbeddedPostgres."""

    def __init__(self, folder: Path, server, mode: str):
        self.folder, self.mode, self.run_as = folder, mode, server.system_user
        self.port = free_port()
        self.process: subprocess.Popen | None = None
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "users.txt").write_text('"postgres" ""\n')
        (folder / "pgbouncer.ini").write_text(
            "[databases]\n"
            f"postgres = host={server.socket_dir} port={server.port} dbname=postgres user=postgres\n"
            "[pgbouncer]\n"
            f"listen_addr = 127.0.0.1\nlisten_port = {self.port}\nunix_socket_dir =\n"
            f"auth_type = trust\nauth_file = {folder / 'users.txt'}\n"
            f"pool_mode = {mode}\nserver_reset_query = DISCARD ALL\n"
            f"logfile = {folder / 'pgbouncer.log'}\n"
            "ignore_startup_parameters = extra_float_digits\n"
        )
        if self.run_as:  # PgBouncer refuses to run as root: it runs as the embedded server's own user
            for path in (folder, *folder.iterdir()):
                shutil.chown(path, self.run_as)

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def start(self) -> "PgBouncer":
        command = [binary(), *(["-u", self.run_as] if self.run_as else []), str(self.folder / "pgbouncer.ini")]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        poll(lambda: listening(self.port) or self.process.poll() is not None, timeout=10)
        if not listening(self.port):
            raise RuntimeError(f"pgbouncer did not start: {self.log()[-2000:]}")
        return self

    def stop(self) -> None:
        """SIGTERM: an immediate shutdown, every client and server connection closed at once (as a pooler that
        restarts or fails over does)."""
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(10)

    def restart(self) -> None:
        self.stop()
        self.start()

    def log(self) -> str:
        path = self.folder / "pgbouncer.log"
        return path.read_text() if path.exists() else ""
