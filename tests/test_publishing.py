"""Publishing end to end: run_worker --drain, real PostgreSQL, real SeaweedFS S3, buffalo_s engine."""

import uuid

import numpy as np
import pytest
from django.core.files.storage import default_storage
from django.db import transaction

from faces.models import EventMember, Photo, PhotoVariant
from jobqueue.context import JobContext
from momentlens.devservices.pixels import difference, face_core
from tests.support import factories
from tests.support.publishing_helpers import read_image, run_worker_drain, thumbnail_matches
from tests.support.queue_helpers import archived, queue_rows, send
from tests.support.stored_files import assert_every_row_key_exists, read_bytes, try_folder_files, untokened

pytestmark = pytest.mark.usefixtures("live_db", "s3_media_storage", "fast_retries")

REGION = {"x": 0.02, "y": 0.75, "w": 0.2, "h": 0.2}


def face_processed(event, image, **fields) -> Photo:
    """A photo uploaded as the API would, then face_process through the worker."""
    photo = factories.photo(event, image, **fields)
    send({"job": "face_process", "photo_id": str(photo.id)})
    run_worker_drain()
    photo.refresh_from_db()
    return photo


def faces_by_x(photo: Photo):
    return sorted(photo.faces.all(), key=lambda face: face.box_x)


def test_one_dnp_member_gives_a_public_file_and_their_own(group, group_faces, test_thresholds):
    event = factories.event()
    user = factories.member_with_reference(event, group, group_faces[2])  # nobody else in t1 comes near (< 0.06)
    run_worker_drain()  # the reference first: reprocess_event finds no published photo yet
    photo = factories.photo(event, group, blur_regions=[REGION])
    upload_bytes = read_bytes(photo.upload_key)
    send({"job": "face_process", "photo_id": str(photo.id)})
    run_worker_drain()

    photo.refresh_from_db()
    assert photo.processed_at is not None
    assert photo.variant_version == 1
    assert untokened(photo.public_key) == f"events/{event.id}/photos/{photo.id}/v1/public.jpg"
    variant = PhotoVariant.objects.get(photo=photo)
    assert variant.user_id == user
    assert untokened(variant.key) == f"events/{event.id}/photos/{photo.id}/v1/user_{user}.jpg"
    assert (photo.width, photo.height) == (group.shape[1], group.shape[0])

    upload, public, own = read_image(photo.upload_key), read_image(photo.public_key), read_image(variant.key)
    faces = faces_by_x(photo)
    theirs, others = faces[2], faces[:2] + faces[3:]
    assert theirs.matched_user_id == user
    # Public: exactly that face is blurred; every other face is as uploaded.
    assert difference(face_core(public, theirs), face_core(upload, theirs)) > 15
    for face in others:
        assert difference(face_core(public, face), face_core(upload, face)) < 4
        assert difference(face_core(own, face), face_core(upload, face)) < 4
    # Their own file: their face as uploaded, the rest as public.
    assert difference(face_core(own, theirs), face_core(upload, theirs)) < 4
    # The blur region: exactly the rectangle drawn, in both files.
    height, width = group.shape[:2]
    inside = np.s_[int(0.76 * height) : int(0.94 * height), int(0.03 * width) : int(0.21 * width)]
    for rendered in (public, own):
        assert difference(rendered[inside], upload[inside]) > 5
    # 2 files and 2 thumbnails, each thumbnail its file downscaled.
    thumbnail_matches(photo.public_key, photo.public_thumb_key)
    thumbnail_matches(variant.key, variant.thumb_key)
    prefix_objects = try_folder_files(photo)
    assert len(prefix_objects) == 4
    assert read_bytes(photo.upload_key) == upload_bytes
    assert_every_row_key_exists(photo)


def test_two_dnp_members_give_three_files_never_four(group, group_faces, test_thresholds):
    event = factories.event()
    first = factories.member_with_reference(event, group, group_faces[0])
    second = factories.member_with_reference(event, group, group_faces[4])
    run_worker_drain()
    photo = face_processed(event, group)

    assert set(PhotoVariant.objects.filter(photo=photo).values_list("user_id", flat=True)) == {first, second}
    files = try_folder_files(photo)
    assert len(files) == 6  # 3 files + 3 thumbnails
    upload, public = read_image(photo.upload_key), read_image(photo.public_key)
    own_first = read_image(PhotoVariant.objects.get(photo=photo, user_id=first).key)
    faces = faces_by_x(photo)
    assert difference(face_core(public, faces[0]), face_core(upload, faces[0])) > 15
    assert difference(face_core(public, faces[4]), face_core(upload, faces[4])) > 15
    assert difference(face_core(own_first, faces[0]), face_core(upload, faces[0])) < 4
    assert difference(face_core(own_first, faces[4]), face_core(upload, faces[4])) > 15


def test_thresholds_not_measured_give_one_public_file_with_every_face_blurred(
    group, group_faces, unmeasured_thresholds
):
    event = factories.event()
    factories.member_with_reference(event, group, group_faces[0])
    run_worker_drain()
    photo = face_processed(event, group)

    assert PhotoVariant.objects.filter(photo=photo).count() == 0
    assert len(try_folder_files(photo)) == 2
    upload, public = read_image(photo.upload_key), read_image(photo.public_key)
    for face in faces_by_x(photo):
        assert difference(face_core(public, face), face_core(upload, face)) > 15


