"""Values travel as SQL parameters, never inside SQL text; credentials never reach a log line.

1. A representative workload runs through the real loop in this process while every
   statement Django executes is recorded with its parameters: no id, key or message
   body of the workload appears in any SQL text.
2. The named SQL constants are plain literals with `%s` placeholders only.
3. No `execute(...)` in the worker's packages builds its SQL with an f-string, `%` or `.format`.
4. A failing workload's log records, through the configured redaction filter, hold no secret.
"""

import ast
import json
import logging
import re
import uuid
from pathlib import Path

import pytest
from django.db import connection

from faces.jobs import photo_jobs
from faces.models import Photo, PhotoVariant, SubjectReference
from jobqueue.logfmt import LogfmtFormatter, RedactSecrets
from momentlens.devservices import samples
from tests.support import factories
from tests.support.queue_helpers import archived, queue_rows, send

ROOT = Path(__file__).resolve().parents[1]
REGION = {"x": 0.02, "y": 0.75, "w": 0.2, "h": 0.2}


class Recorder:
    """A Django execute wrapper keeping every (sql, params) the connection runs."""

    def __init__(self):
        self.calls: list[tuple[str, object]] = []

    def __call__(self, execute, sql, params, many, context):
        self.calls.append((sql, params))
        return execute(sql, params, many, context)


def id_forms(value) -> set[str]:
    """Every spelling of an id a careless query could inline: with and without hyphens."""
    value = uuid.UUID(str(value))
    return {str(value), value.hex}


def failing_read(bad_keys: set[str], message: str):
    real = photo_jobs.read_object

    def read_object(key):
        if key in bad_keys:
            raise OSError(message)
        return real(key)

    return read_object


