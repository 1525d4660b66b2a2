"""worker_check passes on the embedded defaults and names the fix for each broken part."""

import subprocess
import sys
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection

from tests.queue_helpers import ROOT, worker_env


def run_check() -> tuple[int, str]:
    out = StringIO()
    try:
        call_command("worker_check", stdout=out)
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
    assert "insightface-buffalo_s: match=0.4 cluster=0.45 blur=0.3 (faces under 32 px: 0.15)" in line(
        output, "thresholds"
    )
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
    assert "pgmq.create('jobs')" in line(output, "queue")


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
def test_a_missing_model_folder_fails_naming_it(settings, media_storage, tmp_path):
    settings.FACE_MODEL_PACK = "buffalo_l"
    settings.FACE_MODEL_ROOT = tmp_path / "models"
    code, output = run_check()
    assert code == 1
    models = line(output, "face_models")
    assert "status=FAIL" in models
    assert str(tmp_path / "models" / "buffalo_l") in models
    assert "NOT MEASURED: failing closed, EVERY face is blurred" in line(output, "thresholds")
