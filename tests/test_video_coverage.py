"""Video at a photo's standard (docs/ARCHITECTURE.md §11): every frame a DNP face is in, 4K and small
faces, real phone files. Through `run_worker --drain` on real PostgreSQL and SeaweedFS, buffalo_s; each
published MP4 is decoded frame by frame and checked against the clip's own script
(tests/support/face_readings.py: blurred, intact)."""

import dataclasses
import io
from fractions import Fraction

import av
import cv2
import numpy as np
import pytest
from django.core.files.storage import default_storage

from faces.models import Photo, SubjectReference
from tests.support import factories, still_samples
from tests.support.face_readings import read_face, unblurred_frames
from tests.support.media_clips import background, guest, read_video
from tests.support.published_pictures import dnp_faces_in
from tests.support.publishing_helpers import run_worker_drain
from tests.support.queue_helpers import archived, send
from tests.support.stored_files import read_bytes
from tests.support.video_samples import LOOK_EVERY, encode, motion_blurred, occluded, resizing_webm, scene

pytestmark = pytest.mark.usefixtures("live_db", "s3_media_storage", "fast_retries", "test_thresholds")


@pytest.fixture
def dnp_event(group, group_faces):
    """An event whose DNP member is t1's leftmost guest (their reference ready)."""
    event = factories.event()
    user = factories.member_with_reference(event, group, group_faces[0])
    run_worker_drain()
    return event, user


def published(event, data: bytes) -> Photo:
    photo = factories.photo(event, data=data)
    send({"job": "face_process", "photo_id": str(photo.id)})
    run_worker_drain()
    photo.refresh_from_db()
    assert photo.processed_at is not None, archived()
    assert photo.media_type == "video"
    return photo


@pytest.mark.parametrize("fps", [30, 60])
@pytest.mark.parametrize("visible", [1, 3, 5])
def test_a_dnp_face_visible_only_between_two_looks_is_blurred_in_each_of_its_frames(
    dnp_event, group, group_faces, fps, visible
):
    """The guest steps in right after a look and is gone before the next one, `visible` frames later."""
    event, _ = dnp_event
    every = LOOK_EVERY[fps]
    clip = scene(
        group, group_faces, width=1280, height=720, scale=0.5, fps=fps, count=2 * every + 1,
        dnp_at=lambda i: (500, 60) if 1 <= i <= visible else None,
    )  # fmt: skip
    assert unblurred_frames(published(event, clip.data), clip) == []


def test_a_dnp_face_hidden_on_every_look_frame_is_blurred_in_every_frame_it_shows(dnp_event, group, group_faces):
    event, _ = dnp_event
    every = LOOK_EVERY[30]
    clip = scene(
        group, group_faces, width=1280, height=720, scale=0.5, count=3 * every + 1,
        dnp_at=lambda i: (500, 60), dnp_pixels=lambda i, who: occluded(who) if i % every == 0 else who,
    )  # fmt: skip
    clip = dataclasses.replace(clip, dnp=[None if i % every == 0 else box for i, box in enumerate(clip.dnp)])
    assert unblurred_frames(published(event, clip.data), clip) == []


def test_a_dnp_face_blurred_by_motion_on_every_look_frame_is_blurred_in_every_frame(dnp_event, group, group_faces):
    """Running across: smeared on the look frames (the detector misses it there), sharp in between. A smeared
    face is already smooth, so there the blur is checked by what it takes away: detail, and a change of its
    middle well beyond the codec's."""
    event, _ = dnp_event
    every = LOOK_EVERY[30]
    clip = scene(
        group, group_faces, width=1280, height=720, scale=0.5, count=3 * every + 1,
        dnp_at=lambda i: (200 + 20 * i, 60),
        dnp_pixels=lambda i, who: motion_blurred(who) if i % every == 0 else who,
    )  # fmt: skip
    photo = published(event, clip.data)
    sharp = dataclasses.replace(clip, dnp=[None if i % every == 0 else box for i, box in enumerate(clip.dnp)])
    assert unblurred_frames(photo, sharp) == []
    upload, public = read_video(read_bytes(photo.upload_key)), read_video(read_bytes(photo.public_key))
    for i in range(0, len(clip.dnp), every):
        reading = read_face(public.frames[i], upload.frames[i], clip.dnp[i])
        assert (reading.detail < 0.4, reading.change > 12) == (True, True), f"frame {i} (smeared): {reading}"


