"""run_worker loads the face engine once, before the loop (the faces app's startup work, once the face_models
check, tagged worker_start, passed), and refuses to start without its models or with a model file that is not
the pack's."""

import subprocess
import sys
import uuid

import pytest

from tests.conftest import ENGINE
from tests.support import factories
from tests.support.queue_helpers import ROOT, archived, job, queue_rows, send, spawn_worker, worker_env

pytestmark = pytest.mark.usefixtures("live_db")


def test_the_engine_loads_once_per_worker_process(embedded_pg, tmp_path, settings):
    media = tmp_path / "var" / "media"
    settings.STORAGES = {
        **settings.STORAGES,
        "default": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": media, "allow_overwrite": True},
        },
    }
    from momentlens.devservices import samples

    user = uuid.uuid4()  # a member of no event: nothing to reprocess afterwards
    references = [factories.reference(user, samples.tom_hanks()) for _ in range(3)]
    for reference in references:
        send({"job": "reference_process", "reference_id": str(reference.id)})

    log = tmp_path / "worker.log"
    assert spawn_worker(worker_env(embedded_pg, tmp_path), "--drain", log_path=log).wait(120) == 0

    text = log.read_text()
    assert text.count("event=engine_loaded") == 1
    assert f"engine={ENGINE}" in text
    assert text.count("job=reference_process") == 3
    assert text.index("event=engine_loaded") < text.index("event=worker_running")
    assert queue_rows() == []
    assert archived() == {}
    for reference in references:
        reference.refresh_from_db()
        assert reference.status == "ready"


def test_a_missing_buffalo_l_folder_stops_the_worker_at_startup(embedded_pg, tmp_path):
    env = worker_env(embedded_pg, tmp_path, FACE_MODEL_PACK="buffalo_l", FACE_MODEL_ROOT=tmp_path / "models")
    log = tmp_path / "worker.log"
    assert spawn_worker(env, "--drain", log_path=log).wait(60) == 1
    text = log.read_text()
    assert "event=worker_died check=face_models" in text
    assert str(tmp_path / "models" / "buffalo_l") in text
    assert "det_10g.onnx" in text
    assert "w600k_r50.onnx" in text
    assert "event=worker_running" not in text


def test_a_corrupted_buffalo_s_file_stops_the_worker_at_startup_naming_it(embedded_pg, tmp_path):
    """An operator's FACE_MODEL_ROOT/buffalo_s/ is checked by digest like the installed files."""
    import shutil

    from faces.engines.packs import BUFFALO_S, pack_folder

    folder = tmp_path / "models" / "buffalo_s"
    folder.mkdir(parents=True)
    installed = pack_folder(BUFFALO_S, tmp_path / "nowhere")
    shutil.copy(installed / BUFFALO_S.detector, folder / BUFFALO_S.detector)
    (folder / BUFFALO_S.recognizer).write_bytes((installed / BUFFALO_S.recognizer).read_bytes()[:4096])
    env = worker_env(embedded_pg, tmp_path, FACE_MODEL_ROOT=tmp_path / "models")
    log = tmp_path / "worker.log"
    assert spawn_worker(env, "--drain", log_path=log).wait(60) == 1
    text = log.read_text()
    assert "event=worker_died" in text
    assert f"{folder / BUFFALO_S.recognizer} is not buffalo_s's w600k_mbf.onnx" in text
    assert "Traceback" not in text
    assert "event=worker_running" not in text


def test_no_reader_slot_stops_the_worker_at_startup_instead_of_waiting_forever(embedded_pg, tmp_path):
    env = worker_env(embedded_pg, tmp_path, WORKER_READER_SLOTS=0)
    log = tmp_path / "worker.log"
    assert spawn_worker(env, "--drain", log_path=log).wait(60) == 2
    text = log.read_text()
    assert "event=worker_died" in text
    assert "WORKER_READER_SLOTS='0': must be from 1 to 100" in text
    assert "event=queue_lock" not in text


def test_missing_media_columns_stop_the_worker_before_its_loop(embedded_pg, tmp_path):
    """The tables check runs at start: a database without the worker's columns is never read from."""
    from django.db import connection

    from momentlens.devservices.postgres import provision

    send(job("test_record"))
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE photos DROP COLUMN media_type, DROP COLUMN duration_ms")
    try:
        log = tmp_path / "worker.log"
        assert spawn_worker(worker_env(embedded_pg, tmp_path), "--drain", log_path=log).wait(60) == 1
        text = log.read_text()
        assert "event=worker_died check=tables" in text
        assert "photos.media_type" in text
        assert "photos.duration_ms" in text
        assert "event=worker_running" not in text
        assert len(queue_rows()) == 1, "the message waits for a worker that can do it"
    finally:
        provision(embedded_pg.uri)  # deploy/database.sql puts them back


@pytest.mark.skipif(
    "CUDAExecutionProvider" in __import__("onnxruntime").get_available_providers(), reason="a GPU box has CUDA"
)
def test_a_provider_onnxruntime_cannot_load_stops_worker_check_and_the_worker(embedded_pg, tmp_path):
    env = worker_env(embedded_pg, tmp_path, ORT_PROVIDERS="CUDAExecutionProvider")
    log = tmp_path / "worker.log"
    assert spawn_worker(env, "--drain", log_path=log).wait(60) == 1
    text = log.read_text()
    assert "event=worker_died check=face_models" in text
    assert "ORT_PROVIDERS names CUDAExecutionProvider, which this onnxruntime cannot load" in text
    checked = subprocess.run(
        [sys.executable, "manage.py", "worker_check"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert checked.returncode == 1
    (face_models,) = [line for line in checked.stdout.splitlines() if line.startswith("check=face_models ")]
    assert "status=FAIL" in face_models
    assert "ORT_PROVIDERS names CUDAExecutionProvider" in face_models
    assert "ORT_PROVIDERS=CPUExecutionProvider" in face_models, "the fix"
