"""What a job's archive undoes or records (docs/ARCHITECTURE.md §5, rule 7; reference_process), and
references' dominant face."""

import cv2
import numpy as np
import pytest
from django.core.management import call_command

from faces.jobs import photo_jobs, reference_process
from faces.models import Photo, SubjectReference
from momentlens.devservices import samples
from tests.support import factories
from tests.support.publishing_helpers import run_worker_drain
from tests.support.queue_helpers import archived, queue_rows, send

pytestmark = pytest.mark.usefixtures("live_db", "s3_media_storage", "fast_retries")


def published_photos(event, image, count: int) -> list[Photo]:
    photos = [factories.photo(event, image) for _ in range(count)]
    for photo in photos:
        send({"job": "face_process", "photo_id": str(photo.id)})
    run_worker_drain()
    return [Photo.objects.get(id=photo.id) for photo in photos]


def test_a_final_failure_of_reprocess_event_unpublishes_its_event_until_the_resent_job_runs(
    monkeypatch, test_thresholds
):
    tom = cv2.resize(samples.tom_hanks(), None, fx=0.5, fy=0.5)
    event, bystander_event = factories.event(), factories.event("another")
    photos = published_photos(event, tom, 2)
    bystander = published_photos(bystander_event, tom, 1)[0]
    assert all(photo.processed_at for photo in photos)

    def refuse(*args):
        raise RuntimeError("the queue refused the fan-out")

    with monkeypatch.context() as patch:
        patch.setattr(photo_jobs, "enqueue_unless_waiting", refuse)
        msg_id = send({"job": "reprocess_event", "event_id": str(event.id)})
        run_worker_drain()
    assert archived()[msg_id] == (3, "failed")
    assert all(Photo.objects.get(id=photo.id).processed_at is None for photo in photos), "no old file stays up"
    assert Photo.objects.get(id=bystander.id).processed_at is not None, "another event is untouched"

    call_command("requeue_archived", "--msg-id", str(msg_id))
    run_worker_drain()
    assert queue_rows() == []
    for photo in photos:
        again = Photo.objects.get(id=photo.id)
        assert again.processed_at is not None, "the re-sent job publishes them again"
        assert again.variant_version == photo.variant_version + 1


def test_a_reference_whose_job_fails_for_good_is_failed_not_pending(monkeypatch, group):
    user = factories.member(factories.event(), dnp=True)
    reference = factories.reference(user, samples.tom_hanks())

    def storage_down(key):
        raise ConnectionError("storage is down")

    monkeypatch.setattr(reference_process, "read_object", storage_down)
    msg_id = send({"job": "reference_process", "reference_id": str(reference.id)})
    run_worker_drain()
    assert archived()[msg_id] == (3, "failed")
    reference.refresh_from_db()
    assert reference.status == SubjectReference.Status.FAILED
    assert reference.processed_at is not None


def paste(canvas: np.ndarray, face: np.ndarray, x: int, y: int, width: int) -> None:
    resized = cv2.resize(face, (width, round(face.shape[0] * width / face.shape[1])), interpolation=cv2.INTER_AREA)
    canvas[y : y + resized.shape[0], x : x + resized.shape[1]] = resized


def test_a_high_resolution_selfie_takes_its_dominant_face(group, group_faces, test_thresholds):
    """A 12 MP selfie with two small faces behind the subject is `ready`, with the subject's embedding."""
    subject = samples.derived_portrait(group, group_faces[2].box, scale=2.2)
    selfie = np.full((3000, 4000, 3), 90, np.uint8)
    paste(selfie, subject, 1200, 600, 1600)
    for face, x in ((group_faces[0], 300), (group_faces[4], 3500)):
        paste(selfie, samples.derived_portrait(group, face.box, scale=1.4), x, 500, 70)
    user = factories.member(factories.event(), dnp=True)
    reference = factories.reference(user, selfie)
    send({"job": "reference_process", "reference_id": str(reference.id)})
    run_worker_drain()
    reference.refresh_from_db()
    assert reference.status == SubjectReference.Status.READY
    similarities = [float(np.asarray(reference.embedding) @ face.embedding) for face in group_faces]
    assert int(np.argmax(similarities)) == 2, "the subject's face, not a face behind them"


def test_two_comparably_large_faces_make_an_ambiguous_reference(group, group_faces):
    x1, y1 = int(group_faces[2].box[0]) - 40, int(group_faces[2].box[1]) - 60
    x2, y2 = int(group_faces[3].box[2]) + 40, int(group_faces[3].box[3]) + 40
    two = np.ascontiguousarray(group[max(0, y1) : y2, x1:x2])
    user = factories.member(factories.event(), dnp=True)
    reference = factories.reference(user, two)
    send({"job": "reference_process", "reference_id": str(reference.id)})
    run_worker_drain()
    reference.refresh_from_db()
    assert reference.status == SubjectReference.Status.MANY_FACES