def test_a_4k_clip_with_28_px_dnp_faces_blurs_them_in_every_frame(dnp_event, group, group_faces):
    """3840x2160: the DNP guest's face 28 px wide, standing in one clip and walking in the other."""
    event, _ = dnp_event
    scale = 28 / (group_faces[0].box[2] - group_faces[0].box[0])
    for dnp_at in (lambda i: (1800, 900), lambda i: (1200 + 12 * i, 700)):
        clip = scene(group, group_faces, width=3840, height=2160, scale=scale, count=13, dnp_at=dnp_at)
        assert unblurred_frames(published(event, clip.data), clip) == []


def test_a_dnp_face_the_frame_edge_cuts_between_two_looks_is_blurred(dnp_event, group, group_faces):
    """The guest (a 56 px face) steps in at the frame's left edge, 45 % of the face past it, right after a
    look and gone before the next: the changed place is searched, and the cut face is blurred up to the edge.
    (Cut further, more of such faces are missed, on looks more than between them: ARCHITECTURE §11, "Edges and
    choices".)"""
    event, _ = dnp_event
    dnp = guest(group, group_faces[0].box, 0.5)
    x1, y1, x2, y2 = dnp.box
    cut = int(x1 + 0.45 * (x2 - x1))
    height, width = dnp.pixels.shape[:2]
    frames, boxes = [], []
    for index in range(2 * LOOK_EVERY[30] + 1):
        canvas = background(1280, 720)
        shown = 1 <= index <= 4
        if shown:
            canvas[200 : 200 + height, : width - cut] = dnp.pixels[:, cut:]
        frames.append(canvas)
        boxes.append((0.0, 200 + y1, x2 - cut, 200 + y2) if shown else None)
    data = encode(frames, [index / 30 for index in range(len(frames))], rate=30, base=Fraction(1, 30))
    photo = published(event, data)
    upload, public = read_video(read_bytes(photo.upload_key)), read_video(read_bytes(photo.public_key))
    unblurred = [
        index
        for index, box in enumerate(boxes)
        if box is not None and not read_face(public.frames[index], upload.frames[index], box).blurred
    ]
    assert unblurred == []


@pytest.mark.parametrize(
    "times",
    [
        [i / 30 for i in range(15)] + [0.5 + i / 20 for i in range(10)] + [1.0 + i / 30 for i in range(15)],
        [i / 30 for i in range(15)] + [2.5 + i / 30 for i in range(15)],
    ],
    ids=["variable frame rate 30-20-30 fps", "a 2 s gap"],
)
def test_a_phone_clip_with_a_variable_frame_rate_or_a_gap_keeps_its_timestamps(dnp_event, group, group_faces, times):
    event, _ = dnp_event
    shade = np.clip(background(640, 360).astype(np.int16) - 90, 0, 255).astype(np.uint8)  # low light
    frames = [shade.copy() for _ in times]
    photo = published(event, encode(frames, times))
    public = read_video(read_bytes(photo.public_key))
    assert len(public.times) == len(times)
    assert max(abs(a - b) for a, b in zip(public.times, times, strict=True)) <= 0.001


def test_a_webm_that_changes_resolution_both_ways_is_scaled_to_its_first_size(dnp_event, group, group_faces):
    event, _ = dnp_event
    base = scene(group, group_faces, width=640, height=360, scale=0.5, count=1, dnp_at=lambda i: (300, 40))
    first = read_video(base.data).frames[0]
    sizes = [(640, 360), (1280, 720), (320, 180)]
    parts = [[np.ascontiguousarray(cv2.resize(first, size)) for _ in range(8)] for size in sizes]
    photo = published(event, resizing_webm(parts))
    public = read_video(read_bytes(photo.public_key))
    assert public.size == (640, 360)
    assert len(public.frames) == 24
    assert all(frame.shape[:2] == (360, 640) for frame in public.frames)
    box = base.dnp[0]
    for frame in public.frames:  # the DNP face is blurred at every size the upload changed to
        assert read_face(frame, first, box).blurred


