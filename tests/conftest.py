"""Test infrastructure: real servers, started once per session.

- a throwaway embedded PostgreSQL 18 with pgvector, the pgmq SQL, the schema
  mirror and the `jobs` queue (momentlens.devservices.postgres);
- a throwaway SeaweedFS S3 server on loopback with credentials required
  (momentlens.devservices.seaweedfs).
Both live in pytest's temporary folders and are stopped at the end.
"""

import shutil
from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.storage import FileSystemStorage
from django.db import connection, connections
from storages.backends.s3 import S3Storage

from momentlens.devservices.postgres import EmbeddedPostgres
from momentlens.devservices.seaweedfs import SeaweedS3

# The system tier (`pytest -m "not system"` leaves it out): files whose tests drive whole worker
# processes, run the chaos, fuzz or demo runs, stop storage for minutes, or render real video end to end. They
# hold most of the suite's time, so the everyday loop skips them; `make test` runs everything (README, "Tests").
SYSTEM_FILES = {
    "test_bench_smoke.py",
    "test_chaos.py",
    "test_demo.py",
    "test_embedded_default.py",
    "test_fuzz.py",
    "test_media_e2e.py",
    "test_operator_errors.py",
    "test_pooler.py",
    "test_privacy_lane.py",
    "test_production_path.py",
    "test_reader_slots.py",
    "test_storage_outage.py",
    "test_video_coverage.py",
    "test_worker_process.py",
    "test_worker_role.py",
    "test_worker_startup.py",
}


def pytest_collection_modifyitems(config, items):
    """Marks the system tier, and runs it first: its files are the long ones, so that under `pytest -n`
    (a file to a process) they start early and the short files fill in around them."""
    here = Path(__file__).parent
    for item in items:
        if item.path.parent == here and item.path.name in SYSTEM_FILES:
            item.add_marker(pytest.mark.system)
    items.sort(key=lambda item: item.get_closest_marker("system") is None)


# Every table the tests write: the API's tables and the queue with its archive.
TABLES = (
    "faces",
    "unknown_clusters",
    "photo_variants",
    "photos",
    "subject_references",
    "event_members",
    "events",
    "pgmq.q_jobs",
    "pgmq.a_jobs",
)


@pytest.fixture(scope="session")
def embedded_pg(tmp_path_factory):
    server = EmbeddedPostgres(tmp_path_factory.mktemp("postgres") / "data").ensure_ready()
    yield server
    server.stop()
    shutil.rmtree(server.pgdata, ignore_errors=True)


@pytest.fixture(scope="session")
def django_db_setup(embedded_pg, django_db_blocker):
    """Point Django at the throwaway server instead of creating a test database.

    The tables are unmanaged (the API owns them), so there is nothing for
    Django's test-database machinery to create; the server is already provisioned.
    """
    entry = settings.DATABASES["default"]
    entry.update(
        {
            "NAME": "postgres",
            "USER": "postgres",
            "PASSWORD": "",
            "HOST": "",
            "PORT": "",
            "OPTIONS": {},
            "EMBEDDED_PGDATA": embedded_pg.pgdata,
        }
    )
    with django_db_blocker.unblock():
        connections.close_all()
    return


def truncate_all() -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {', '.join(TABLES)} RESTART IDENTITY CASCADE")


@pytest.fixture
def live_db(transactional_db):
    """Committed writes (other processes can see them), truncated before and after."""
    truncate_all()
    yield
    truncate_all()


@pytest.fixture(scope="session")
def seaweed(tmp_path_factory):
    server = SeaweedS3(
        tmp_path_factory.mktemp("seaweedfs"),
        bucket="momentlens-test",
        access_key="momentlens-test-key",
        secret_key="momentlens-test-secret",
    ).start()
    yield server
    server.stop()


@pytest.fixture(params=["s3", "filesystem"])
def storage(request, tmp_path):
    """Each storage test runs on both backends the worker supports."""
    if request.param == "s3":
        return S3Storage(**request.getfixturevalue("seaweed").storage_options())
    return FileSystemStorage(location=tmp_path / "media", allow_overwrite=True)


@pytest.fixture
def media_storage(settings, tmp_path):
    """Django's default storage on the filesystem, in this test's folder: where a worker process started with
    tests.support.queue_helpers.worker_env (MOMENTLENS_VAR_DIR=tmp_path/var) keeps its files too."""
    settings.STORAGES = {
        **settings.STORAGES,
        "default": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": tmp_path / "var" / "media", "allow_overwrite": True},
        },
    }
    from django.core.files.storage import default_storage

    return default_storage


