"""The kind of an upload is read from its bytes, never from its key (every upload here sits under a .jpg key).

Animated images and videos are rendered frame by frame, never published as themselves; what has
several frames but is no animation (TIFF pages) and a clip used as a reference selfie fail closed.
"""

import io
from fractions import Fraction

import av
import cv2
import numpy as np
import pytest
from django.core.management import call_command

from faces.engines.insightface import InsightFaceEngine
from faces.media import video as video_module
from faces.models import EventMember, Photo, UnknownCluster
from momentlens.devservices.pixels import difference
from tests.support import factories
from tests.support.media_samples import animation, faceless_then, video
from tests.support.publishing_helpers import run_worker_drain
from tests.support.queue_helpers import archived, queue_rows, send
from tests.support.stored_files import read_bytes, untokened

pytestmark = pytest.mark.usefixtures("live_db", "s3_media_storage", "fast_retries")


def small(group):
    return cv2.resize(group, (640, 443), interpolation=cv2.INTER_AREA)


def rendered_not_itself(photo: Photo, media_type: str, ext: str) -> None:
    assert queue_rows() == []
    assert archived() == {}
    photo.refresh_from_db()
    assert photo.processed_at is not None
    assert photo.media_type == media_type
    assert photo.public_key != photo.upload_key, "never published as itself"
    assert untokened(photo.public_key).endswith(f"/v1/public.{ext}")
    assert untokened(photo.public_thumb_key).endswith("/v1/public_thumb.jpg")
    assert photo.faces.exists()
    assert not photo.faces.filter(frame_time=None).exists()


def dnp_guest_after_frame_0(group, group_faces) -> tuple[Photo, object]:
    """An animation whose frame 0 has no face and whose later frames show a DNP member (ready
    reference), face_process drained: (the photo, the member)."""
    event = factories.event()
    user = factories.member(event, dnp=True)
    factories.ready_reference(user, group_faces[0].embedding, group_faces[0].engine)
    photo = factories.photo(event, data=animation(faceless_then(small(group)), "WEBP"))
    send({"job": "face_process", "photo_id": str(photo.id)})
    run_worker_drain()
    return photo, user


def test_an_animation_whose_later_frames_show_a_dnp_guest_gets_a_file_of_its_own(group, group_faces, test_thresholds):
    """The reviewer's case: frame 0 has no face, the DNP guest (ready reference) shows up after it."""
    photo, user = dnp_guest_after_frame_0(group, group_faces)
    rendered_not_itself(photo, "animated", "webp")
    assert [variant.user_id for variant in photo.variants.all()] == [user]
    assert photo.faces.filter(matched_user_id=user, frame_time__gt=0).exists()
    report = io.StringIO()
    call_command("photo_report", str(photo.id), stdout=report)
    assert "media=animated duration_ms=400" in report.getvalue()
    tracks = [line for line in report.getvalue().splitlines() if line.startswith("  track ")]
    assert len(tracks) == photo.faces.values("track").distinct().count(), "one line per track"
    assert any(f"from=0.100s to=0.100s matched={user}" in line for line in tracks), tracks


@pytest.mark.parametrize("kind", ["GIF", "WEBP", "PNG", "AVIF"])
@pytest.mark.parametrize("job", ["face_process", "thumbnail_dims"])
def test_animated_uploads_are_rendered_in_every_photo_job(group, test_thresholds, kind, job):
    """thumbnail_dims too: with no DNP member and no region it would point the public keys at the upload."""
    photo = factories.photo(factories.event(), data=animation(faceless_then(small(group)), kind))
    send({"job": job, "photo_id": str(photo.id)})
    run_worker_drain()
    rendered_not_itself(photo, "animated", "webp")


@pytest.mark.parametrize("suffix", [".mp4", ".mov", ".webm", ".avi"])
def test_video_containers_are_videos_whatever_their_key(group, test_thresholds, suffix):
    photo = factories.photo(factories.event(), data=video(faceless_then(small(group)), suffix))
    send({"job": "thumbnail_dims", "photo_id": str(photo.id)})
    run_worker_drain()
    rendered_not_itself(photo, "video", "mp4")
    assert photo.duration_ms == 400, "4 frames at 10 fps"


def archived_unpublished(data: bytes, reason: str) -> None:
    photo = factories.photo(factories.event(), data=data)
    msg_id = send({"job": "face_process", "photo_id": str(photo.id)})
    run_worker_drain()
    assert archived()[msg_id] == (1, reason), "archived on its first try"
    photo.refresh_from_db()
    assert photo.processed_at is None
    assert photo.public_key is None


def test_pages_are_not_an_animation(group, test_thresholds):
    """A multi-page TIFF has no timing to keep: unsupported, archived on its first try, never published."""
    archived_unpublished(animation([small(group)] * 2, "TIFF"), "unsupported_media")


