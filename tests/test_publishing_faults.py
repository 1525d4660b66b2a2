"""Storage outages and bad uploads: nothing lost, nothing published that should not be."""

import threading

import botocore.exceptions
import pytest
from django.core.files.storage import default_storage

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
    """Stops the real S3 server just before upload number `stop_at`, and starts it again `back_after_s` later."""

    def __init__(self, seaweed, monkeypatch, *, stop_at: int, back_after_s: float):
        self.seaweed, self.calls = seaweed, 0
        real_put = files.put
        self._timer = threading.Timer(back_after_s, seaweed.start)

        def put(key, data):
            self.calls += 1
            if self.calls == stop_at:
                seaweed.stop()
                self._timer.start()
            return real_put(key, data)

        monkeypatch.setattr(files, "put", put)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._timer.join()
        if self.seaweed._process is None:
            self.seaweed.start()


def test_a_blip_between_uploads_is_retried_in_place_and_the_first_try_publishes(dnp_photo, seaweed, monkeypatch):
    photo = dnp_photo
    # Upload 1 succeeds, the server dies before upload 2 and is back 2 s later: within the upload's own retries.
    msg_id = send({"job": "face_process", "photo_id": str(photo.id)})
    with Outage(seaweed, monkeypatch, stop_at=2, back_after_s=2):
        run_worker_drain()

    photo.refresh_from_db()
    assert photo.processed_at is not None
    assert photo.variant_version == 1
    assert PhotoVariant.objects.filter(photo=photo).count() == 1
    assert_every_row_key_exists(photo)
    assert queue_rows() == []
    assert msg_id not in archived()


def test_an_outage_past_the_upload_retries_is_waited_out_uncounted(dnp_photo, seaweed, monkeypatch, caplog):
    photo = dnp_photo
    msg_id = send({"job": "face_process", "photo_id": str(photo.id)})
    with Outage(seaweed, monkeypatch, stop_at=2, back_after_s=12) as outage:
        run_worker_drain()

    photo.refresh_from_db()
    assert outage.calls > 4, "a try given back, then a full one"
    assert photo.processed_at is not None
    assert photo.variant_version == 1, "the given-back try's version bump rolled back with it"
    assert_every_row_key_exists(photo)
    done = [line for line in log_lines(caplog, "job_done") if f"msg_id={msg_id} " in line]
    assert len(done) == 1
    assert " try=1 " in done[0], "the outage spent no try"
    assert msg_id not in archived()


def test_a_storage_error_of_the_jobs_own_in_every_try_unpublishes_the_photo_and_archives_it(dnp_photo, monkeypatch):
    """A 403 (a key refused) is the request's own fault, no outage: three tries, then archived (the brief's rule)."""
    photo = dnp_photo
    send({"job": "face_process", "photo_id": str(photo.id)})
    run_worker_drain()
    photo.refresh_from_db()
    published = (photo.public_key, photo.public_thumb_key)

    def refused(key, data):
        raise botocore.exceptions.ClientError(
            {"Error": {"Code": "AccessDenied"}, "ResponseMetadata": {"HTTPStatusCode": 403}}, "PutObject"
        )

    monkeypatch.setattr(files, "put", refused)
    msg_id = send({"job": "face_process", "photo_id": str(photo.id)})  # re-sent: renders again
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
    """The first try detected, then met an outage on an upload: its face rows rolled back, its detection did not."""
    from faces.engines import resident_engine

    engine = resident_engine()
    analyzed = []
    real_analyze = engine.analyze
    monkeypatch.setattr(engine, "analyze", lambda image, **kw: analyzed.append(1) or real_analyze(image, **kw))
    send({"job": "face_process", "photo_id": str(dnp_photo.id)})
    with Outage(seaweed, monkeypatch, stop_at=2, back_after_s=12) as outage:
        run_worker_drain()

    dnp_photo.refresh_from_db()
    assert outage.calls > 4, "a try given back, then a full one"
    assert dnp_photo.processed_at is not None
    assert len(analyzed) == 1, "detected once for two tries"
    assert dnp_photo.faces.count() == 6