@pytest.fixture
def spawn_workers(embedded_pg, tmp_path):
    """spawn(name, *run_worker args, **settings): a run_worker process configured as under systemd
    (queue_helpers.worker_env, then `settings`), logging to tmp_path/NAME.log; returns (process, log path).
    All are stopped with SIGTERM at the end."""
    from tests.support.queue_helpers import spawn_worker, stop_workers, worker_env

    started = []

    def start(name: str, *args: str, **overrides):
        log = tmp_path / f"{name}.log"
        process = spawn_worker(worker_env(embedded_pg, tmp_path, **overrides), *args, log_path=log)
        started.append(process)
        return process, log

    yield start
    stop_workers(*started, timeout=30)


@pytest.fixture
def s3_media_storage(settings, seaweed):
    """Django's default storage on the SeaweedFS S3 server."""
    settings.STORAGES = {
        **settings.STORAGES,
        "default": {"BACKEND": "storages.backends.s3.S3Storage", "OPTIONS": seaweed.storage_options()},
    }
    from django.core.files.storage import default_storage

    return default_storage


ENGINE = "insightface-buffalo_s"


@pytest.fixture
def test_thresholds(monkeypatch):
    """buffalo_s's measured thresholds, set here and never through configuration (docs/ARCHITECTURE.md §6)."""
    from faces import thresholds

    measured = thresholds.Thresholds(
        match=0.40,
        blur=0.18,
        cluster=0.35,
        poor_face_blur=0.09,
        turned_face=0.5,
        weak_norm=0,
        unsure_norm=14,
        cluster_merge=0.40,
        clear_match=0.35,
        clear_norm=21,
        explained_lead=0.30,
        calibrated=True,
        link=0.50,
    )
    monkeypatch.setitem(thresholds.THRESHOLDS, ENGINE, measured)
    return measured


@pytest.fixture
def unmeasured_thresholds(monkeypatch):
    from faces import thresholds

    monkeypatch.setitem(thresholds.THRESHOLDS, ENGINE, thresholds.NOT_MEASURED)
    return thresholds.NOT_MEASURED


@pytest.fixture
def media_limits(monkeypatch):
    """`media_limits(frames=5)`: the worker's media limits (faces.media.upload.MEDIA_LIMITS) with those changed, for
    one test; what `open` and `read_object` hold every upload to."""
    import dataclasses

    from faces.media import upload

    def change(**changed):
        monkeypatch.setattr(upload, "MEDIA_LIMITS", dataclasses.replace(upload.MEDIA_LIMITS, **changed))

    return change


@pytest.fixture
def fast_retries(settings):
    """The worker's waits, shortened for tests that run it in this process."""
    settings.WORKER_RETRY_BACKOFF_S = 0.01
    settings.WORKER_IDLE_POLL_S = 0.01


@pytest.fixture(scope="session")
def fast_worker():
    """`fast_worker(**kwargs)`: a Worker (jobqueue.worker) with the short waits every loop test uses, whose
    `run()` hands its jobs what run_worker's startup work builds (the faces app's engine)."""
    from jobqueue.management.commands.run_worker import run_startup_work
    from jobqueue.worker import Worker, WorkerConfig

    config = WorkerConfig(
        visibility_timeout_s=30, retry_backoff_s=0.01, lock_retry_s=0.05, idle_poll_s=0.01, db_recovery_s=5
    )

    class StartedWorker(Worker):
        def run(self, resources=None) -> None:
            super().run(run_startup_work() if resources is None else resources)

    return lambda **kwargs: StartedWorker(config, **kwargs)


@pytest.fixture(scope="session")
def group():
    """t1.jpg: a group of six, shipped in the insightface wheel."""
    from momentlens.devservices import samples

    return samples.group_photo()


@pytest.fixture(scope="session")
def group_faces(group):
    """The engine's own reading of t1, left to right: references are built from these faces."""
    from faces.engines import resident_engine

    return sorted(resident_engine().analyze(group), key=lambda face: face.box[0])


@pytest.fixture
def dnp_photo(test_thresholds, group, group_faces):
    """A photo whose face_process writes 2 files + 2 thumbnails (t1's leftmost guest is DNP, reference ready)."""
    from tests.support import factories
    from tests.support.publishing_helpers import run_worker_drain

    event = factories.event()
    factories.member_with_reference(event, group, group_faces[0])
    run_worker_drain()
    return factories.photo(event, group)