def test_a_member_who_leaves_is_unblurred_by_reprocess_and_old_objects_go(group, group_faces, test_thresholds):
    event = factories.event()
    user = factories.member_with_reference(event, group, group_faces[0])
    run_worker_drain()
    photo = factories.photo(event, group)
    upload_bytes, upload_thumb_bytes = read_bytes(photo.upload_key), read_bytes(photo.upload_thumb_key)
    send({"job": "face_process", "photo_id": str(photo.id)})
    run_worker_drain()
    photo.refresh_from_db()
    old_keys = [photo.public_key, photo.public_thumb_key, *PhotoVariant.objects.values_list("key", flat=True)]
    detected_at = photo.faces_detected_at

    EventMember.objects.filter(event=event, user_id=user).update(status="left")
    send({"job": "reprocess", "photo_id": str(photo.id)})
    run_worker_drain()

    photo.refresh_from_db()
    assert photo.variant_version == 2
    assert photo.faces_detected_at == detected_at, "reprocess never detects"
    assert PhotoVariant.objects.filter(photo=photo).count() == 0
    # Nobody left to blur and no region: the public keys are the upload keys again.
    assert photo.public_key == photo.upload_key
    for key in old_keys:
        assert not default_storage.exists(key), f"{key} was replaced and must be deleted"
    assert read_bytes(photo.upload_key) == upload_bytes
    assert read_bytes(photo.upload_thumb_key) == upload_thumb_bytes
    assert faces_by_x(photo)[0].matched_user_id is None


def test_a_resent_thumbnail_dims_after_face_process_changes_nothing(group, group_faces, test_thresholds):
    event = factories.event()
    factories.member_with_reference(event, group, group_faces[0])
    run_worker_drain()
    photo = face_processed(event, group)
    before = (photo.variant_version, photo.public_key, photo.processed_at, photo.public_thumb_key)
    files_before = try_folder_files(photo)
    assert len(files_before) == 4

    send({"job": "thumbnail_dims", "photo_id": str(photo.id)})
    run_worker_drain()

    photo.refresh_from_db()
    assert (photo.variant_version, photo.public_key, photo.processed_at, photo.public_thumb_key) == before
    assert try_folder_files(photo) == files_before
    assert queue_rows() == []
    assert archived() == {}


def test_thumbnail_dims_without_dnp_members_publishes_the_upload_or_its_regions(group, test_thresholds):
    event = factories.event()
    factories.member(event)  # not DNP
    plain = factories.photo(event, group)
    regions = factories.photo(event, group, blur_regions=[REGION])
    send({"job": "thumbnail_dims", "photo_id": str(plain.id)})
    send({"job": "thumbnail_dims", "photo_id": str(regions.id)})
    run_worker_drain()

    plain.refresh_from_db()
    regions.refresh_from_db()
    assert plain.public_key == plain.upload_key
    assert plain.public_thumb_key == plain.upload_thumb_key
    assert (plain.width, plain.height) == (group.shape[1], group.shape[0])
    assert plain.processed_at is not None
    assert plain.faces_detected_at is None, "no face pass without a DNP member"
    assert untokened(regions.public_key).endswith("/v1/public.jpg")
    assert regions.processed_at is not None


def test_thumbnail_dims_with_an_active_dnp_member_takes_the_face_path(group, group_faces, test_thresholds):
    event = factories.event()
    factories.member_with_reference(event, group, group_faces[0])
    run_worker_drain()
    photo = factories.photo(event, group)
    send({"job": "thumbnail_dims", "photo_id": str(photo.id)})
    run_worker_drain()

    photo.refresh_from_db()
    assert photo.faces_detected_at is not None
    assert photo.public_key != photo.upload_key
    upload, public = read_image(photo.upload_key), read_image(photo.public_key)
    face = faces_by_x(photo)[0]
    assert difference(face_core(public, face), face_core(upload, face)) > 15


def test_reprocess_event_enqueues_one_reprocess_per_rendered_photo(group, test_thresholds):
    """Published photos, and rendered ones a final failure unpublished; never one still waiting for its first job."""
    from faces.jobs.photo_jobs import reprocess_event

    event = factories.event()
    published = [factories.photo(event, group, variant_version=1) for _ in range(2)]
    unpublished_after_render = factories.photo(event, group, variant_version=2)
    factories.photo(event, group)  # never rendered: its own face_process is still to come
    Photo.objects.filter(id__in=[p.id for p in published]).update(processed_at="2026-01-01T00:00:00Z")
    published.append(unpublished_after_render)
    with transaction.atomic():  # a handler's transaction: the fan-out's lock lasts until it ends
        result = reprocess_event(
            {"job": "reprocess_event", "event_id": str(event.id)}, JobContext.outside_worker("reprocess_event")
        )
    assert result == {"hidden": 0, "enqueued": 3, "already_waiting": 0}
    import json

    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT message FROM pgmq.q_jobs")
        sent = sorted(json.loads(row[0])["photo_id"] for row in cursor.fetchall())
    assert sent == sorted(str(p.id) for p in published)


def test_a_job_for_a_deleted_photo_is_deleted_not_archived():
    send({"job": "face_process", "photo_id": str(uuid.uuid4())})
    run_worker_drain()
    assert queue_rows() == []
    assert archived() == {}