@pytest.mark.usefixtures("live_db", "media_storage", "test_thresholds")
def test_every_statement_of_a_representative_workload_carries_its_values_as_parameters(group, monkeypatch, fast_worker):
    from faces.engines import resident_engine

    face = sorted(resident_engine().analyze(group), key=lambda f: f.box[0])[0]
    with_dnp, without_dnp = factories.event("with a DNP member"), factories.event("without")
    dnp_user = factories.member(with_dnp, dnp=True)
    plain_user = factories.member(with_dnp)
    reference = factories.reference(dnp_user, samples.derived_portrait(group, face.box))
    face_photo = factories.photo(with_dnp, group, blur_regions=[REGION])
    dims_dnp = factories.photo(with_dnp, group)
    dims_region = factories.photo(without_dnp, group, blur_regions=[REGION])
    dims_plain = factories.photo(without_dnp, group)
    failing = factories.photo(without_dnp, group)
    bad_upload = factories.photo(without_dnp, data=b"this is not an image, whatever its name says")
    missing_id = uuid.uuid4()
    missing = Photo.objects.create(
        id=missing_id,
        event=without_dnp,
        uploader_id=uuid.uuid4(),
        upload_key=f"events/{without_dnp.id}/uploads/{missing_id}.jpg",
        upload_thumb_key=f"events/{without_dnp.id}/uploads/{missing_id}_thumb.jpg",
    )
    gone_id, unknown_target = uuid.uuid4(), uuid.uuid4()
    monkeypatch.setattr(photo_jobs, "read_object", failing_read({failing.upload_key}, "storage is down"))

    bodies = [
        {"job": "reference_process", "reference_id": str(reference.id)},
        {"job": "face_process", "photo_id": str(face_photo.id)},
        {"job": "thumbnail_dims", "photo_id": str(dims_dnp.id)},
        {"job": "thumbnail_dims", "photo_id": str(dims_region.id)},
        {"job": "thumbnail_dims", "photo_id": str(dims_plain.id)},
        {"job": "reprocess", "photo_id": str(face_photo.id)},
        {"job": "reprocess_event", "event_id": str(with_dnp.id)},
        {"job": "face_process", "photo_id": str(failing.id)},
        {"job": "face_process", "photo_id": str(bad_upload.id)},
        {"job": "face_process", "photo_id": str(missing.id)},
        {"job": "face_process", "photo_id": str(gone_id)},
        {"job": "no_such_job", "photo_id": str(unknown_target)},
        {"job": "face_process", "photo_id": "not-a-uuid-but-a-marker-7f3a"},
    ]
    msg_ids = {json.dumps(body): send(body) for body in bodies}

    recorder = Recorder()
    with connection.execute_wrapper(recorder):
        fast_worker(drain=True).run()

    # The workload really took every path.
    assert queue_rows() == []
    reasons = {reason for _, reason in archived().values()}
    assert reasons == {"failed", "undecodable_image", "missing_object", "unknown_job", "bad_message"}
    assert archived()[msg_ids[json.dumps(bodies[7])]] == (3, "failed")
    reference.refresh_from_db()
    assert reference.status == SubjectReference.Status.READY
    assert PhotoVariant.objects.filter(photo=face_photo, user_id=dnp_user).exists()
    face_photo.refresh_from_db()
    # reference_process and both reprocess_events are read first (docs/ARCHITECTURE.md §4), before any photo is
    # rendered; face_process then matches the ready reference, and reprocess finds its files unchanged.
    assert face_photo.variant_version == 1
    assert Photo.objects.get(id=dims_plain.id).public_key == dims_plain.upload_key

    ids = [
        with_dnp.id,
        without_dnp.id,
        dnp_user,
        plain_user,
        reference.id,
        face_photo.id,
        dims_dnp.id,
        dims_region.id,
        dims_plain.id,
        failing.id,
        bad_upload.id,
        missing.id,
        gone_id,
        unknown_target,
    ]
    keys = [
        reference.upload_key,
        *(p.upload_key for p in (face_photo, dims_dnp, dims_region, dims_plain, failing, bad_upload, missing)),
        *(p.upload_thumb_key for p in (face_photo, dims_plain)),
        face_photo.public_key,
    ]
    literals = {form.lower() for value in ids for form in id_forms(value)}
    literals |= {key.lower() for key in keys}
    literals |= {body.lower() for body in msg_ids}
    literals |= {"not-a-uuid-but-a-marker-7f3a", "no_such_job", "storage is down"}

    assert len(recorder.calls) > 100
    texts = [sql for sql, _ in recorder.calls]
    for needle in ("pgmq.read", "FOR UPDATE", "<=>", "unknown_clusters", "pgmq.archive", "pgmq.send"):
        assert any(needle in sql for sql in texts), f"the workload never ran a statement with {needle}"
    inlined = [(sql, literal) for sql in texts for literal in literals if literal in sql.lower()]
    assert inlined == [], "values inlined into SQL text"

    # Not vacuous: the values did reach the database, as parameters.
    params_text = " ".join(repr(params) for _, params in recorder.calls).lower()
    for value in (face_photo.id, with_dnp.id, dnp_user, reference.id, failing.id):
        assert any(form in params_text for form in id_forms(value)), value
    assert face_photo.upload_key.lower() in params_text or str(face_photo.id) in params_text


# -- static checks ------------------------------------------------------------------

SQL_CONSTANT_FILES = ["jobqueue/queries.py", "faces/queries.py"]
SQL_WORDS = re.compile(r"\b(SELECT|UPDATE|DELETE|INSERT|TRUNCATE)\b")
QUOTED = re.compile(r"'(?:[^']|'')*'")


def module_string_constants(path: Path) -> dict[str, ast.expr]:
    tree = ast.parse(path.read_text(), str(path))
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            found[node.targets[0].id] = node.value
    return found


@pytest.mark.parametrize("relative", SQL_CONSTANT_FILES)
def test_sql_constants_are_plain_literals_with_percent_s_placeholders_only(relative):
    constants = module_string_constants(ROOT / relative)
    checked = 0
    for name, value in constants.items():
        if not name.isupper():
            continue
        if isinstance(value, ast.JoinedStr | ast.BinOp) or (
            isinstance(value, ast.Call) and getattr(value.func, "attr", None) == "format"
        ):
            pytest.fail(f"{relative}:{name} is built by formatting, not written out")
        if not (isinstance(value, ast.Constant) and isinstance(value.value, str)):
            continue
        sql = value.value
        if not SQL_WORDS.search(sql):
            continue
        checked += 1
        # Outside quoted SQL literals ('{}'::jsonb, x'ffffffff'): no {}-formatting, no %(name)s.
        bare = QUOTED.sub("''", sql)
        assert "{" not in bare, f"{relative}:{name}"
        assert "}" not in bare, f"{relative}:{name}"
        assert "%(" not in sql, f"{relative}:{name}"
        assert set(re.findall(r"%.", sql)) <= {"%s"}, f"{relative}:{name} has a % other than %s"
    assert checked >= (10 if relative.startswith("jobqueue") else 1)


