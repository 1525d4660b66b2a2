"""worker_check passes on the embedded defaults and names the fix for each broken part.

worker_check prints the system checks tagged `worker` (jobqueue/checks.py, faces/checks.py);
`manage.py check --deploy --tag worker` runs the same checks.
"""

import subprocess
import sys
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.db import connection

from tests.support.queue_helpers import ROOT, worker_env


def run_check(*args: str) -> tuple[int, str]:
    out = StringIO()
    try:
        call_command("worker_check", *args, stdout=out)
    except SystemExit as exit:
        return exit.code, out.getvalue()
    return 0, out.getvalue()


def line(output: str, check: str) -> str:
    return next(row for row in output.splitlines() if row.startswith(f"check={check} "))


@pytest.mark.django_db
def test_passes_on_the_embedded_defaults(media_storage):
    code, output = run_check()
    assert code == 0, output
    assert output.splitlines()[-1] == "worker_check passed"
    for check in ("database", "pgvector", "queue", "tables", "storage", "face_models", "thresholds"):
        assert "status=ok" in line(output, check)
    thresholds = "match=0.4 cluster=0.35 blur=0.18 (seen poorly: 0.09; unsure under norm 14, bars calibrated per "
    thresholds += "reference)"
    assert f"insightface-buffalo_s: {thresholds}" in line(output, "thresholds")
    assert "scrfd_500m_bnkps.onnx, w600k_mbf.onnx (sha256 checked)" in line(output, "face_models")
    assert not list(media_storage.listdir("_worker_check")[1]), "the probe object is deleted"