@pytest.mark.parametrize(("kind", "as_uploaded"), [("PNG", True), ("WEBP", True), ("AVIF", False)])
def test_single_frame_stills_of_other_formats_still_publish(group, test_thresholds, kind, as_uploaded):
    """A plain PNG or simple-format WebP is published as itself; an AVIF (whose boxes may hold
    further images) gets a rendered public file (faces/media/still.py, `attachments`)."""
    photo = factories.photo(factories.event(), data=animation([small(group)], kind))
    send({"job": "thumbnail_dims", "photo_id": str(photo.id)})
    run_worker_drain()
    photo.refresh_from_db()
    assert photo.processed_at is not None
    assert (photo.public_key == photo.upload_key) is as_uploaded
    if not as_uploaded:
        assert untokened(photo.public_key).endswith("/v1/public.jpg")


def test_an_animated_reference_is_failed_not_left_pending(group):
    user = factories.member(factories.event(), dnp=True)
    reference = factories.reference(user, data=animation(faceless_then(small(group)), "GIF"))
    msg_id = send({"job": "reference_process", "reference_id": str(reference.id)})
    run_worker_drain()
    assert archived()[msg_id] == (1, "unsupported_media")
    reference.refresh_from_db()
    assert reference.status == "failed"


@pytest.mark.parametrize("cut", [0.5, 0.9])
def test_a_video_that_breaks_off_is_undecodable_media_on_its_first_try(group, test_thresholds, cut):
    """Its index promises frames the file no longer holds: never retried, never published."""
    data = video([small(group)] * 12, ".mp4")
    archived_unpublished(data[: int(len(data) * cut)], "undecodable_media")