# (path relative to the repo, enclosing function): execute() calls that build SQL text on purpose.
ALLOWED_FORMATTED_EXECUTE = {
    # The demo empties its own tables: the names are identifiers (Django's model registry,
    # quoted with connection.ops.quote_name, plus the fixed pgmq table names). Identifiers
    # cannot be bound as parameters, and no message or user value reaches this statement.
    ("demo/management/commands/demo.py", "clean"),
}
EXECUTE_NAMES = {"execute", "executemany", "raw", "extra"}


def formatted(node: ast.expr) -> bool:
    """SQL text built at run time: an f-string, `%` formatting, `.format()`, or concatenation with a non-literal."""
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod | ast.Add):
        return not (isinstance(node.left, ast.Constant) and isinstance(node.right, ast.Constant))
    return isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "format"


def formatted_execute_calls(path: Path) -> list[tuple[str, int, str]]:
    tree = ast.parse(path.read_text(), str(path))
    constants = {
        node.targets[0].id: node.value
        for node in tree.body
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
    }
    found = []

    def visit(node, function: str):
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else function
            if isinstance(child, ast.Call) and getattr(child.func, "attr", None) in EXECUTE_NAMES and child.args:
                sql = child.args[0]
                if isinstance(sql, ast.Name) and sql.id in constants:
                    sql = constants[sql.id]
                if formatted(sql):
                    found.append((function, child.lineno, ast.unparse(child)[:120]))
            if isinstance(child, ast.Call) and getattr(child.func, "id", None) == "RawSQL" and child.args:
                if formatted(child.args[0]):
                    found.append((function, child.lineno, ast.unparse(child)[:120]))
            visit(child, inner)

    visit(tree, "<module>")
    return found


def test_no_execute_in_the_worker_packages_builds_its_sql_by_formatting():
    files = sorted(
        path for package in ("faces", "jobqueue", "momentlens", "demo") for path in (ROOT / package).rglob("*.py")
    )
    assert len(files) > 20
    offenders = []
    for path in files:
        relative = path.relative_to(ROOT).as_posix()
        for function, line, text in formatted_execute_calls(path):
            if (relative, function) not in ALLOWED_FORMATTED_EXECUTE:
                offenders.append(f"{relative}:{line} in {function}: {text}")
    assert offenders == []


def test_the_static_check_recognises_formatting():
    source = 'c.execute(f"SELECT {x}")\nc.execute("SELECT %s" % x)\nc.execute("{}".format(x))\nc.execute("SELECT %s")\n'
    calls = [node for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Call) and node.func.attr == "execute"]
    assert [formatted(call.args[0]) for call in calls] == [True, True, True, False]


# -- credentials in log lines -----------------------------------------------------

PLAIN = ("db-Pass-8421-secret", "db-Pass-8421-secret", "r2SecretKey0123456789abcdef")
# A password that DATABASE_URL must percent-encode: the URL carries "p%40ss%3Aword-77", psycopg reads "p@ss:word-77".
ENCODED = ("p%40ss%3Aword-77", "p@ss:word-77", "r2SecretKey0123456789abcdef")
# A secret with characters the key=value log format escapes: " is written \", a backslash is doubled.
ESCAPED = ("db-Pass-8421-secret", "db-Pass-8421-secret", 'r2Se"cret\\Key0123')


def spellings(secret: str) -> set[str]:
    """The secret as written, and as jobqueue.logfmt.quoted writes it inside a quoted value."""
    return {secret, secret.replace("\\", "\\\\").replace('"', '\\"')}