def test_a_hard_cut_never_links_a_member_to_the_dnp_guest_after_it(dnp_event, group, group_faces):
    """A member (t1's fourth guest) before the cut; right after it, the DNP guest about 5 face widths away."""
    from tests.support.media_clips import guest, paste

    event, dnp_user = dnp_event
    member = factories.member_with_reference(event, group, group_faces[3], dnp=False)
    run_worker_drain()
    width, height, cut = 1280, 720, 9
    dark, bright = np.full((height, width, 3), 40, np.uint8), np.full((height, width, 3), 200, np.uint8)
    frames, member_boxes, dnp_boxes = [], [], []
    for i in range(18):
        canvas = (dark if i < cut else bright).copy()
        who = guest(group, group_faces[3 if i < cut else 0].box, 0.6)
        box = paste(canvas, who, 300 + (0 if i < cut else 330), 200)
        (member_boxes if i < cut else dnp_boxes).append(box)
        frames.append(canvas)
    photo = published(event, encode(frames, [i / 30 for i in range(len(frames))]))

    upload, public = read_video(read_bytes(photo.upload_key)), read_video(read_bytes(photo.public_key))
    for i, box in enumerate(member_boxes):
        assert read_face(public.frames[i], upload.frames[i], box).intact, f"frame {i}: the member is blurred"
    for i, box in enumerate(dnp_boxes, start=cut):
        assert read_face(public.frames[i], upload.frames[i], box).blurred, f"frame {i}: the DNP guest is not"
    own = photo.variants.get(user_id=dnp_user)
    mine = read_video(read_bytes(own.key))
    assert all(read_face(mine.frames[i], upload.frames[i], box).intact for i, box in enumerate(dnp_boxes, cut))
    labels = {face.track: face.matched_user_id for face in photo.faces.all()}
    assert set(labels.values()) == {member, dnp_user}, "one track each, each matched to its own member"


def test_a_camcorder_mts_clip_is_published(dnp_event, group, group_faces):
    """MPEG-TS in 192-byte packets (BDAV), H.264 and AC-3, as camcorders write .MTS."""
    event, _ = dnp_event
    clip = scene(group, group_faces, width=1280, height=720, scale=0.5, count=13, dnp_at=lambda i: (500, 60))
    frames = read_video(clip.data).frames
    data = encode(frames, clip.times, fmt="mpegts", options={"mpegts_m2ts_mode": "1"}, audio="ac3")
    photo = published(event, data)
    assert photo.public_key.endswith(".mp4")
    assert unblurred_frames(photo, dataclasses.replace(clip, data=data)) == []
    assert read_video(read_bytes(photo.public_key)).audio_codec == "aac"


def test_a_picture_in_an_audio_packet_never_reaches_the_published_file(dnp_event, group, group_faces):
    """A JPEG of the DNP guest muxed as an AAC packet: the sound is decoded and encoded again, so the bytes go."""
    from momentlens.devservices import samples

    event, dnp_user = dnp_event
    portrait = still_samples.jpeg(samples.derived_portrait(group, group_faces[0].box))
    frames = [background(640, 360) for _ in range(13)]
    data = encode(frames, [i / 30 for i in range(13)], audio="aac", audio_payload=portrait)
    reference = np.asarray(SubjectReference.objects.get(user_id=dnp_user).embedding, np.float32)
    assert dnp_faces_in(data, {"the DNP guest": reference}, 0.30), "the upload carries the picture"
    photo = published(event, data)
    out = read_bytes(photo.public_key)
    assert portrait[:256] not in out
    assert dnp_faces_in(out, {"the DNP guest": reference}, 0.30) == []
    with av.open(io.BytesIO(out)) as container:
        assert container.streams.audio
        assert container.streams.audio[0].codec_context.name == "aac"
    assert default_storage.exists(photo.public_thumb_key)