def test_an_unreachable_database_fails_with_its_fix(embedded_pg, tmp_path):
    env = worker_env(embedded_pg, tmp_path, DATABASE_URL="postgresql://postgres@/postgres?host=/nonexistent-dir")
    result = subprocess.run(
        [sys.executable, "manage.py", "worker_check"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 1
    database = line(result.stdout, "database")
    assert "status=FAIL" in database
    assert "fix=" in database
    assert "DATABASE_URL" in database
    assert "status=SKIP" in line(result.stdout, "queue")


@pytest.mark.django_db
def test_a_missing_queue_fails_with_its_fix(media_storage):
    with connection.cursor() as cursor:
        cursor.execute("SELECT pgmq.drop_queue('jobs')")  # rolled back with the test
    code, output = run_check()
    assert code == 1
    assert "status=FAIL" in line(output, "queue")
    assert 'as the tables\' owner: psql "$ADMIN_DATABASE_URL" -X -v ON_ERROR_STOP=1 -f deploy/database.sql' in line(
        output, "queue"
    )


@pytest.mark.django_db
def test_a_missing_waiting_index_warns_with_its_fix(media_storage):
    """The worker runs without it, but every fan-out would scan the queue: WARN, naming the file to apply."""
    with connection.cursor() as cursor:
        cursor.execute("DROP INDEX pgmq.q_jobs_waiting_idx")  # rolled back with the test
    code, output = run_check()
    assert code == 0, output
    queue = line(output, "queue")
    assert "status=WARN" in queue
    assert "q_jobs_waiting_idx is missing" in queue
    assert "-f deploy/database.sql" in queue
    assert "ADMIN_DATABASE_URL" in queue, "as the owner, not the worker"


@pytest.mark.django_db
def test_a_missing_column_fails_naming_it(media_storage):
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE photos DROP COLUMN processed_at")  # rolled back with the test
    code, output = run_check()
    assert code == 1
    assert "photos.processed_at" in line(output, "tables")
    assert "status=FAIL" in line(output, "tables")


@pytest.mark.django_db
def test_unwritable_storage_fails_with_its_fix(settings, seaweed):
    options = {**seaweed.storage_options(), "secret_key": "not-the-secret"}
    settings.STORAGES = {
        **settings.STORAGES,
        "default": {"BACKEND": "storages.backends.s3.S3Storage", "OPTIONS": options},
    }
    code, output = run_check()
    assert code == 1
    storage = line(output, "storage")
    assert "status=FAIL" in storage
    assert "R2_" in storage


@pytest.mark.django_db
def test_storage_that_is_down_fails_the_check_and_only_warns_before_a_start(settings, seaweed):
    """The unit's ExecStartPre is `worker_check --start`: a worker kept from starting by a storage outage would not
    apply Do Not Publish changes (they need the database alone) until it ended; the running worker waits it out."""
    settings.STORAGES = {
        **settings.STORAGES,
        "default": {"BACKEND": "storages.backends.s3.S3Storage", "OPTIONS": seaweed.storage_options()},
    }
    seaweed.stop()
    try:
        assert run_check()[0] == 1
        code, output = run_check("--start")
    finally:
        seaweed.start()
    assert code == 0, output
    assert "status=WARN" in line(output, "storage")
    assert output.rstrip().endswith("worker_check passed")


@pytest.fixture
def no_resident_engine(monkeypatch):
    """As in a fresh process: the face_models check builds the engine (an earlier test may have built one)."""
    from django.apps import apps

    from faces.engines import ResidentEngine

    monkeypatch.setattr(apps.get_app_config("faces"), "engine", ResidentEngine())


@pytest.mark.django_db
@pytest.mark.usefixtures("no_resident_engine")
def test_a_missing_model_folder_fails_naming_it(settings, media_storage, tmp_path):
    settings.FACE_MODEL_PACK = "buffalo_l"
    settings.FACE_MODEL_ROOT = tmp_path / "models"
    code, output = run_check()
    assert code == 1
    models = line(output, "face_models")
    assert "status=FAIL" in models
    assert str(tmp_path / "models" / "buffalo_l") in models
    assert "NOT MEASURED: failing closed, EVERY face is blurred" in line(output, "thresholds")


@pytest.mark.django_db
def test_a_multi_line_problem_is_still_one_line(media_storage, monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError("the disk\nis full")

    from django.core.files.storage import FileSystemStorage

    monkeypatch.setattr(FileSystemStorage, "save", refuse)
    code, output = run_check()
    assert code == 1
    assert 'detail="cannot write, read and delete' in line(output, "storage")
    assert "OSError: the disk is full" in line(output, "storage")
    assert all(row.startswith(("check=", "worker_check ")) for row in output.splitlines()), output
    assert output.splitlines()[-1] == "worker_check failed: storage"


def test_the_tags_select_the_preflight_and_the_start_checks():
    from django.core.checks.registry import registry

    from jobqueue.checks import WORKER, WORKER_START

    deploy_only = registry.get_checks(include_deployment_checks=True)
    tagged = {tag: {check.__name__ for check in deploy_only if tag in check.tags} for tag in (WORKER, WORKER_START)}
    assert tagged[WORKER] == {
        "database",
        "session",
        "queue",
        "pgvector",
        "tables",
        "storage",
        "face_models",
        "thresholds",
        "reader_settings",
    }
    # run_worker's own: face_models builds the engine the loop keeps, a worker with no slot to take or
    # without the columns it writes must not start.
    assert tagged[WORKER_START] == {"tables", "face_models", "thresholds", "reader_settings"}
    # Never run before every management command: only with --deploy (or by worker_check and run_worker).
    assert not [check for check in registry.get_checks() if WORKER in check.tags]


@pytest.mark.django_db
def test_manage_py_check_deploy_runs_the_same_checks(media_storage):
    err = StringIO()
    call_command("check", deploy=True, tags=["worker"], stdout=StringIO(), stderr=err)
    for info in ("jobqueue.I001", "jobqueue.I002", "jobqueue.I003", "faces.I001", "faces.I002", "faces.I003"):
        assert f"({info})" in err.getvalue()
    assert "database: (jobqueue.I001) PostgreSQL" in err.getvalue()


@pytest.mark.django_db
def test_manage_py_check_deploy_fails_on_a_missing_queue(media_storage):
    with connection.cursor() as cursor:
        cursor.execute("SELECT pgmq.drop_queue('jobs')")  # rolled back with the test
    with pytest.raises(SystemCheckError) as failed:
        call_command("check", deploy=True, tags=["worker"], stdout=StringIO(), stderr=StringIO())
    assert "queue: (jobqueue.E005) the queue 'jobs' does not exist" in str(failed.value)
    assert "HINT: as the tables' owner" in str(failed.value)
    assert "deploy/database.sql" in str(failed.value)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("slots", "vt", "fails"),
    [(0, 600, "WORKER_READER_SLOTS is 0"), (2, 0, "WORKER_VISIBILITY_TIMEOUT_S is 0"), (2, 60, None)],
)
def test_reader_settings_that_could_never_read_fail_with_their_fix(media_storage, settings, slots, vt, fails):
    settings.WORKER_READER_SLOTS, settings.WORKER_VISIBILITY_TIMEOUT_S = slots, vt
    code, output = run_check()
    row = line(output, "reader_settings")
    if fails:
        assert code == 1
        assert "status=FAIL" in row
        assert fails in row
        assert 'fix="' in row
    else:
        assert code == 0, output
        assert 'detail="2 reader slot(s); a read hides a message 60 s, renewed every 20 s while its job runs"' in row