@pytest.mark.parametrize(
    ("kind", "reason"),
    [("GIF", "undecodable_media"), ("PNG", "undecodable_media"), ("WEBP", "undecodable_image")],
)
def test_an_animation_cut_short_is_archived_on_its_first_try(group, test_thresholds, kind, reason):
    """Its header still promises frames (WebP's does not even open): a clear reason, no retry."""
    frames = [np.roll(small(group), shift, axis=1) for shift in (0, 40, 80, 120)]
    data = animation(frames, kind)
    archived_unpublished(data[: len(data) // 2], reason)


def test_a_video_is_read_once_to_be_taken_on(group, monkeypatch):
    """Its timestamps and its first frame (size, turn) come from one read of the file; no other frame is decoded
    before the detection pass streams it."""
    frames = [np.roll(small(group), shift, axis=1) for shift in range(0, 48, 6)]
    data = video(frames, ".mp4")
    opened, decoded = [], []
    real_open, real_decode = av.open, av.Packet.decode
    monkeypatch.setattr(video_module.av, "open", lambda *a, **k: opened.append(1) or real_open(*a, **k))
    monkeypatch.setattr(av.Packet, "decode", lambda packet: decoded.append(packet.pts) or real_decode(packet))
    clip = video_module.Video(data)
    assert (len(opened), len(decoded), clip.frame_count) == (1, 1, 8), f"packets decoded to take it on: {decoded}"
    shown = list(clip.frames())
    assert len(shown) == 8
    assert shown[0][1].shape[:2] == (clip.height, clip.width)


def test_an_upload_over_the_byte_limit_is_never_read_whole(group, test_thresholds, media_limits):
    """Whatever its kind: the bytes are counted while they are read, before any header is looked at."""
    media_limits(upload_bytes=10_000)
    data = video([small(group)] * 4, ".mp4")
    assert len(data) > 10_000
    archived_unpublished(data, "media_too_large")


def test_a_blur_region_is_blurred_in_every_frame_of_a_video(group, test_thresholds):
    """thumbnail_dims with no DNP member: still rendered (never itself), the drawn rectangle in every frame."""
    frames = [np.roll(small(group), shift, axis=1) for shift in range(0, 60, 6)]
    region = {"x": 0.0, "y": 0.0, "w": 0.5, "h": 0.5}
    photo = factories.photo(factories.event(), data=video(frames, ".mp4"), blur_regions=[region])
    send({"job": "thumbnail_dims", "photo_id": str(photo.id)})
    run_worker_drain()
    rendered_not_itself(photo, "video", "mp4")
    with av.open(io.BytesIO(read_bytes(photo.upload_key))) as container:
        upload = [frame.to_ndarray(format="bgr24") for frame in container.decode(video=0)]
    with av.open(io.BytesIO(read_bytes(photo.public_key))) as container:
        public = [frame.to_ndarray(format="bgr24") for frame in container.decode(video=0)]
    assert len(public) == len(upload) == 10
    half_h, half_w = upload[0].shape[0] // 2, upload[0].shape[1] // 2
    for index, (source, out) in enumerate(zip(upload, public, strict=True)):
        inside = cv2.Laplacian(cv2.cvtColor(out[:half_h, :half_w], cv2.COLOR_BGR2GRAY), cv2.CV_32F)
        original = cv2.Laplacian(cv2.cvtColor(source[:half_h, :half_w], cv2.COLOR_BGR2GRAY), cv2.CV_32F)
        assert np.abs(inside).mean() < 0.3 * np.abs(original).mean(), f"frame {index}: the region keeps its detail"
        assert difference(out[half_h + 8 :, half_w + 8 :], source[half_h + 8 :, half_w + 8 :]) < 6, f"frame {index}"


def test_outputs_beyond_the_encoders_memory_take_more_passes(group, group_faces, test_thresholds, media_limits):
    """One output per pass here (as a 4K clip with several DNP members gets): the same files."""
    media_limits(encoded_pixels_at_once=1)
    event = factories.event()
    user = factories.member(event, dnp=True)
    factories.ready_reference(user, group_faces[0].embedding, group_faces[0].engine)
    photo = factories.photo(event, data=video([small(group)] * 6, ".mp4"))
    send({"job": "face_process", "photo_id": str(photo.id)})
    run_worker_drain()
    rendered_not_itself(photo, "video", "mp4")
    own = photo.variants.get()
    counts = []
    for key in (photo.public_key, own.key):
        with av.open(io.BytesIO(read_bytes(key))) as container:
            counts.append(sum(1 for _ in container.decode(video=0)))
    assert counts == [6, 6]
    assert read_bytes(photo.public_key) != read_bytes(own.key), "each pass renders its own file's blur"


def test_a_video_s_location_and_other_metadata_stay_out_of_its_files(group, test_thresholds, tmp_path):
    """Phones write where a clip was shot into the container; derived files carry no metadata of the upload."""
    path = tmp_path / "clip.mov"
    with av.open(str(path), "w", format="mov") as container:
        container.metadata["location"] = "+48.8577+002.2950/"
        stream = container.add_stream("libx264", rate=10)
        stream.width, stream.height, stream.pix_fmt = 640, 442, "yuv420p"
        for index in range(5):
            frame = av.VideoFrame.from_ndarray(small(group)[:442], format="bgr24")
            frame.pts, frame.time_base = index, Fraction(1, 10)
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    assert b"48.8577" in path.read_bytes()
    photo = factories.photo(factories.event(), data=path.read_bytes())
    send({"job": "face_process", "photo_id": str(photo.id)})
    run_worker_drain()
    rendered_not_itself(photo, "video", "mp4")
    published = read_bytes(photo.public_key)
    assert b"48.8577" not in published
    with av.open(io.BytesIO(published)) as container:
        assert "location" not in container.metadata


def test_a_track_of_unknown_faces_goes_into_one_cluster_whole(group, test_thresholds):
    """One identity per track: its faces are clustered together, counted once each."""
    frames = [np.roll(small(group), shift, axis=1) for shift in (0, 6, 12, 18)]
    photo = factories.photo(factories.event(), data=animation(frames, "WEBP"))
    send({"job": "face_process", "photo_id": str(photo.id)})
    run_worker_drain()
    rows = list(photo.faces.values_list("track", "unknown_cluster_id"))
    by_track = {}
    for track, cluster in rows:
        by_track.setdefault(track, set()).add(cluster)
    assert len(by_track) == 6, "t1's six guests, each linked across the 4 frames"
    assert all(len(clusters) == 1 and None not in clusters for clusters in by_track.values()), by_track
    counts = dict(UnknownCluster.objects.filter(event_id=photo.event_id).values_list("id", "face_count"))
    assert sum(counts.values()) == len(rows)


def test_reprocess_renders_a_clip_again_from_its_stored_tracks_without_detecting(
    group, group_faces, test_thresholds, monkeypatch
):
    photo, user = dnp_guest_after_frame_0(group, group_faces)
    photo.refresh_from_db()
    faces_before = sorted(photo.faces.values_list("id", "frame_time", "track"))
    detected_at = photo.faces_detected_at

    def no_detection(*args, **kwargs):
        raise AssertionError("reprocess detected")

    monkeypatch.setattr(InsightFaceEngine, "analyze", no_detection)
    EventMember.objects.filter(event_id=photo.event_id, user_id=user).update(status="left")
    send({"job": "reprocess", "photo_id": str(photo.id)})
    run_worker_drain()

    photo.refresh_from_db()
    assert archived() == {}
    assert photo.variant_version == 2
    assert photo.faces_detected_at == detected_at
    assert sorted(photo.faces.values_list("id", "frame_time", "track")) == faces_before
    assert untokened(photo.public_key).endswith("/v2/public.webp"), "still rendered, never the upload itself"
    assert not photo.variants.exists(), "the member left: no file of their own"
