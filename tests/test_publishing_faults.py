"""Storage outages and bad uploads: nothing lost, nothing published that should not be."""

import pytest
from django.core.files.storage import default_storage

from faces.jobs import photo_jobs
from faces.models import Photo, PhotoVariant
from faces.rendering import files
from momentlens.devservices import samples
from tests.support import factories
from tests.support.log_helpers import lines as log_lines
from tests.support.publishing_helpers import run_worker_drain
from tests.support.queue_helpers import archived, queue_rows, send
from tests.support.stored_files import assert_every_row_key_exists

pytestmark = pytest.mark.usefixtures("live_db", "s3_media_storage", "fast_retries")


class Outage:
    """Stops the real S3 server just before upload number `stop_at`; with `recover`, the next
    job try finds it running again (restarted before the try reads its upload)."""

    def __init__(self, seaweed, monkeypatch, *, stop_at: int, recover: bool):
        self.seaweed, self.calls = seaweed, 0
        real_put, real_read = files.put, photo_jobs.read_object

        def put(key, data):
            self.calls += 1
            if self.calls == stop_at:
                seaweed.stop()
            return real_put(key, data)

        def read_object(key):
            if recover and seaweed._process is None:
                seaweed.start()
            return real_read(key)

        monkeypatch.setattr(files, "put", put)
        monkeypatch.setattr(photo_jobs, "read_object", read_object)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.seaweed._process is None:
            self.seaweed.start()


def test_an_outage_between_uploads_fails_the_try_and_the_retry_publishes(dnp_photo, seaweed, monkeypatch):
    photo = dnp_photo
    # Upload 1 succeeds, the server dies before upload 2; it is back for the retry's first upload.
    msg_id = send({"job": "face_process", "photo_id": str(photo.id)})
    with Outage(seaweed, monkeypatch, stop_at=2, recover=True) as outage:
        run_worker_drain()

    photo.refresh_from_db()
    assert outage.calls > 4, "a failed try, then a full retry"
    assert photo.processed_at is not None
    assert photo.variant_version == 1, "the failed try's version bump rolled back with it"
    assert PhotoVariant.objects.filter(photo=photo).count() == 1
    assert_every_row_key_exists(photo)
    assert queue_rows() == []
    assert msg_id not in archived()


def test_an_outage_in_every_try_unpublishes_the_photo_and_archives_the_message(dnp_photo, seaweed, monkeypatch):
    photo = dnp_photo
    send({"job": "face_process", "photo_id": str(photo.id)})
    run_worker_drain()
    photo.refresh_from_db()
    published = (photo.public_key, photo.public_thumb_key)

    msg_id = send({"job": "face_process", "photo_id": str(photo.id)})  # re-sent: renders again
    with Outage(seaweed, monkeypatch, stop_at=1, recover=False):
        run_worker_drain()

    photo.refresh_from_db()
    assert archived() == {msg_id: (3, "failed")}
    assert photo.processed_at is None, "a photo whose job failed is not left up"
    assert (photo.public_key, photo.public_thumb_key) == published
    assert_every_row_key_exists(photo)


GOOD = object()


@pytest.mark.parametrize(
    ("name", "data", "reason"),
    [
        ("corrupt", b"\xff\xd8\xff\xe0" + b"\x13" * 5000, "undecodable_image"),
        ("truncated", "truncated", "undecodable_image"),
        ("zero-byte", b"", "undecodable_image"),
        ("non-image", b"%PDF-1.7 this is a document, not a photo", "undecodable_image"),
        ("20000x20000", samples.png_promising(20_000, 20_000), "image_too_large"),
    ],
)
def test_bad_uploads_are_archived_on_the_first_try_and_the_worker_goes_on(name, data, reason, test_thresholds, caplog):
    event = factories.event()
    if data == "truncated":
        whole = samples.encode_jpeg(samples.group_photo())
        data = whole[: len(whole) // 2]
    bad = factories.photo(event, data=data)
    good = factories.photo(event, samples.tom_hanks())
    bad_msg = send({"job": "face_process", "photo_id": str(bad.id)})
    send({"job": "face_process", "photo_id": str(good.id)})

    run_worker_drain()

    assert archived() == {bad_msg: (1, reason)}
    assert Photo.objects.get(id=bad.id).processed_at is None
    assert Photo.objects.get(id=good.id).processed_at is not None, "the worker went on to the next job"
    lines = log_lines(caplog, "job_archived")
    assert len(lines) == 1
    assert f"reason={reason}" in lines[0]
    assert f"photo_id={bad.id}" in lines[0]


def test_a_missing_upload_object_is_archived_on_the_first_try(test_thresholds):
    photo = factories.photo(factories.event(), samples.tom_hanks())
    default_storage.delete(photo.upload_key)
    msg_id = send({"job": "face_process", "photo_id": str(photo.id)})
    run_worker_drain()
    assert archived() == {msg_id: (1, "missing_object")}


def test_a_failed_delete_after_commit_is_swept_later(dnp_photo, monkeypatch, caplog):
    from io import StringIO

    from django.core.management import call_command

    photo = dnp_photo
    send({"job": "face_process", "photo_id": str(photo.id)})
    run_worker_drain()
    photo.refresh_from_db()
    replaced = [photo.public_key, photo.public_thumb_key]

    def refuse(key):
        raise ConnectionError("storage refused the delete")

    with monkeypatch.context() as patch:
        patch.setattr(default_storage, "delete", refuse)
        send({"job": "face_process", "photo_id": str(photo.id)})  # re-sent: renders again
        run_worker_drain()

    photo.refresh_from_db()
    assert photo.variant_version == 2
    assert photo.processed_at is not None, "the job committed; only the cleanup failed"
    assert log_lines(caplog, "sweep_failed")
    assert all(default_storage.exists(key) for key in replaced), "left behind, not forgotten"

    out = StringIO()
    call_command("sweep_orphans", "--event", str(photo.event_id), stdout=out)
    assert "deleted=4" in out.getvalue()
    assert not any(default_storage.exists(key) for key in replaced)
    assert_every_row_key_exists(photo)
    assert default_storage.exists(photo.upload_key)
    assert default_storage.exists(photo.upload_thumb_key)


def test_a_retry_in_the_same_process_reuses_the_failed_trys_detection(dnp_photo, seaweed, monkeypatch):
    """The first try detected, then failed on an upload: its face rows rolled back, its detection did not."""
    from faces.engines import resident_engine

    engine = resident_engine()
    analyzed = []
    real_analyze = engine.analyze
    monkeypatch.setattr(engine, "analyze", lambda image, **kw: analyzed.append(1) or real_analyze(image, **kw))
    send({"job": "face_process", "photo_id": str(dnp_photo.id)})
    with Outage(seaweed, monkeypatch, stop_at=2, recover=True) as outage:
        run_worker_drain()

    dnp_photo.refresh_from_db()
    assert outage.calls > 4, "a failed try, then a full retry"
    assert dnp_photo.processed_at is not None
    assert len(analyzed) == 1, "detected once for two tries"
    assert dnp_photo.faces.count() == 6
