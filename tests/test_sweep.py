"""The sweep of derived objects (docs/ARCHITECTURE.md §3, §5 rule 5): never what a job in flight writes,
never an upload, always what replaced, deleted or failed work left behind."""

import logging
import threading
import uuid
from io import StringIO

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.core.management import CommandError, call_command
from django.db import connection

from faces.models import Event, Photo
from faces.rendering import files, sweep
from jobqueue.health import WorkerState
from jobqueue.management.commands.run_worker import run_startup_work
from jobqueue.worker import Worker, WorkerConfig
from momentlens.devservices import samples
from tests.support import factories
from tests.support.publishing_helpers import run_worker_drain
from tests.support.queue_helpers import send
from tests.support.stored_files import assert_every_row_key_exists
from tests.support.waiting import poll

pytestmark = pytest.mark.usefixtures("live_db", "s3_media_storage", "fast_retries")


def derived_objects(photo: Photo) -> list[str]:
    return [key for key in sweep.list_keys(files.photo_prefix(photo.event_id, photo.id)) if files.derived_version(key)]


def in_another_thread(action) -> None:
    """Run `action` on its own database connection, as a second process would, and wait for it."""
    errors = []

    def run():
        try:
            action()
        except Exception as error:  # re-raised in the test's thread
            errors.append(error)
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(60)
    assert not errors, errors


def test_a_sweep_between_a_jobs_uploads_and_its_commit_deletes_nothing_it_wrote(dnp_photo, monkeypatch):
    """The reviewer's interleaving: sweep_orphans runs after the job uploaded v1 and before it committed."""
    photo = dnp_photo
    outputs = []
    real_publish = files.publish

    def publish_after_a_sweep(row):
        in_another_thread(lambda: outputs.append(sweep_orphans(photo.event_id)))
        real_publish(row)

    monkeypatch.setattr(files, "publish", publish_after_a_sweep)
    send({"job": "face_process", "photo_id": str(photo.id)})
    run_worker_drain()

    photo.refresh_from_db()
    assert outputs == ["sweep_orphans deleted=0 busy=1"], "the photo's row was locked: skipped, not swept"
    assert photo.processed_at is not None
    assert_every_row_key_exists(photo)


def test_the_sweep_never_deletes_a_version_newer_than_the_committed_one(dnp_photo):
    """What a failed try left (v1 while the row still says 0) may belong to a try still running: kept."""
    photo = dnp_photo
    left_by_a_failed_try = files.render_keys(photo.event_id, photo.id, 1, [None]).files[None]
    for key in left_by_a_failed_try:
        files.put(key, b"written by a try that rolled back")
    assert sweep_orphans(photo.event_id) == "sweep_orphans deleted=0 busy=0"
    assert all(default_storage.exists(key) for key in left_by_a_failed_try)


def test_uploads_under_the_derived_prefix_are_never_deleted(group, group_faces, test_thresholds):
    """The API may store uploads anywhere, under a photo's derived prefix too, even in a derived shape."""
    event = factories.event()
    user = factories.member(event, dnp=True)
    photo_id = uuid.uuid4()
    prefix = files.photo_prefix(event.id, photo_id)
    # A reference upload in a derived shape, under the folder of a photo that does not exist.
    stray = files.render_keys(event.id, uuid.uuid4(), 1, [user]).files[user][0]
    reference = factories.reference(user, samples.derived_portrait(group, group_faces[0].box))
    factories.upload(stray, data=default_storage.open(reference.upload_key).read())
    reference.upload_key = stray
    reference.save(update_fields=["upload_key"])
    factories.upload(f"{prefix}original.jpg", group)
    factories.upload(f"{prefix}original_thumb.jpg", data=b"the API's thumbnail")
    photo = factories.photo_row(
        event, photo_id, upload_key=f"{prefix}original.jpg", upload_thumb_key=f"{prefix}original_thumb.jpg"
    )
    send({"job": "reference_process", "reference_id": str(reference.id)})
    send({"job": "face_process", "photo_id": str(photo.id)})
    send({"job": "face_process", "photo_id": str(photo.id)})  # re-sent: renders again
    run_worker_drain()
    sweep_orphans(event.id)

    photo.refresh_from_db()
    assert photo.variant_version >= 2, "rendered, then rendered again"
    assert default_storage.exists(photo.upload_key)
    assert default_storage.exists(photo.upload_thumb_key)
    assert default_storage.exists(stray), "a reference's upload, whatever its shape"
    assert_every_row_key_exists(photo)
    current = f"/v{photo.variant_version}."
    assert all(current in key for key in derived_objects(photo)), "the replaced versions are gone"


def test_a_failed_delete_is_retried_by_the_worker_itself_when_idle(dnp_photo, monkeypatch, settings):
    photo = dnp_photo
    send({"job": "face_process", "photo_id": str(photo.id)})
    run_worker_drain()
    photo.refresh_from_db()
    replaced = [photo.public_key, photo.public_thumb_key]

    with monkeypatch.context() as patch:
        patch.setattr(default_storage, "delete", lambda key: (_ for _ in ()).throw(ConnectionError("storage blip")))
        send({"job": "face_process", "photo_id": str(photo.id)})  # re-sent: renders again
        run_worker_drain()
    assert all(default_storage.exists(key) for key in replaced), "left behind by the blip"

    settings.WORKER_SWEEP_RETRY_S = 0.05
    settings.WORKER_FULL_SWEEP_S = 0  # only the retry of what failed may clean up here
    run_worker_until(lambda: not any(default_storage.exists(key) for key in replaced))
    photo.refresh_from_db()
    assert_every_row_key_exists(photo)


