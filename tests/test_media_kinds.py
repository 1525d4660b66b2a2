"""Uploads that are not single-frame stills fail closed: archived on the first try as unsupported_media.

A multi-frame upload is never published as itself nor rendered from one frame, and the
kind is read from the bytes, never from the key (every upload here sits under a .jpg key).
"""

import cv2
import pytest

from faces.models import Photo
from tests import factories
from tests.media_samples import animation, faceless_then, video
from tests.publishing_helpers import run_worker_drain
from tests.queue_helpers import archived, queue_rows, send

pytestmark = pytest.mark.usefixtures("live_db", "s3_media_storage", "fast_retries")


def small(group):
    return cv2.resize(group, (640, 443), interpolation=cv2.INTER_AREA)


def archived_as_unsupported(msg_id: int, photo: Photo) -> None:
    assert archived()[msg_id] == (1, "unsupported_media"), "archived on its first try"
    assert queue_rows() == []
    photo.refresh_from_db()
    assert photo.processed_at is None
    assert photo.public_key is None, "never published as itself"
    assert photo.variant_version == 0, "never rendered"


def test_an_animation_whose_later_frames_show_a_dnp_guest_is_never_published(group, group_faces, test_thresholds):
    """The reviewer's case: frame 0 has no face, the DNP guest (ready reference) shows up after it."""
    event = factories.event()
    user = factories.member(event, dnp=True)
    factories.ready_reference(user, group_faces[0].embedding, group_faces[0].engine)
    photo = factories.photo(event, data=animation(faceless_then(small(group)), "WEBP"))
    msg_id = send({"job": "face_process", "photo_id": str(photo.id)})
    run_worker_drain()
    archived_as_unsupported(msg_id, photo)


@pytest.mark.parametrize("kind", ["GIF", "WEBP", "PNG"])
@pytest.mark.parametrize("job", ["face_process", "thumbnail_dims"])
def test_animated_uploads_are_unsupported_in_every_photo_job(group, test_thresholds, kind, job):
    """thumbnail_dims too: with no DNP member and no region it would point the public keys at the upload."""
    photo = factories.photo(factories.event(), data=animation(faceless_then(small(group)), kind))
    msg_id = send({"job": job, "photo_id": str(photo.id)})
    run_worker_drain()
    archived_as_unsupported(msg_id, photo)


@pytest.mark.parametrize("suffix", [".mp4", ".mov", ".webm", ".avi"])
def test_video_containers_are_unsupported_media_not_undecodable_images(group, test_thresholds, suffix):
    photo = factories.photo(factories.event(), data=video(faceless_then(small(group)), suffix))
    msg_id = send({"job": "thumbnail_dims", "photo_id": str(photo.id)})
    run_worker_drain()
    archived_as_unsupported(msg_id, photo)


@pytest.mark.parametrize("kind", ["PNG", "WEBP"])
def test_single_frame_stills_of_other_formats_still_publish(group, test_thresholds, kind):
    photo = factories.photo(factories.event(), data=animation([small(group)], kind))
    send({"job": "thumbnail_dims", "photo_id": str(photo.id)})
    run_worker_drain()
    photo.refresh_from_db()
    assert photo.processed_at is not None
    assert photo.public_key == photo.upload_key


def test_an_animated_reference_is_failed_not_left_pending(group):
    user = factories.member(factories.event(), dnp=True)
    reference = factories.reference(user, data=animation(faceless_then(small(group)), "GIF"))
    msg_id = send({"job": "reference_process", "reference_id": str(reference.id)})
    run_worker_drain()
    assert archived()[msg_id] == (1, "unsupported_media")
    reference.refresh_from_db()
    assert reference.status == "failed"