def formatted_records(records) -> list[str]:
    """The records as the configured stderr handler writes them: filter, then the logfmt formatter."""
    formatter = LogfmtFormatter()
    redact = RedactSecrets()
    lines = []
    for record in records:
        assert redact.filter(record)
        lines.append(formatter.format(record))
    return lines


@pytest.mark.usefixtures("live_db", "media_storage")
@pytest.mark.parametrize(
    ("url_password", "password", "r2_secret"),
    [
        pytest.param(*PLAIN, id="plain"),
        pytest.param(
            *ENCODED,
            id="percent-encoded-password",
        ),
        pytest.param(
            *ESCAPED,
            id="secret-with-a-quote",
        ),
    ],
)
def test_secrets_never_reach_a_log_line_of_a_failing_workload(
    settings, caplog, monkeypatch, group, url_password, password, r2_secret, fast_worker
):
    db_url = f"postgresql://worker:{url_password}@db.internal.test:5432/momentlens"
    settings.DATABASE_URL_RAW = db_url
    settings.R2_SECRET_ACCESS_KEY = r2_secret
    secrets = {url_password, password, r2_secret}
    forms = {form for secret in secrets for form in spellings(secret)}
    event = factories.event()
    photos = [factories.photo(event, group) for _ in range(2)]
    # A storage error whose text carries both secrets, as a misbehaving client library might.
    message = f"cannot read from {db_url} using secret {r2_secret}"
    monkeypatch.setattr(photo_jobs, "read_object", failing_read({p.upload_key for p in photos}, message))
    for photo in photos:
        send({"job": "face_process", "photo_id": str(photo.id)})
    send({"job": "thumbnail_dims", "photo_id": str(photos[0].id), "note": f"bad {r2_secret}"})
    send({"job": r2_secret, "photo_id": password})

    # caplog's records are the objects the configured handler filters in place: take its filter off here,
    # keep the records raw, and apply the same filter below, as that handler does before writing.
    configured = [h for h in logging.getLogger().handlers if any(isinstance(f, RedactSecrets) for f in h.filters)]
    assert configured, "the configured log handler carries RedactSecrets"
    for handler in configured:
        monkeypatch.setattr(handler, "filters", [f for f in handler.filters if not isinstance(f, RedactSecrets)])
    with caplog.at_level(logging.DEBUG):
        fast_worker(drain=True).run()

    assert {reason for _, reason in archived().values()} == {"failed", "unknown_job"}
    raw = " ".join(LogfmtFormatter().format(record) for record in caplog.records)
    assert url_password in raw, "not vacuous: the failure's text carries the password"
    assert any(form in raw for form in spellings(r2_secret)), "not vacuous: the failure's text carries the R2 secret"
    lines = formatted_records(caplog.records)
    assert any("event=job_retry" in line for line in lines)
    assert any("event=job_archived" in line for line in lines)
    leaked = [line for line in lines if any(form in line for form in forms)]
    assert leaked == []


@pytest.mark.usefixtures("live_db", "media_storage")
def test_the_archive_and_queue_status_never_show_a_secret(settings, monkeypatch, group, fast_worker):
    from io import StringIO

    from django.core.management import call_command

    password, r2_secret = PLAIN[1], PLAIN[2]
    settings.DATABASE_URL_RAW = f"postgresql://worker:{password}@db.internal.test:5432/momentlens"
    settings.R2_SECRET_ACCESS_KEY = r2_secret
    photo = factories.photo(factories.event(), group)
    message = f"cannot read from {settings.DATABASE_URL_RAW} using secret {r2_secret}"
    monkeypatch.setattr(photo_jobs, "read_object", failing_read({photo.upload_key}, message))
    send({"job": "face_process", "photo_id": str(photo.id)})
    fast_worker(drain=True).run()
    assert {reason for _, reason in archived().values()} == {"failed"}

    out = StringIO()
    call_command("queue_status", stdout=out)
    with connection.cursor() as cursor:
        cursor.execute("SELECT headers::text FROM pgmq.a_jobs")
        stored = " ".join(row[0] for row in cursor.fetchall())
    for secret in (password, r2_secret):
        assert secret not in out.getvalue()
        assert secret not in stored
