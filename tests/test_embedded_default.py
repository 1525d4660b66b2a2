"""The embedded default: started on demand, reused, keeps its data across restarts."""

import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from momentlens.devservices.postgres import EmbeddedPostgres

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def fresh_server(tmp_path):
    server = EmbeddedPostgres(tmp_path / "pgdata")
    yield server
    if server.running:
        server.stop()


def test_start_reuse_and_restart_keeps_data(fresh_server):
    fresh_server.ensure_ready()
    first_pid = fresh_server.pid
    with psycopg.connect(fresh_server.uri, autocommit=True) as conn:
        conn.execute("INSERT INTO events (name) VALUES ('kept across restarts')")

    again = EmbeddedPostgres(fresh_server.pgdata).ensure_ready()
    assert again.pid == first_pid, "a second start must reuse the running server"

    fresh_server.stop()
    assert not fresh_server.running
    fresh_server.ensure_ready()
    assert fresh_server.pid != first_pid
    with psycopg.connect(fresh_server.uri) as conn:
        names = [row[0] for row in conn.execute("SELECT name FROM events")]
    assert names == ["kept across restarts"]


@pytest.mark.skipif(os.geteuid() != 0, reason="only root runs the server as another user")
def test_a_server_stops_after_the_folders_above_its_data_were_closed_to_others(fresh_server):
    """What a parallel test process does to pytest's temporary root when its session starts."""
    fresh_server.ensure_ready()
    above = fresh_server.pgdata.parent
    above.chmod(0o700)
    fresh_server.stop()
    assert not fresh_server.running


def test_manage_py_works_on_the_defaults_with_no_setup(tmp_path):
    """No DATABASE_URL, no R2: `manage.py shell` starts and provisions var/postgres itself."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "R2_"))}
    env["MOMENTLENS_VAR_DIR"] = str(tmp_path / "var")
    env.pop("DJANGO_SETTINGS_MODULE", None)
    code = "from faces.models import Photo; from django.db import connection; print(Photo.objects.count())"
    try:
        check = subprocess.run(
            [sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True
        )
        assert check.returncode == 0, check.stderr
        shell = subprocess.run(
            [sys.executable, "manage.py", "shell", "-c", code],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert shell.returncode == 0, shell.stderr
        assert shell.stdout.strip().splitlines()[-1] == "0"
        assert (tmp_path / "var" / "postgres" / "PG_VERSION").exists()
    finally:
        server = EmbeddedPostgres(tmp_path / "var" / "postgres")
        if server.running:
            server.stop()
