"""run_worker loads the face engine once, before the loop, and refuses to start without models."""

import uuid

import pytest

from faces.engines.portable import NAME as PORTABLE
from tests import factories
from tests.queue_helpers import archived, queue_rows, send, spawn_worker, worker_env

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
    assert f"engine={PORTABLE}" in text
    assert text.count("job=reference_process") == 3
    assert text.index("event=engine_loaded") < text.index("event=worker_running")
    assert queue_rows() == []
    assert archived() == {}
    for reference in references:
        reference.refresh_from_db()
        assert reference.status == "ready"


def test_a_missing_buffalo_l_folder_stops_the_worker_at_startup(embedded_pg, tmp_path):
    env = worker_env(embedded_pg, tmp_path, FACE_ENGINE="insightface", FACE_MODEL_ROOT=tmp_path / "models")
    log = tmp_path / "worker.log"
    assert spawn_worker(env, "--drain", log_path=log).wait(60) == 1
    text = log.read_text()
    assert "event=worker_died" in text
    assert str(tmp_path / "models" / "buffalo_l") in text
    assert "det_10g.onnx" in text
    assert "w600k_r50.onnx" in text
    assert "event=worker_running" not in text