def test_a_failed_delete_is_retried_between_jobs_not_only_when_idle(dnp_photo, monkeypatch, settings):
    """run_worker --drain never goes idle: the retry still runs right after the job."""
    photo = dnp_photo
    send({"job": "face_process", "photo_id": str(photo.id)})
    run_worker_drain()
    photo.refresh_from_db()
    replaced = [photo.public_key, photo.public_thumb_key]
    real_delete, refused = default_storage.delete, []

    def refuse_once(key):
        if not refused:
            refused.append(key)
            raise ConnectionError("storage blip")
        real_delete(key)

    settings.WORKER_SWEEP_RETRY_S = 0.001
    with monkeypatch.context() as patch:
        patch.setattr(default_storage, "delete", refuse_once)
        send({"job": "face_process", "photo_id": str(photo.id)})  # re-sent: renders again
        run_worker_drain()
    assert refused, "the after-commit sweep failed"
    assert not any(default_storage.exists(key) for key in replaced), "retried in the same run"


def test_a_round_of_pending_sweeps_ends_at_the_first_photo_storage_fails(seaweed, monkeypatch, caplog):
    """Storage that fails one remembered photo fails the next, and each call to a storage that hangs takes its
    timeouts: the round stops at the first failure, between two jobs, and the rest wait for the next round."""
    monkeypatch.setattr(sweep, "_pending", {})
    for _ in range(3):
        sweep.remember(uuid.uuid4(), uuid.uuid4())
    seaweed.stop()
    try:
        with caplog.at_level(logging.WARNING, logger="faces.sweep"):
            assert sweep.sweep_pending() == 0
    finally:
        seaweed.start()
    assert [record.msg for record in caplog.records] == ["sweep_failed"]
    assert sweep.sweep_pending() == 3, "all three swept in the next round"


def test_derived_files_of_deleted_photos_and_events_are_swept_uploads_kept(dnp_photo, group, settings):
    photo = dnp_photo
    other_event = factories.event("deleted whole")
    other = factories.photo(other_event, group, blur_regions=[{"x": 0.1, "y": 0.1, "w": 0.2, "h": 0.2}])
    send({"job": "face_process", "photo_id": str(photo.id)})
    send({"job": "face_process", "photo_id": str(other.id)})
    run_worker_drain()
    photo.refresh_from_db()
    assert len(derived_objects(photo)) == 4, "public and the DNP member's own file, with thumbnails"
    assert len(derived_objects(other)) == 2
    Photo.objects.filter(id=photo.id).delete()  # the API deletes a photo...
    Event.objects.filter(id=other_event.id).delete()  # ...and a whole event

    settings.WORKER_SWEEP_RETRY_S = 0
    settings.WORKER_FULL_SWEEP_S = 0.05
    run_worker_until(lambda: not derived_objects(photo) and not derived_objects(other))
    for gone in (photo, other):
        assert default_storage.exists(gone.upload_key), "uploads are the API's: never deleted"
        assert default_storage.exists(gone.upload_thumb_key)


def test_the_full_sweep_stops_for_a_message_and_goes_on_from_there():
    """On S3: the worker's full sweep stops at the first photo done after a message comes (`message_waiting`), and
    its next run lists storage from the last key it swept, sweeping the rest; at the end it starts over."""
    event = uuid.uuid4()
    orphans = [
        default_storage.save(f"events/{event}/photos/{photo}/v1/{name}", ContentFile(b"left behind"))
        for photo in (uuid.uuid4() for _ in range(3))
        for name in ("public.jpg", "public_thumb.jpg")
    ]
    full = sweep.FullSweep(prefix=f"events/{event}/photos/")
    assert full.run(lambda: True) is False
    assert sum(default_storage.exists(key) for key in orphans) == 4, "one photo swept, then it stopped"
    assert full.after == sorted(orphans)[1]
    assert full.run(lambda: False) is True
    assert not any(default_storage.exists(key) for key in orphans)
    assert (full.after, full.deleted) == ("", 0), "the next run starts over"


def test_sweep_orphans_refuses_an_event_that_is_not_an_id():
    """A CommandError: one line on stderr and exit 1 from the command line, never a silent success."""
    with pytest.raises(CommandError, match="'nope' is not the id of any event"):
        call_command("sweep_orphans", "--event", "nope")


def sweep_orphans(event_id) -> str:
    """The command on one event, named by its id's first 8 characters as the reports print it (the test
    bucket holds other tests' folders too)."""
    out = StringIO()
    call_command("sweep_orphans", "--event", str(event_id)[:8], stdout=out)
    return out.getvalue().strip()


def run_worker_until(condition, timeout_s: float = 30.0) -> None:
    """The real loop, not draining: it goes idle and runs its idle tasks until `condition` holds."""
    worker = Worker(WorkerConfig.from_settings(), WorkerState())
    resources = run_startup_work()  # as run_worker does: the engine its jobs get
    thread = threading.Thread(target=lambda: (worker.run(resources), connection.close()))
    thread.start()
    try:
        assert poll(condition, timeout=timeout_s), "the worker did not sweep by itself in time"
    finally:
        worker.request_stop()
        thread.join(30)
